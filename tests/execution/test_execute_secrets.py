"""Running tools without leaking: stack traces, redaction of secrets (in every escaped form an
echo may write them), and logging (one line per failure, a handler that fails costs no
result)."""

from __future__ import annotations

import asyncio
import gc
import html
import json
import logging
import re
import weakref
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Final
from urllib.parse import quote

import httpx
import pytest
from _bounded import run_bounded
from _execute_support import (
    add,
    echo_number,
    liar,
    run,
)
from pydantic import Field

import tdk.http
from tdk import Tool, ToolContext, Toolkit, tool
from tdk.errors import (
    ErrorKind,
    FatalToolError,
    RetryableToolError,
)
from tdk.testing import Canaries


class Traced(Exception):
    """An exception that records a weak reference to each instance (builtins allow none)."""

    made: ClassVar[list[weakref.ref[Traced]]] = []

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        Traced.made.append(weakref.ref(self))


@tool
async def traced() -> int:
    """Fail with a Traced error."""
    raise Traced("boom")


@tool
def traced_in_thread() -> int:
    """Fail with a Traced error, in a worker thread."""
    raise Traced("boom")


@tool(inline=True)
def traced_inline() -> int:
    """Fail with a Traced error, on the event loop."""
    raise Traced("boom")


@tool(timeout=10)
def traced_with_limit() -> int:
    """Fail with a Traced error, in a worker thread, under a time limit."""
    raise Traced("boom")


@pytest.mark.parametrize(
    "target",
    [traced, traced_in_thread, traced_inline, traced_with_limit],
    ids=["async", "sync-thread", "sync-inline", "sync-time-limit"],
)
@pytest.mark.parametrize("stacktrace", [False, True], ids=["plain", "with-stacktrace"])
def test_a_failed_call_leaves_no_reference_cycle(target: Tool[..., Any], stacktrace: bool) -> None:
    """The exception of a failed call is freed as soon as the result is returned, without the
    garbage collector: a traceback holding the frame that holds the exception (or the future
    that carried it from a worker thread) would make every failure a cycle to collect."""
    gc.collect()
    gc.disable()
    try:
        result = run(target, {}, include_stacktrace=stacktrace)
        assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
        assert Traced.made[-1]() is None
    finally:
        gc.enable()


