"""ErrorInfo: classifying any exception, and text-only errors."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tdk._failures.httpx_rows import HTTPX_TABLE
from tdk._failures.table import BUILTIN_TABLE, to_tool_error
from tdk.errors import (
    ErrorCategory,
    ErrorInfo,
    ErrorKind,
    RetryableToolError,
    ToolInputSchemaError,
    ToolkitLoadError,
    UpstreamRateLimitError,
)

REQUEST = httpx.Request(
    "GET", "https://user:pw@api.example.com/v1/items?api_key=sk-live-0123456789abcdef&page=2"
)


def _status_error(status: int) -> httpx.HTTPStatusError:
    response = httpx.Response(status, request=REQUEST, json={"error": {"message": "nope"}})
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        return exc
    raise AssertionError("raise_for_status did not raise")  # pragma: no cover


# (exception, kind, model-facing message): one row per row of the mapping table, and more.
MAPPING_CASES = [
    pytest.param(
        _status_error(429), ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT, None, id="HTTPStatusError-429"
    ),
    pytest.param(
        _status_error(404), ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND, None, id="HTTPStatusError-404"
    ),
    pytest.param(
        _status_error(502), ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR, None, id="HTTPStatusError-502"
    ),
    pytest.param(
        httpx.ReadTimeout("timed out", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        "The upstream service did not answer in time.",
        id="TimeoutException-ReadTimeout",
    ),
    pytest.param(
        httpx.ConnectTimeout("timed out", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        None,
        id="ConnectTimeout",
    ),
    pytest.param(
        httpx.PoolTimeout("no connection free", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        "The upstream service could not be reached in time.",
        id="PoolTimeout",
    ),
    pytest.param(
        httpx.ConnectError("[Errno -2] Name or service not known", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        "The upstream service could not be reached.",
        id="ConnectError",
    ),
    pytest.param(
        httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'."),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The request to the upstream service failed.",
        id="UnsupportedProtocol",
    ),
    pytest.param(
        httpx.ProxyError("proxy refused", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        None,
        id="ProxyError",
    ),
    pytest.param(
        httpx.RemoteProtocolError("peer closed connection", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        "The upstream service broke the HTTP protocol.",
        id="ProtocolError-Remote",
    ),
    pytest.param(
        httpx.ReadError("connection reset", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The connection to the upstream service failed.",
        id="TransportError-ReadError",
    ),
    pytest.param(
        httpx.TooManyRedirects("too many", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The request to the upstream service failed.",
        id="RequestError-TooManyRedirects",
    ),
    pytest.param(
        TimeoutError("slow"),
        ErrorKind.TOOL_RUNTIME_TIMEOUT,
        "The tool timed out.",
        id="TimeoutError",
    ),
    pytest.param(
        asyncio.CancelledError(),
        ErrorKind.TOOL_RUNTIME_CANCELLED,
        "The tool's work was cancelled.",
        id="CancelledError",
    ),
    pytest.param(
        ExceptionGroup("many", [KeyError("a"), ValueError("b"), KeyError("c")]),
        ErrorKind.TOOL_RUNTIME_FATAL,
        "The tool failed with several errors at once (KeyError, ValueError).",
        id="ExceptionGroup",
    ),
    pytest.param(
        KeyError("x"),
        ErrorKind.TOOL_RUNTIME_FATAL,
        "An unhandled KeyError was raised by the tool.",
        id="fallback-KeyError",
    ),
    pytest.param(
        httpx.InvalidURL("bad url"),
        ErrorKind.TOOL_RUNTIME_FATAL,
        "An unhandled InvalidURL was raised by the tool.",
        id="fallback-httpx-InvalidURL",
    ),
]


@pytest.mark.parametrize(("exc", "kind", "message"), MAPPING_CASES)
def test_foreign_exceptions_map_by_the_table(
    exc: BaseException, kind: ErrorKind, message: str | None
) -> None:
    """Each row of the mapping table gives its kind, the cause type and a safe message."""
    info = ErrorInfo.from_exception(exc, tool_name="fetch")
    assert info.kind is kind
    assert info.category is kind.category
    assert info.tool_name == "fetch"
    assert info.cause == type(exc).__name__
    if message is not None:
        assert info.message == message
    assert "pw@" not in json.dumps(info.to_dict())
    assert "sk-live" not in json.dumps(info.to_dict())


@pytest.mark.parametrize(("exc", "kind", "message"), MAPPING_CASES)
def test_reading_a_row_equals_making_its_error(
    exc: BaseException, kind: ErrorKind, message: str | None
) -> None:
    """``from_exception`` reads a row's fields without making the error; the result is exactly
    the ErrorInfo of the error a direct call would raise (the two paths cannot drift)."""
    secrets = ["0123456789abcdef"]
    read = ErrorInfo.from_exception(exc, "fetch", secrets=secrets)
    made = to_tool_error(exc, secrets=secrets)
    assert made.__cause__ is exc
    assert read == ErrorInfo.from_exception(made, "fetch", secrets=secrets)


def test_a_type_named_like_a_header_reads_as_a_header_line() -> None:
    """``Authorization: <text>`` is redacted as the header line it reads as, on both paths."""
    authorization = type("Authorization", (Exception,), {})
    exc = authorization("token qwertyuiop1234")
    read = ErrorInfo.from_exception(exc)
    assert read.developer_message == "Authorization: [REDACTED]"
    assert read == ErrorInfo.from_exception(to_tool_error(exc))


def test_every_table_row_is_exercised() -> None:
    """The cases above reach every row of both tables."""
    reached = {case.id.split("-")[0] for case in MAPPING_CASES}  # type: ignore[union-attr]
    assert set(HTTPX_TABLE) <= reached
    assert {cls.__name__.replace("Base", "") for cls in BUILTIN_TABLE} <= reached


def test_thousands_of_exception_types_keep_the_type_table_small() -> None:
    """Mapping exceptions of ever new types (classes made on the fly) remembers at most a
    bounded number of them."""
    from tdk._failures.table import _MAX_REMEMBERED_TYPES, _ROW_OF_TYPE, to_tool_error

    for n in range(_MAX_REMEMBERED_TYPES + 10):
        error = to_tool_error(type(f"Made{n}", (LookupError,), {})())
        assert error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert len(_ROW_OF_TYPE) <= _MAX_REMEMBERED_TYPES


def test_most_specific_row_wins() -> None:
    """ConnectTimeout is both a timeout and a transport error; the timeout row is more specific."""
    info = ErrorInfo.from_exception(httpx.ConnectTimeout("x", request=REQUEST))
    assert info.kind is ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT


def test_network_errors_carry_the_redacted_request() -> None:
    """Method and URL are in details, without userinfo or query secrets."""
    info = ErrorInfo.from_exception(httpx.ReadError("reset", request=REQUEST))
    assert info.details == {
        "method": "GET",
        "url": "https://api.example.com/v1/items?api_key=[REDACTED]&page=2",
    }


@pytest.mark.parametrize(
    ("exc", "sent"),
    [
        pytest.param(httpx.ConnectError("refused", request=REQUEST), False, id="connect-error"),
        pytest.param(httpx.ConnectTimeout("slow", request=REQUEST), False, id="connect-timeout"),
        pytest.param(httpx.PoolTimeout("no connection", request=REQUEST), False, id="pool-timeout"),
        pytest.param(httpx.UnsupportedProtocol("ftp"), False, id="unsupported-protocol"),
        pytest.param(httpx.ReadTimeout("slow", request=REQUEST), None, id="read-timeout"),
        pytest.param(httpx.ReadError("reset", request=REQUEST), None, id="read-error"),
        pytest.param(httpx.RemoteProtocolError("bad", request=REQUEST), None, id="protocol"),
        pytest.param(httpx.ProxyError("refused", request=REQUEST), None, id="proxy-error"),
    ],
)
def test_errors_raised_before_sending_say_so(exc: Exception, sent: bool | None) -> None:
    """``details["request_sent"]`` is False where the request certainly never left (the
    runner then retries even a write); it is absent where it may have been sent."""
    assert ErrorInfo.from_exception(exc).details.get("request_sent", None) is sent


def test_network_error_without_request() -> None:
    """An httpx error built without a request still maps, with no request details."""
    info = ErrorInfo.from_exception(httpx.ConnectError("refused"))
    assert info.kind is ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE
    assert info.details == {"request_sent": False}


def test_http_status_error_keeps_the_status() -> None:
    """raise_for_status() inside a tool keeps the status code."""
    info = ErrorInfo.from_exception(_status_error(503))
    assert info.status_code == 503
    assert info.retryable


def test_unknown_exception_message_names_only_the_type() -> None:
    """The model sees the type; the developer sees the text."""
    try:
        {}["x"]
    except KeyError as exc:
        info = ErrorInfo.from_exception(exc, tool_name="lookup")
    assert info.error == "FatalToolError"
    assert info.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert info.message == "An unhandled KeyError was raised by the tool."
    assert info.developer_message == "KeyError: 'x'"
    assert info.retryable is False
    assert info.stacktrace is None


def test_tdk_errors_keep_their_fields_and_gain_the_tool_name() -> None:
    """A tdk error is not re-mapped; a missing tool name is filled in."""
    error = RetryableToolError("Try again.", additional_prompt_content="Use q=python")
    info = ErrorInfo.from_exception(error, tool_name="search")
    assert info.kind is ErrorKind.TOOL_RUNTIME_RETRY
    assert info.additional_prompt_content == "Use q=python"
    assert info.tool_name == "search"
    assert info.cause is None
    assert error.tool_name is None  # the exception itself is not mutated


def test_an_existing_tool_name_is_kept() -> None:
    """The error's own tool name wins over the caller's."""
    info = ErrorInfo.from_exception(RetryableToolError("x", tool_name="a"), tool_name="b")
    assert info.tool_name == "a"


def test_chained_tdk_error_reports_its_cause() -> None:
    """A tdk error raised from another exception names that exception as cause."""
    try:
        try:
            raise OSError("disk")
        except OSError as exc:
            raise ToolkitLoadError("cannot load", toolkit="t") from exc
    except ToolkitLoadError as error:
        info = ErrorInfo.from_exception(error)
    assert info.cause == "OSError"


class _StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def _cyclic() -> Exception:
    first, second = ValueError("a"), ValueError("b")
    first.__cause__ = second
    second.__cause__ = first
    first.__context__ = second
    return first


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(_StrRaises(), id="str-raises"),
        pytest.param(ValueError("x" * 1_000_000), id="one-megabyte"),
        pytest.param(_cyclic(), id="cyclic-cause"),
        pytest.param(ValueError(), id="empty-message"),
        pytest.param(KeyboardInterrupt(), id="keyboard-interrupt"),
    ],
)
@pytest.mark.parametrize("stacktrace", [False, True], ids=["plain", "with-stacktrace"])
def test_hostile_exceptions_still_give_a_valid_error_info(
    exc: BaseException, stacktrace: bool
) -> None:
    """Whatever the exception does, the result is a valid, bounded, serialisable ErrorInfo."""
    info = ErrorInfo.from_exception(exc, include_stacktrace=stacktrace)
    assert info.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert info.message == f"An unhandled {type(exc).__name__} was raised by the tool."
    assert info.developer_message is not None
    assert len(info.developer_message) < 4100
    assert (info.stacktrace is not None) is stacktrace
    ErrorInfo.model_validate_json(json.dumps(info.to_dict()))


def test_str_raising_is_named_in_the_developer_message() -> None:
    """An exception whose str() raises is still described by its type."""
    info = ErrorInfo.from_exception(_StrRaises())
    assert info.developer_message == "_StrRaises: <str() of the exception raised>"


def test_long_messages_say_how_much_was_cut() -> None:
    """A truncated developer message says so."""
    info = ErrorInfo.from_exception(ValueError("y" * 10_000))
    assert info.developer_message is not None
    assert info.developer_message.endswith("... [6012 more characters]")


def test_stacktrace_is_opt_in_and_redacted() -> None:
    """The traceback appears only on request, and without secrets."""
    secret = "hunter2-secret-value"

    def tool_body() -> None:
        raise ValueError(f"login failed with {secret} at https://u:p@example.com/")

    try:
        tool_body()
    except ValueError as exc:
        plain = ErrorInfo.from_exception(exc, secrets=[secret])
        traced = ErrorInfo.from_exception(exc, include_stacktrace=True, secrets=[secret])
    assert plain.stacktrace is None
    assert traced.stacktrace is not None
    assert "tool_body" in traced.stacktrace
    assert secret not in json.dumps(traced.to_dict())
    assert "u:p@" not in json.dumps(traced.to_dict())


def test_stacktrace_of_a_tdk_error() -> None:
    """A tdk error's own traceback can be included too."""
    try:
        raise RetryableToolError("again")
    except RetryableToolError as error:
        info = error.to_error_info(include_stacktrace=True)
    assert info.stacktrace is not None
    assert "RetryableToolError: [TOOL_RUNTIME_RETRY]" in info.stacktrace


