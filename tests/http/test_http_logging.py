"""httpx's own log lines get tdk's redaction, the secrets of the running call included."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import pytest
from _http_server import SESSION, serve

import tdk.http
from tdk import Tool, ToolContext, tool
from tdk._failures.redact import call_secrets, end_call_secrets, redact_text
from tdk.errors import ErrorKind, UpstreamAuthError, UpstreamNotFoundError
from tdk.http import RedactingLogFilter

KEY = "sk-live-0123456789abcdef"
PASSWORD = "pw-5e6f7a"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve() as url:
        yield url


@pytest.fixture
def httpx_logger() -> Iterator[logging.Logger]:
    """The ``httpx`` logger without tdk's filter, restored afterwards."""
    logger = logging.getLogger("httpx")
    saved = list(logger.filters)
    for existing in saved:
        logger.removeFilter(existing)
    yield logger
    for existing in list(logger.filters):
        logger.removeFilter(existing)
    for existing in saved:
        logger.addFilter(existing)


def _credentialed(base_url: str) -> str:
    return f"{base_url.replace('://', f'://user:{PASSWORD}@')}/missing?api_key={KEY}&page=2"


def test_install_redacts_the_httpx_request_line(
    base_url: str, httpx_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx logs each request's whole URL at INFO; after install() the line keeps the method,
    host, path and safe query values, and loses the password and the key."""
    with (
        caplog.at_level(logging.INFO, logger="httpx"),
        tdk.http.install(httpx.Client(timeout=10)) as client,
        pytest.raises(UpstreamNotFoundError),
    ):
        client.get(_credentialed(base_url))
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert len(lines) == 1
    assert "GET http://127.0.0.1:" in lines[0]
    assert "/missing?api_key=[REDACTED]&page=2" in lines[0]
    assert KEY not in caplog.text
    assert PASSWORD not in caplog.text


def test_without_install_the_line_leaks(
    base_url: str, httpx_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    """The leak the filter closes is real: the same request through a plain client."""
    with caplog.at_level(logging.INFO, logger="httpx"), httpx.Client(timeout=10) as client:
        client.get(_credentialed(base_url))
    assert KEY in caplog.text


def test_the_filter_is_added_once(httpx_logger: logging.Logger) -> None:
    """Installing on several clients leaves one filter on the logger, and on httpx2's."""
    for _ in range(3):
        tdk.http.install(httpx.Client()).close()
    assert tdk.http.redact_httpx_logs() is tdk.http.redact_httpx_logs()
    assert [type(f) for f in httpx_logger.filters] == [RedactingLogFilter]
    assert logging.getLogger("httpx2").filters == httpx_logger.filters


def test_on_a_handler_it_covers_httpcore_headers(base_url: str) -> None:
    """httpcore's DEBUG lines list response headers as tuples; a filter on the handler
    redacts the session cookie in them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingLogFilter())
    logger = logging.getLogger("httpcore")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{base_url}/cookie").cookies["session"] == SESSION
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)
    output = stream.getvalue()
    assert "receive_response_headers" in output
    assert "Set-Cookie" in output
    assert SESSION not in output


def test_install_covers_httpcores_lines_of_echoed_secrets(base_url: str) -> None:
    """After install(), httpcore's DEBUG lines of a tool call lose the call's secret when the
    upstream echoes it in response headers, under any name (no filter of the user's own)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("httpcore")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)

    @tool
    def echoed(context: ToolContext) -> int:
        """Call an upstream that echoes the key back."""
        key = context.get_secret("KEY")
        with tdk.http.install(httpx.Client(timeout=10, headers={"X-Api-Key": key})) as client:
            client.get(f"{base_url}/echo")
        return 1

    try:
        result = echoed.run_sync({}, context=ToolContext(secrets={"KEY": KEY}))
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)
    assert result.kind is ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR
    output = stream.getvalue()
    assert "receive_response_headers" in output
    assert "X-Echo" in output
    assert KEY not in output


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_install_covers_httpcores_lines_of_echoed_request_credentials(
    base_url: str, flavour: str
) -> None:
    """Outside any tool call too: while httpcore logs response headers, an installed client's
    request credentials are scrubbed from its lines, under whatever header they come back."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("httpcore")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    headers = {"X-Api-Key": KEY}
    try:
        if flavour == "sync":
            with (
                tdk.http.install(httpx.Client(timeout=10, headers=headers)) as client,
                pytest.raises(UpstreamAuthError),
            ):
                client.get(f"{base_url}/echo")
        else:

            async def get() -> None:
                client = tdk.http.install(httpx.AsyncClient(timeout=10, headers=headers))
                async with client:
                    await client.get(f"{base_url}/echo")

            with pytest.raises(UpstreamAuthError):
                asyncio.run(get())
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)
    output = stream.getvalue()
    assert "X-Echo" in output
    assert KEY not in output


@pytest.mark.parametrize(
    ("message", "args", "expected"),
    [
        pytest.param(
            "HTTP Request: %s %s",
            ("GET", httpx.URL(f"https://u:{PASSWORD}@h.example/x?token={KEY}&limit=5")),
            "HTTP Request: GET https://h.example/x?token=[REDACTED]&limit=5",
            id="url-argument",
        ),
        pytest.param(
            "sent %s",
            (f"Authorization: Bearer {KEY}",),
            "sent Authorization: [REDACTED]",
            id="text-argument",
        ),
        pytest.param("no arguments, key %s", None, "no arguments, key %s", id="no-args"),
        pytest.param("%(who)s logged in", ({"who": "ann"},), "ann logged in", id="mapping-args"),
    ],
)
def test_filter_redacts_a_record(message: str, args: object, expected: str) -> None:
    """The message is formatted once and stored redacted; the record is always kept."""
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, message, args, None)  # type: ignore[arg-type]
    assert RedactingLogFilter().filter(record) is True
    assert record.getMessage() == expected
    assert record.args is None


def test_a_broken_record_is_shown_redacted() -> None:
    """A record whose arguments do not fit its format shows both, redacted, instead of having
    logging print the raw arguments to stderr."""
    url = f"https://bob:{PASSWORD}@h.example/x?api_key={KEY}"
    record = logging.LogRecord("app", logging.WARNING, __file__, 1, "retrying %d", (url,), None)
    assert RedactingLogFilter().filter(record) is True
    assert record.args is None
    assert record.getMessage().startswith("retrying %d (")
    assert PASSWORD not in record.getMessage()
    assert KEY not in record.getMessage()


def test_a_traceback_and_stack_are_redacted() -> None:
    """On a handler, the filter also redacts the rendered traceback and the stack info."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingLogFilter())
    logger = logging.getLogger("tdk.tests.traceback")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise RuntimeError(f"GET https://bob:{PASSWORD}@h.example/x?api_key={KEY}")
        except RuntimeError:
            logger.exception("request failed", stack_info=True)
    finally:
        logger.removeHandler(handler)
    output = stream.getvalue()
    assert "Traceback (most recent call last)" in output
    assert "Stack (most recent call last)" in output
    assert "RuntimeError: GET https://[REDACTED]@h.example/x?api_key=[REDACTED]" in output
    assert PASSWORD not in output
    assert KEY not in output


TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def _bot(request: httpx.Request) -> httpx.Response:
    return httpx.Response(403, json={"ok": False, "description": "Forbidden: bot was blocked"})


@tool
async def notify(context: ToolContext) -> int:
    """Send a message with a bot token in the URL path (as Telegram's API wants)."""
    client = tdk.http.install(httpx.AsyncClient(transport=httpx.MockTransport(_bot)))
    async with client:
        await client.post(f"https://api.telegram.org/bot{context.get_secret('TG')}/sendMessage")
    return 1


@tool
def notify_sync(context: ToolContext) -> int:
    """The same from a sync tool, in its worker thread."""
    with tdk.http.install(httpx.Client(transport=httpx.MockTransport(_bot))) as client:
        client.post(f"https://api.telegram.org/bot{context.get_secret('TG')}/sendMessage")
    return 1


@pytest.mark.parametrize("target", [notify, notify_sync], ids=["async", "sync-thread"])
def test_the_call_secrets_reach_no_log_line(
    target: Tool[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A context secret that no pattern recognises (a bot token in a URL path) is scrubbed
    from httpx's request line and the hook's own DEBUG line while the call runs, and from the
    result; after the call, those values are ordinary text again."""
    context = ToolContext(secrets={"TG": TOKEN})
    with caplog.at_level(logging.DEBUG):
        result = target.run_sync({}, context=context)
    assert result.kind is ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR
    lines = [r.getMessage() for r in caplog.records if r.name in ("httpx", "tdk.http")]
    assert any(line.startswith("HTTP Request: POST") for line in lines)
    assert any(line.startswith("upstream error POST") for line in lines)
    assert TOKEN not in caplog.text
    assert TOKEN not in json.dumps(result.to_dict())
    assert "/bot[REDACTED]/sendMessage" in json.dumps(result.to_dict())
    assert redact_text(f"path /bot{TOKEN}/") == f"path /bot{TOKEN}/"


def _ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"ok": True})


@tool
def ping(context: ToolContext) -> bool:
    """Call the API with the bot token in the path."""
    with tdk.http.install(httpx.Client(transport=httpx.MockTransport(_ok))) as client:
        return bool(client.get(f"https://api.example.com/bot{context.get_secret('TG')}/ping"))


def test_a_logged_successful_call_with_missing_secrets_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """None and empty secret values (an unset environment variable) are not scrubbed, and do
    not break the redaction of httpx's line."""
    context = ToolContext(secrets={"TG": TOKEN, "OPTIONAL": None, "EMPTY": ""})  # type: ignore[dict-item]
    with caplog.at_level(logging.INFO, logger="httpx"):
        result = ping.run_sync({}, context=context)
    assert result.value is True
    assert "/bot[REDACTED]/ping" in caplog.text
    assert TOKEN not in caplog.text


@tool
def note(text: Annotated[str, "What to log."], context: ToolContext) -> bool:
    """Log a text on httpx's logger, with a context of the inner call's own."""
    logging.getLogger("httpx").info("inner call got %s and %s", text, context.get_secret("TG"))
    return True


@tool
async def relay(context: ToolContext) -> bool:
    """Run another tool, with a context of its own, and hand it this call's token."""
    inner = ToolContext(secrets={"TG": "inner-token-98765"})
    outcome = await note.run({"text": f"outer {context.get_secret('TG')}"}, context=inner)
    logging.getLogger("httpx").info("after: outer token %s", context.get_secret("TG"))
    return bool(outcome.value)


def test_a_nested_call_keeps_the_outer_calls_secrets(caplog: pytest.LogCaptureFixture) -> None:
    """A call made inside another scrubs both calls' secrets while it runs, and the outer
    call's again after it."""
    with caplog.at_level(logging.INFO, logger="httpx"):
        result = relay.run_sync({}, context=ToolContext(secrets={"TG": TOKEN}))
    assert result.value is True
    assert "inner call got outer [REDACTED] and [REDACTED]" in caplog.text
    assert "after: outer token [REDACTED]" in caplog.text
    assert TOKEN not in caplog.text
    assert "inner-token-98765" not in caplog.text


def test_the_call_secrets_are_undone_even_from_another_context() -> None:
    """A call whose coroutine is closed in another context (its loop is gone) cannot restore
    the secrets there; that is not an error."""
    token = contextvars.copy_context().run(call_secrets, ("x-secret-1",))
    end_call_secrets(token)  # a token of another context: ignored
    assert redact_text("x-secret-1") == "x-secret-1"


def test_a_traceback_is_redacted_whatever_rendered_it_first() -> None:
    """A handler without the filter may render the traceback first (into ``exc_text``): the
    filtered handler still shows it redacted, and the exception object stays available."""
    plain, filtered = io.StringIO(), io.StringIO()
    first = logging.StreamHandler(plain)  # renders exc_text, unredacted: its own business
    second = logging.StreamHandler(filtered)
    second.addFilter(RedactingLogFilter())
    seen: list[logging.LogRecord] = []
    third = logging.Handler()
    third.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("tdk.tests.order")
    logger.propagate = False
    for handler in (first, second, third):
        logger.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"GET https://h.example/x?api_key={KEY}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        for handler in (first, second, third):
            logger.removeHandler(handler)
    assert KEY in plain.getvalue()
    assert "RuntimeError: GET https://h.example/x?api_key=[REDACTED]" in filtered.getvalue()
    assert KEY not in filtered.getvalue()
    assert seen[0].exc_info is not None
    assert seen[0].exc_info[0] is RuntimeError


def test_a_message_that_cannot_be_shown_does_not_raise_into_the_caller() -> None:
    """A log message whose str() fails is replaced by a note, not raised into the code that
    logged it."""

    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    record = logging.LogRecord("app", logging.WARNING, __file__, 1, Hostile(), ("x",), None)  # type: ignore[arg-type]
    assert RedactingLogFilter().filter(record) is True
    assert record.getMessage().startswith("<a log message that could not be formatted")