def test_stacktrace_only_on_request() -> None:
    """Stack traces are captured, but reach the result only when the caller opts in."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    assert run(broken, {}).error.stacktrace is None  # type: ignore[union-attr]
    traced = run(broken, {}, include_stacktrace=True).error
    assert traced is not None
    assert traced.stacktrace is not None
    assert "in broken" in traced.stacktrace


SECRET = "s3cr3t-planted-value-9876"


def test_a_planted_secret_appears_nowhere(tdk_secrets: Canaries) -> None:
    """A context secret planted in every reachable place leaks into no output of the call:
    ``tdk_secrets`` fails the test naming any sink its canary reached (the result, its
    ``repr``/``str``, every log record at any level, every span)."""

    @tool(requires_secrets=["TOKEN"])
    def leaky(context: ToolContext) -> int:
        """Fail in every way that could carry the secret."""
        token = context.get_secret("TOKEN")
        url = f"https://user:{token}@api.example.com/x?api_key={token}"
        request = httpx.Request("GET", url, headers={"Authorization": f"Bearer {token}"})
        try:
            raise ValueError(f"inner failure with {token}")
        except ValueError as inner:
            raise RetryableToolError(
                f"Upstream refused token {token}",
                developer_message=f"request {request!r} headers {dict(request.headers)}",
                additional_prompt_content=f"Do not send {token} again",
                details={"url": url, "nested": [{"token": token}]},
            ) from inner

    result = run(leaky, {}, context=tdk_secrets.context(leaky), include_stacktrace=True)
    assert result.kind is ErrorKind.TOOL_RUNTIME_RETRY
    tdk_secrets.check(result, sink="result")
    tdk_secrets.check(repr(result), sink="repr")
    tdk_secrets.check(str(result), sink="str")


UNKNOWN_KEY = "k-unknown-to-tdk-4242"


@pytest.mark.parametrize(
    "describe",
    [
        pytest.param(lambda r: f"headers {r.headers!r}", id="repeated-headers-repr"),
        pytest.param(lambda r: f"raw {r.headers.raw}", id="raw-header-tuples"),
        pytest.param(lambda r: f"headers {dict(r.headers)}", id="headers-dict"),
        pytest.param(lambda r: f"url {r.url}", id="path-parameter"),
    ],
)
def test_credentials_the_context_does_not_know_are_redacted(describe: Any) -> None:
    """A key the tool found elsewhere (not in its context, not a known token shape) is still
    scrubbed from a description of the request's headers or URL, by position."""
    request = httpx.Request(
        "GET",
        f"https://api.example.com/app;jsessionid={UNKNOWN_KEY}",
        headers=[("X-Api-Key", UNKNOWN_KEY), ("x-api-key", UNKNOWN_KEY), ("Accept", "*/*")],
    )

    @tool
    def fetch() -> int:
        """Fail, describing the request."""
        raise RuntimeError(describe(request))

    result = run(fetch, {}, include_stacktrace=True)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert UNKNOWN_KEY not in json.dumps(result.to_dict())
    assert "[REDACTED]" in (result.error.developer_message or "")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raised", "path_secret", "shown"),
    [
        pytest.param(httpx.ConnectError, "pathsecret-31337", "bot[REDACTED]", id="connect-error"),
        pytest.param(httpx.ReadTimeout, "pathsecret-31337", "bot[REDACTED]", id="read-timeout"),
        pytest.param(httpx.ConnectError, "tok en-1234", "bot[REDACTED]", id="percent-encoded"),
        pytest.param(httpx.ConnectError, "tok en/12:34", "bot[REDACTED]", id="path-encoded"),
    ],
)
def test_a_secret_in_a_url_path_leaves_no_trace(
    raised: type[httpx.RequestError], path_secret: str, shown: str
) -> None:
    """A transport error's ``details["url"]`` keeps the path, but not a context secret in it,
    even in the percent-encoded form httpx gives the URL."""

    @tool
    def fetch(context: ToolContext) -> int:
        """Fail to reach a URL with a secret in its path."""
        url = f"https://api.example.com/bot{context.get_secret('KEY')}/send"
        raise raised("no route", request=httpx.Request("GET", url))

    result = run(fetch, {}, context=ToolContext(secrets={"KEY": path_secret}))
    assert result.error is not None
    assert result.error.details["url"] == f"https://api.example.com/{shown}/send"
    dumped = json.dumps(result.to_dict())
    assert path_secret not in dumped
    assert "tok%20en" not in dumped


def test_a_secret_used_as_a_details_key_is_redacted() -> None:
    """``details`` keys are redacted like values: a secret can be a key by mistake. Keys that
    differed only by a secret are all kept."""

    @tool
    def keyed(context: ToolContext) -> int:
        """Fail with the secret as a details key."""
        secret = context.get_secret("KEY")
        raise RetryableToolError(
            "try again",
            details={secret: "seen", "token=abc123": 1, "token=def456": 2},
        )

    result = run(keyed, {}, context=ToolContext(secrets={"KEY": SECRET}))
    assert result.error is not None
    assert result.error.details == {
        "[REDACTED]": "seen",
        "token=[REDACTED]": 1,
        "token=[REDACTED] (2)": 2,
    }


def test_a_secret_in_a_long_key_of_details_is_redacted_whole() -> None:
    """A context secret in the text of a non-string key of details, past its 200th
    character, is redacted whole (the key is not cut before the redaction sees it)."""
    secret = "tok-4f9a1c7e2b8d6a3f0e5c"

    @tool
    def raises(context: ToolContext) -> int:
        """Raise with a long tuple key."""
        raise RetryableToolError("Try again.", details={("x" * 190, secret): "value"})

    error = run_bounded(raises.run({}, context=ToolContext(secrets={"api": secret}))).error
    assert error is not None
    (key,) = error.details
    assert secret[:4] not in key
    assert secret[-4:] not in key
    assert "[REDACTED]" in key