@pytest.mark.parametrize(
    ("text", "kind", "error", "tool", "message"),
    [
        pytest.param(
            "[TOOL_RUNTIME_RETRY] RetryableToolError during execution of tool 'get_posts': "
            "Retry with subreddit=python",
            ErrorKind.TOOL_RUNTIME_RETRY,
            "RetryableToolError",
            "get_posts",
            "Retry with subreddit=python",
            id="runtime",
        ),
        pytest.param(
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': parameter 'q' has no type",
            ErrorKind.TOOL_DEFINITION_BAD_INPUT_SCHEMA,
            "ToolInputSchemaError",
            "search",
            "parameter 'q' has no type",
            id="definition",
        ),
        pytest.param(
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit 'reddit': boom",
            ErrorKind.TOOLKIT_LOAD_FAILED,
            "ToolkitLoadError",
            None,
            "boom",
            id="toolkit",
        ),
        pytest.param(
            "[UPSTREAM_RUNTIME_RATE_LIMIT] UpstreamRateLimitError: slow down",
            ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT,
            "UpstreamRateLimitError",
            None,
            "slow down",
            id="no-tool",
        ),
        pytest.param(
            "Something went wrong",
            ErrorKind.UNKNOWN,
            "ToolError",
            None,
            "Something went wrong",
            id="free-text",
        ),
        pytest.param(
            "[NOT_A_KIND] Foo: bar",
            ErrorKind.UNKNOWN,
            "ToolError",
            None,
            "[NOT_A_KIND] Foo: bar",
            id="unknown-kind",
        ),
    ],
)
def test_from_error_string(
    text: str, kind: ErrorKind, error: str, tool: str | None, message: str
) -> None:
    """tdk's own str() format is recovered; other text becomes UNKNOWN."""
    info = ErrorInfo.from_error_string(text)
    assert (info.kind, info.error, info.tool_name, info.message) == (kind, error, tool, message)
    assert info.retryable is kind.default_retryable


