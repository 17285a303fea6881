"""httpx's own log lines get tdk's redaction (against a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import httpx
import pytest
from _http_server import SESSION, serve

import tdk.http
from tdk.errors import UpstreamNotFoundError
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
    """Installing on several clients leaves one filter on the logger."""
    for _ in range(3):
        tdk.http.install(httpx.Client()).close()
    assert tdk.http.redact_httpx_logs() is tdk.http.redact_httpx_logs()
    assert [type(f) for f in httpx_logger.filters] == [RedactingLogFilter]


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


def test_filter_leaves_a_broken_record_to_logging() -> None:
    """A record whose arguments do not fit its format is kept as it is (logging reports it)."""
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "%s %s", ("one",), None)
    assert RedactingLogFilter().filter(record) is True
    assert record.args == ("one",)