def test_header_pairs_in_details_lose_their_credentials() -> None:
    """``details={"h": list(headers.items())}`` keeps the header names and loses the key."""
    key = "k-1234567890abcdef"

    @tool
    def raises() -> int:
        """Raise with the request's headers in the details."""
        headers = {"x-api-key": key, "accept": "application/json"}
        raise RetryableToolError("Try again.", details={"h": list(headers.items())})

    result = run_bounded(raises.run({}))
    assert result.error is not None
    assert result.error.details["h"] == [
        ["x-api-key", "[REDACTED]"],
        ["accept", "application/json"],
    ]
    assert key not in json.dumps(result.to_dict())


_ECHOES: Final[dict[str, Callable[[str], BaseException]]] = {
    "repr": KeyError,
    "repr-in-text": lambda value: KeyError(f"it's {value}"),
    "json": lambda value: ValueError(json.dumps({"detail": f"bad {value}"})),
    "php-json": lambda value: ValueError(json.dumps(value).replace("/", "\\/")),
    "go-json": lambda value: ValueError(_go_json(value)),
    "html": lambda value: ValueError(f"<p>{html.escape(value)}</p>"),
    "url-lower-hex": lambda value: ValueError(re.sub("%[0-9A-F]{2}", _lower, quote(value))),
    "bytes-repr": lambda value: ValueError(repr(value.encode())),
}


def _go_json(value: str) -> str:
    """What Go's ``encoding/json`` writes by default (HTML characters escaped)."""
    escaped = json.dumps(value, ensure_ascii=False)
    return escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _lower(escape: re.Match[str]) -> str:
    return escape[0].lower()


@pytest.mark.parametrize(
    "secret",
    [
        "Xy7\\kLm9PqR2sT5v",
        "Xy7\"kLm9'PqR2sT5v",
        "Xy7\nkLm9PqR2sT5v",
        "Xy7'kLm9\\PqR2sT5v",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYkLm9KEY",
        "pa55&w0rd<kLm9>xyz",
        "caf\u00e9-kLm9-s3cr3t",
    ],
    ids=[
        "backslash",
        "both-quotes",
        "newline",
        "quote-and-backslash",
        "slashes",
        "amp-lt-gt",
        "accent",
    ],
)
@pytest.mark.parametrize("how", list(_ECHOES))
def test_a_context_secret_is_scrubbed_in_its_escaped_forms(secret: str, how: str) -> None:
    """A context secret with characters that writers escape, shown escaped (as ``repr()``
    writes it in a ``KeyError``, as PHP's, Go's or Python's JSON, HTML or a URL write it in an
    upstream's echo), is scrubbed too."""

    @tool
    def fails(context: ToolContext) -> int:
        """Fail with the secret in the text, escaped."""
        raise _ECHOES[how](context.secrets["api"])

    error = run_bounded(fails.run({}, context=ToolContext(secrets={"api": secret}))).error
    assert error is not None
    shown = f"{error.message}\n{error.developer_message}\n{json.dumps(error.details)}"
    assert "kLm9" not in shown, shown


@pytest.mark.parametrize(
    "secret", ["tok|en value-123456", "tok{en}^[x]`é-123456", "100%-sure|token value"]
)
def test_a_secret_in_a_url_path_is_scrubbed_as_httpx_encodes_it(secret: str) -> None:
    """A context secret in a URL path leaves no trace in whatever form httpx writes it there
    (it leaves ``|^[]`` as they are and encodes spaces, braces and non-ASCII)."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"message": f"no bot {request.url.raw_path!r}"})

    @tool
    def calls(context: ToolContext) -> int:
        """Call an API with the secret in the path."""
        with tdk.http.install(httpx.Client(transport=httpx.MockTransport(upstream))) as client:
            client.get(f"https://api.example.com/bot{context.get_secret('BOT')}/getMe")
        return 1

    result = run_bounded(calls.run({}, context=ToolContext(secrets={"BOT": secret})))
    text = json.dumps(result.to_dict())
    assert result.error is not None
    assert result.error.details["url"] == "https://api.example.com/bot[REDACTED]/getMe"
    encoded = httpx.URL(f"https://h/{secret}").raw_path.decode()[1:]
    assert encoded not in text


def test_a_context_that_is_not_a_tool_context_is_refused() -> None:
    """A wrong ``context=`` is the caller's bug, reported as such, before the call runs."""
    with pytest.raises(TypeError, match="context must be a ToolContext or None, not dict"):
        run(add, {"a": 1, "b": 2}, context={"secrets": {}})