def test_from_error_string_round_trips_str() -> None:
    """str() of an error parses back to the same kind, class, tool and message."""
    error = ToolInputSchemaError("2 problems: a; b", tool_name="search")
    info = ErrorInfo.from_error_string(str(error))
    assert (info.kind, info.error, info.tool_name, info.message) == (
        error.kind,
        "ToolInputSchemaError",
        "search",
        error.message,
    )


def test_from_error_string_redacts_and_takes_the_tool_name() -> None:
    """Text from outside is redacted; an explicit tool name is used."""
    info = ErrorInfo.from_error_string("failed with Bearer abcdefghijklmnop", tool_name="t")
    assert info.message == "failed with [REDACTED]"
    assert info.tool_name == "t"
    assert info.category is ErrorCategory.EXECUTION


def test_error_info_is_frozen() -> None:
    """ErrorInfo is immutable data."""
    info = ErrorInfo.from_exception(KeyError("x"))
    with pytest.raises(Exception, match="frozen"):
        info.message = "changed"  # type: ignore[misc]


def test_from_exception_redacts_every_text_field() -> None:
    """Known secrets and token shapes are scrubbed from a tdk error's text and details."""
    secret = "planted-secret-0042"
    error = RetryableToolError(
        f"refused {secret}",
        developer_message=f"token={secret}",
        additional_prompt_content=f"never send {secret}",
        details={"nested": [{"value": secret}], "auth": "Bearer abcdefghijklmnop"},
    )
    info = ErrorInfo.from_exception(error, secrets=iter([secret]))
    assert secret not in json.dumps(info.to_dict())
    assert "abcdefghijklmnop" not in json.dumps(info.to_dict())
    assert info.message == "refused [REDACTED]"
    assert error.message == f"refused {secret}"  # the exception itself is untouched