def test_empty_and_missing_secret_values_are_harmless() -> None:
    """A context may hold None or empty values (``os.environ.get`` of an unset variable):
    they are not scrubbed, and calls that succeed or fail return their result."""
    context = ToolContext(secrets={"OPTIONAL": None, "EMPTY": "", "API": "realsecret-1234"})  # type: ignore[dict-item]
    assert run(add, {"a": 1, "b": 2}, context=context).value == 3
    failed = run(add, {"a": "x"}, context=context)
    assert failed.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    broken = run(traced, {}, context=context)
    assert broken.kind is ErrorKind.TOOL_RUNTIME_FATAL


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        pytest.param('{"items": 5, "opts": 3}', "'items' should be a valid array", id="json-list"),
        pytest.param('{"items": 5, "opts": 3}', "'opts' should be an object", id="json-dict"),
        pytest.param({"items": 5, "opts": 3}, "'items' should be a valid list", id="python-list"),
        pytest.param({"items": [1], "opts": {"a": 99}}, "less than or equal to 10", id="context"),
    ],
)
def test_pydantics_own_messages_are_kept_for_json_and_python_input(
    arguments: Any, fragment: str
) -> None:
    """pydantic words some messages differently for JSON text and Python data; both are its
    own, and both reach the model (only texts that are not pydantic's are withheld)."""

    @tool
    def sized(
        items: Annotated[list[int], "Items."],
        opts: Annotated[dict[str, Annotated[int, Field(le=10)]], "Options."],
    ) -> int:
        """Count."""
        return len(items) + len(opts)

    result = run(sized, arguments)
    assert result.error is not None
    assert fragment in result.error.message
    assert "is not valid" not in result.error.message


def test_one_log_record_per_failure(caplog: pytest.LogCaptureFixture) -> None:
    """Failures log once: WARNING for call failures, ERROR for tool bugs; success is silent."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    with caplog.at_level(logging.DEBUG, logger="tdk"):
        run(add, {"a": 1, "b": 2})
        run(add, {"a": "x"})
        run(broken, {})
        run(liar, {})
    records = [r for r in caplog.records if r.name == "tdk"]
    assert [(r.levelname, r.tdk_error["kind"]) for r in records] == [  # type: ignore[attr-defined]
        ("WARNING", "TOOL_RUNTIME_BAD_INPUT_VALUE"),
        ("ERROR", "TOOL_RUNTIME_FATAL"),
        ("ERROR", "TOOL_RUNTIME_BAD_OUTPUT_VALUE"),
    ]
    assert records[1].getMessage().startswith("kind=TOOL_RUNTIME_FATAL tool=broken ")


def test_auth_token_is_redacted() -> None:
    """The context's auth token is scrubbed like its secrets."""

    @tool
    def echo_token(context: ToolContext) -> int:
        """Fail with the token in the message."""
        raise RetryableToolError(f"token {context.auth_token} expired")

    result = run(echo_token, {}, context=ToolContext(auth_token="user-token-77777"))
    assert result.error is not None
    assert result.error.message == "token [REDACTED] expired"


def test_no_log_record_when_logging_is_off(caplog: pytest.LogCaptureFixture) -> None:
    """Failures cost no formatting when the tdk logger is silenced."""
    with caplog.at_level(logging.CRITICAL, logger="tdk"):
        run(add, {"a": "x"})
    assert not [r for r in caplog.records if r.name == "tdk"]


def test_direct_call_redacts_context_secrets() -> None:
    """A direct call's mapped error scrubs the secrets of the ToolContext it was given."""

    @tool
    def leaky(context: ToolContext, n: Annotated[int, "A number."]) -> int:
        """Fail with the secret in the message."""
        raise KeyError(context.get_secret("K"))

    with pytest.raises(FatalToolError) as caught:
        leaky(ToolContext(secrets={"K": "hunter2-very-secret"}), 1)
    assert "hunter2" not in json.dumps(caught.value.to_dict())
    with pytest.raises(FatalToolError) as caught:
        leaky(n=1, context=ToolContext(secrets={"K": "hunter2-very-secret"}))
    assert "hunter2" not in str(caught.value.developer_message)


def test_unknown_tool_name_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """A tool name sent by the model is quoted in the log line, so it stays one line."""
    toolkit = Toolkit("t", tools=[add])
    with caplog.at_level(logging.WARNING, logger="tdk"):
        asyncio.run(toolkit.run("nope\nWARNING tdk kind=TOOL_RUNTIME_FATAL tool=a", {}))
    (record,) = [r for r in caplog.records if r.name == "tdk"]
    assert "\n" not in record.getMessage()
    assert 'tool="nope\\nWARNING' in record.getMessage()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("search\u2028WARNING tdk: forged", id="line-separator"),
        pytest.param("search\x85WARNING tdk: forged", id="next-line"),
        pytest.param("exe.\u202etxt", id="right-to-left-override"),
    ],
)
def test_an_unknown_tool_name_cannot_split_or_reorder_the_log_line(
    caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """A name the model made up, repeated in the failure's log record, leaves it one line
    with nothing hidden: what would split the line or reorder its text is escaped."""
    toolkit = Toolkit("hostile", [echo_number])
    with caplog.at_level(logging.WARNING, logger="tdk"):
        result = run_bounded(toolkit.run(name, {}))
    assert result.kind is ErrorKind.TOOL_NOT_FOUND
    [record] = [r for r in caplog.records if r.name == "tdk"]
    line = record.getMessage()
    assert len(line.splitlines()) == 1
    assert not set(line) & {"\u2028", "\x85", "\u202e"}


class _ExplodingHandler(logging.Handler):
    """A handler that fails outright (as logging's own error report does when stderr is
    closed: ``ValueError: I/O operation on closed file``)."""

    def handle(self, record: logging.LogRecord) -> bool:
        raise ValueError("I/O operation on closed file.")


def test_a_failing_log_handler_never_costs_a_call_its_result() -> None:
    """The failure's record goes to a handler that raises: the call still returns its
    result (execute's promise: only the caller's cancellation and exits escape)."""

    @tool
    async def fails() -> int:
        """Fail."""
        raise RuntimeError("boom")

    handler = _ExplodingHandler()
    tdk_logger = logging.getLogger("tdk")
    tdk_logger.addHandler(handler)
    try:
        result = run_bounded(fails.run({}))
    finally:
        tdk_logger.removeHandler(handler)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL


@pytest.mark.parametrize("status", [302, 404], ids=["redirect", "not-found"])
def test_raise_for_status_never_leaks_the_url(status: int) -> None:
    """httpx's own message quotes the whole URL; neither the result nor the trace keeps it."""
    token = "q7RkVt-very-secret-token"

    def upstream(request: httpx.Request) -> httpx.Response:
        headers = {"Location": "https://elsewhere.example/"} if status == 302 else {}
        return httpx.Response(status, headers=headers, json={"message": "no"})

    @tool
    def fetch() -> str:
        """Fetch with credentials in the query, under names redaction does not know."""
        with httpx.Client(transport=httpx.MockTransport(upstream)) as client:
            url = f"https://api.example.com/items?mytoken={token}&auth_token={token}&page=2"
            client.get(url).raise_for_status()
        return "ok"

    result = run(fetch, {}, include_stacktrace=True)
    assert result.error is not None
    assert result.error.stacktrace is not None
    assert token not in json.dumps(result.to_dict())
    assert "https://api.example.com/items?mytoken=[REDACTED]" in json.dumps(result.to_dict())


def test_a_context_secret_echoed_by_the_upstream_appears_nowhere() -> None:
    """The mapped upstream error (built once, redacted once) never carries a context secret."""
    planted = "ctx-secret-value-777777"

    def upstream(request: httpx.Request) -> httpx.Response:
        body = {"error": {"message": f"bad {planted}", "code": planted, "type": planted}}
        return httpx.Response(400, json=body, headers={"x-request-id": planted})

    @tool
    def echoing(context: ToolContext) -> int:
        """Call an upstream that echoes what it was sent."""
        with httpx.Client(transport=httpx.MockTransport(upstream)) as client:
            client.get("https://api.example.com/x").raise_for_status()
        return 1

    context = ToolContext(secrets={"K": planted})
    result = run(echoing, {}, context=context, include_stacktrace=True)
    assert result.kind is ErrorKind.UPSTREAM_RUNTIME_BAD_REQUEST
    assert planted not in json.dumps(result.to_dict())