def test_log_line_of_error_info() -> None:
    """ErrorInfo has the same one-line log form as the error."""
    error = UpstreamRateLimitError("Slow down.", status_code=429, retry_after_ms=2000)
    assert error.to_error_info().to_log_line() == error.to_log_line()


def test_credential_named_keys_in_details_are_redacted_whole() -> None:
    """Structured details never carry a header or credential value, whatever its shape."""
    error = RetryableToolError(
        "refused",
        details={
            "request_headers": {"Authorization": "Token 9f8e7d6c5b4a", "Cookie": "sid=abc123"},
            "query": {"api_key": "QQQ111222333", "page": "2"},
            "code": "rate_limit",
        },
    )
    details = ErrorInfo.from_exception(error).details
    assert details == {
        "request_headers": {"Authorization": "[REDACTED]", "Cookie": "[REDACTED]"},
        "query": {"api_key": "[REDACTED]", "page": "2"},
        "code": "rate_limit",
    }


def test_an_errors_own_info_and_log_line_are_redacted() -> None:
    """to_error_info() and to_log_line() scrub token shapes and the secrets given."""
    error = RetryableToolError("token sk-abcdefghijklmnopqrstuvwx and hunter2-secret refused")
    assert "sk-abc" not in error.to_log_line()
    info = error.to_error_info(secrets=["hunter2-secret"])
    assert info.message == "token [REDACTED] and [REDACTED] refused"
    assert error.message.startswith("token sk-abc")  # the object keeps what it was given
