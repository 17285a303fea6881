"""Hostile upstream input: whatever the header values and bodies, ``classify`` and the hooks
return the classified error, in linear time, with ``details`` that stay printable JSON."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
import pytest
from _linear import assert_linear
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdk.http
from tdk.errors import (
    ErrorKind,
    UpstreamBadRequestError,
    UpstreamError,
    UpstreamNotFoundError,
    UpstreamRateLimitError,
    UpstreamServerError,
)

URL = "https://api.example.com/v1/items"
#: The response's clock: epoch 1_700_000_000.
DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
CLAMP = tdk.http.DEFAULT_MAX_RETRY_AFTER_MS
#: What ``details["retry_after_clamped_from_ms"]`` shows for any wait longer than it.
LONGEST_WAIT_MS = 2**53 - 1
#: More digits than Python converts between ``int`` and ``str`` (4,300 by default).
HUGE = "9" * 5_000


def response(
    status: int,
    headers: list[tuple[str, str | bytes]] | dict[str, str] = (),  # type: ignore[assignment]
    body: bytes = b"",
    content_type: str | None = None,
) -> httpx.Response:
    """A response as the hook sees it, with a request (method and URL) and a fixed ``Date``."""
    fields: list[tuple[str, str | bytes]] = (
        list(headers.items()) if isinstance(headers, dict) else list(headers)
    )
    fields.append(("Date", DATE))
    if content_type is not None:
        fields.append(("Content-Type", content_type.encode()))
    return httpx.Response(status, headers=fields, content=body, request=httpx.Request("GET", URL))


def classified(status: int, *args: Any, **kwargs: Any) -> UpstreamError:
    """``classify`` of :func:`response`, checked to be printable, JSON-safe plain data."""
    error = tdk.http.classify(response(status, *args, **kwargs))
    assert isinstance(error, UpstreamError)
    assert error.status_code == status
    assert "fallback" not in error.details  # classified for real, not by the last resort
    json.dumps(error.to_dict())
    str(error), repr(error), error.to_log_line()
    return error


# -- 1. huge numbers -------------------------------------------------------------------------

DELAY_HEADERS = ["retry-after", "retry-after-ms", "x-ms-retry-after-ms", "x-amz-retry-after"]


@pytest.mark.parametrize("name", DELAY_HEADERS, ids=DELAY_HEADERS)
@pytest.mark.parametrize(
    "value",
    [HUGE, f"{HUGE}.5", f"{'9' * 400}.5", f"{'0' * 5_000}{HUGE}"],
    ids=["5000-digits", "5000-digits-fraction", "400-digits-fraction", "leading-zeros"],
)
def test_huge_delay_headers_clamp(name: str, value: str) -> None:
    """A well-formed but huge delay is a long wait: clamped, with the longest wait shown."""
    error = classified(429, {name: value})
    assert isinstance(error, UpstreamRateLimitError)
    assert error.retry_after_ms == CLAMP
    assert error.details["retry_after_clamped_from_ms"] == LONGEST_WAIT_MS
    assert error.details["retry_after_source"] == name
    assert tdk.http.parse_retry_after_ms({name: value}) == CLAMP


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Retry-After": f"1.{'0' * 5_000}1"}, 1_001, id="seconds"),
        pytest.param({"retry-after-ms": f"1.{'0' * 5_000}1"}, 2, id="milliseconds"),
        pytest.param({"Retry-After": f"2.{'0' * 5_000}"}, 2_000, id="zeros-only"),
        pytest.param({"Retry-After": f"0.{'9' * 5_000}"}, 1_000, id="nines"),
    ],
)
def test_huge_fractions_round_up(headers: dict[str, str], expected: int) -> None:
    """A fraction of thousands of digits is read at bounded cost and still rounds up."""
    assert classified(503, headers).retry_after_ms == expected
    assert tdk.http.parse_retry_after_ms(headers) == expected


RESET_HEADERS = [
    pytest.param({"x-ratelimit-remaining": "0", "x-ratelimit-reset": HUGE}, id="github"),
    pytest.param({"x-rate-limit-remaining": "0", "x-rate-limit-reset": HUGE}, id="twitter"),
    pytest.param({"RateLimit-Remaining": "0", "RateLimit-Reset": HUGE}, id="ietf-draft06"),
    pytest.param({"X-RateLimit-Reset-After": f"{HUGE}.5"}, id="discord-reset-after"),
    pytest.param(
        {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": f"{HUGE}s"},
        id="openai-go-duration",
    ),
    pytest.param(
        {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": f"1m{HUGE}.{HUGE}ms"},
        id="openai-go-duration-fraction",
    ),
    pytest.param(
        {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": HUGE},
        id="anthropic",
    ),
    pytest.param({"RateLimit": f"limit=100, remaining=0, reset={HUGE}"}, id="ietf-draft07"),
    pytest.param({"RateLimit": f'"default";r=0;t={HUGE}'}, id="ietf-draft08"),
]


@pytest.mark.parametrize("headers", RESET_HEADERS)
def test_huge_reset_values_clamp(headers: dict[str, str]) -> None:
    """A huge reset value in any dialect is a long wait, clamped like any other."""
    error = classified(429, headers)
    assert error.details["retry_after_source"] == "ratelimit-reset"
    assert error.retry_after_ms == CLAMP
    assert error.details["retry_after_clamped_from_ms"] == LONGEST_WAIT_MS


def test_a_reset_with_a_huge_fraction_rounds_up() -> None:
    """A reset of 1.000...1 seconds (5,000 zeros) is 1001 ms from now."""
    error = classified(429, {"x-ratelimit-reset": f"1.{'0' * 5_000}1"})
    assert error.retry_after_ms == 1_001


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"x-ratelimit-remaining": HUGE, "x-ratelimit-limit": HUGE}, id="digits"),
        pytest.param({"x-ratelimit-remaining": f"{'9' * 400}.5"}, id="400-digits-fraction"),
        pytest.param({"x-ratelimit-remaining": f"0.{'0' * 5_000}"}, id="long-zero"),
        pytest.param({"RateLimit": f"limit={HUGE}, remaining={HUGE}, reset=1"}, id="ietf"),
        pytest.param({"RateLimit": f'"d";r={HUGE};t=1', "RateLimit-Policy": f'"d";q={HUGE}'},
                     id="ietf-draft08"),
    ],
)  # fmt: skip
def test_absurdly_long_remaining_and_limit_are_garbage(headers: dict[str, str]) -> None:
    """``remaining``/``limit`` that no real quota has are ignored, so a 429 stays a 429."""
    error = classified(429, headers)
    assert isinstance(error, UpstreamRateLimitError)
    assert "remaining" not in error.details
    assert "limit" not in error.details


@pytest.mark.parametrize(
    ("body", "clamped_from"),
    [
        pytest.param(json.dumps({"retry_after": HUGE}).encode(), LONGEST_WAIT_MS, id="string"),
        pytest.param(b'{"retryAfter": ' + HUGE.encode() + b"}", LONGEST_WAIT_MS, id="json-int"),
        pytest.param(b'{"retry_after": ' + b"9" * 4_299 + b"}", LONGEST_WAIT_MS, id="int-4299"),
        pytest.param(b'{"retry_after": 1e308}', LONGEST_WAIT_MS, id="float-1e308"),
        pytest.param(b'{"retry_after": 1e999}', LONGEST_WAIT_MS, id="float-overflow"),
        pytest.param(b'{"retry_after": 86400.5}', 86_400_500, id="float-day"),
        pytest.param(
            json.dumps({"error": {"details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{HUGE}s"}
            ]}}).encode(),
            LONGEST_WAIT_MS,
            id="google-retry-delay",
        ),
    ],
)  # fmt: skip
def test_huge_body_retry_hints_clamp(body: bytes, clamped_from: int) -> None:
    """A huge body hint clamps; the text of the body is still read."""
    error = classified(429, body=body, content_type="application/json")
    assert error.retry_after_ms == CLAMP
    assert error.details["retry_after_clamped_from_ms"] == clamped_from


@pytest.mark.parametrize(
    ("code", "retry_after", "expected_code", "expected_ms"),
    [
        pytest.param("50035", HUGE, "50035", CLAMP, id="huge-hint"),
        pytest.param(f"-{HUGE}", "1", None, 1_000, id="huge-negative-code"),
        pytest.param("7", f"-{HUGE}", "7", None, id="huge-negative-hint"),
    ],
)
def test_a_json_body_with_a_huge_integer_keeps_its_message(
    code: str, retry_after: str, expected_code: str | None, expected_ms: int | None
) -> None:
    """A JSON integer too long for Python's ``int`` does not cost the rest of the body."""
    body = f'{{"message": "Bad things", "code": {code}, "retry_after": {retry_after}}}'
    error = classified(400, body=body.encode(), content_type="application/json")
    assert error.message.startswith(
        'The upstream service rejected the request (HTTP 400). Upstream message: "Bad things"'
    )
    assert error.details.get("code") == expected_code
    assert error.retry_after_ms == expected_ms


def test_an_integer_code_longer_than_any_code_is_dropped() -> None:
    """An integer ``code`` of 200 digits (which Python still converts) is garbage."""
    body = b'{"message": "Bad things", "code": ' + b"7" * 200 + b"}"
    assert "code" not in classified(400, body=body, content_type="application/json").details


# -- 2. charsets -----------------------------------------------------------------------------

UNUSABLE_CHARSETS = [
    "undefined",
    "idna",
    "punycode",
    "base64",
    "rot13",
    "hex",
    "zlib",
    "bz2",
    "uu",
    "quopri",
    "unicode_escape",
    "raw_unicode_escape",
    "utf-7",
    "charmap",
    "x-unknown",
    "encodings.aliases",
    "__init__",
    "utf\x00-8",
    "x" * 10_240,
]
CHARSET_IDS = [label[:24].replace("\x00", "NUL") for label in UNUSABLE_CHARSETS]
#: UTF-8 text with an escape sequence (that ``unicode_escape`` would turn into "A") and a
#: byte that is not UTF-8.
TEXT = "caf\u00e9 \\u0041 ".encode() + b"\xff"
AS_UTF8 = "caf\u00e9 \\u0041 \ufffd"


@pytest.mark.parametrize("charset", UNUSABLE_CHARSETS, ids=CHARSET_IDS)
@pytest.mark.parametrize(
    ("media", "body", "text"),
    [
        pytest.param("text/plain", TEXT, AS_UTF8, id="text"),
        pytest.param(  # JSON reads its own escape \u0041
            "application/json", b'{"message": "' + TEXT + b'"}', "caf\u00e9 A \ufffd", id="json"
        ),
        pytest.param(
            "application/xml", b"<Error><Message>" + TEXT + b"</Message></Error>", AS_UTF8,
            id="xml",
        ),
        pytest.param("text/html", b"<html><title>" + TEXT + b"</title>", None, id="html"),
    ],
)  # fmt: skip
def test_unusable_charsets_fall_back_to_utf8(
    charset: str, media: str, body: bytes, text: str | None
) -> None:
    """A charset that is no real text encoding is ignored: the body reads as UTF-8."""
    error = classified(400, body=body, content_type=f"{media}; charset={charset}")
    if text is None:
        assert error.developer_message.endswith(f' [HTML page titled "{AS_UTF8}"]')
    else:
        assert error.message.endswith(f'Upstream message: "{text}"')


@pytest.mark.parametrize(
    ("charset", "text"),
    [
        pytest.param("utf-16", "\u00bfqu\u00e9?", id="utf-16"),
        pytest.param("UTF-16LE", "\u00bfqu\u00e9?", id="utf-16le"),
        pytest.param("windows-1252", "\u20ac 5", id="windows-1252"),
        pytest.param("Shift_JIS", "\u30a8\u30e9\u30fc", id="shift-jis"),
        pytest.param("koi8-r", "\u043e\u0448\u0438\u0431\u043a\u0430", id="koi8-r"),
        pytest.param('"utf-8"', "\u00e9t\u00e9", id="quoted-utf-8"),
        pytest.param("latin1", "caf\u00e9", id="latin1-alias"),
    ],
)
def test_real_text_encodings_are_decoded(charset: str, text: str) -> None:
    """The encodings of the web are decoded as declared."""
    python_name = charset.strip('"').replace("latin1", "latin-1")
    body = text.encode(python_name)
    error = classified(400, body=body, content_type=f"text/plain; charset={charset}")
    assert error.message.endswith(f'Upstream message: "{text}"')


# -- 3. linear time --------------------------------------------------------------------------

#: The size of each pathological input: what the hook reads of a body at most. Each is also
#: classified at a quarter of it, in the same run: linear work takes about a quarter of the
#: time, quadratic work a sixteenth (``tests/_linear.py``); the quadratic versions took 2 to 4
#: seconds at this size.
KB64 = 65_536


def _repeated_fields(n: int) -> httpx.Response:
    # Copies of one 64-character field: joining 2**15 of them (2 MB of headers) by repeated
    # concatenation took 2.5 s. Here 2**13 at 64 KiB (512 KB of headers): quadratic work still
    # grows sixteen-fold from a quarter of it, while 2 MB of small objects would outgrow the
    # processor's caches and slow the larger size more than its work grows.
    return response(429, [("Retry-After", "1" * 64)] * (2**13 * n // KB64))


PATHOLOGICAL = [
    pytest.param(_repeated_fields, id="header_map-repeated-fields"),
    pytest.param(
        lambda n: response(429, [("x-ratelimit-" * (n // 12) + "y", "0")]),
        id="ratelimit-suffixed-name",
    ),
    pytest.param(
        lambda n: response(429, [("x-ratelimit-" * (n // 12) + "-limitx", "0")]),
        id="ratelimit-infixed-name",
    ),
    pytest.param(
        lambda n: response(502, body=b"<title>" * (n // 7), content_type="text/html"),
        id="title-unclosed",
    ),
    pytest.param(
        lambda n: response(502, body=b"<TITLE" * (n // 6), content_type="text/html"),
        id="title-without-bracket",
    ),
    pytest.param(
        lambda n: response(400, body=b"x", content_type="text/plain; charset" + " " * n),
        id="charset-spaces",
    ),
    pytest.param(
        lambda n: response(400, body=b"x", content_type="text/plain; " + "charset= " * (n // 9)),
        id="charset-repeated",
    ),
    pytest.param(
        lambda n: response(400, body=(b"<Code>" + b"a" * 199) * (n // 205),
                           content_type="text/xml"),
        id="xml-code-unclosed",
    ),
    pytest.param(
        lambda n: response(400, body=(b"<Message>" + b"a" * 3_999) * (n // 4_008),
                           content_type="application/xml"),
        id="xml-message-unclosed",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": ",".join(str(i % 7) for i in range(n * 27_720
                                                                                  // KB64))}),
        id="single-value-many-groupings",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "5, " * (n // 3)}), id="single-value-copies"
    ),
    pytest.param(lambda n: response(429, {"x-ratelimit-reset": "1h" * (n // 2)}), id="go-duration"),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-reset": "1.5ms" * (n // 5) + "x"}),
        id="go-duration-invalid",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "Tue, 14 Nov 2023" + " " * n + "x"}),
        id="http-date-spaces",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "Tue, " + "14 Nov 2023 " * (n // 12)}),
        id="http-date-repeated",
    ),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-reset": "2023-11-14T22:13" + "0" * n}),
        id="iso-timestamp-tail",
    ),
    pytest.param(
        lambda n: response(429, {"RateLimit": '"a";r=0;t=1, ' * (n // 14)}),
        id="ietf-many-items",
    ),
    pytest.param(
        lambda n: response(429, {"RateLimit": "r=0" + ";" * n, "RateLimit-Policy": "," * n}),
        id="ietf-separators",
    ),
    pytest.param(
        lambda n: response(429, [(f"x-ratelimit-reset-b{i}", "1") for i in range(n // 24)]),
        id="many-buckets",
    ),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\x01" * n}),
        id="reset-control-characters",
    ),
    pytest.param(
        lambda n: response(400, body=json.dumps({"message": "\x01 " * (n // 2)}).encode(),
                           content_type="application/json"),
        id="clean-control-characters",
    ),
    pytest.param(
        lambda n: response(400, body=json.dumps({"message": "\u202e" * n}).encode(),
                           content_type="application/json"),
        id="clean-bidi-characters",
    ),
    pytest.param(
        lambda n: response(400, body=b"\n" * n + b"x", content_type="text/plain"), id="blank-lines"
    ),
    pytest.param(
        lambda n: response(422, body=json.dumps({"errors": {str(i): ["x"] for i in range(n // 16)}
                                                 }).encode(), content_type="application/json"),
        id="shopify-field-map",
    ),
    pytest.param(
        lambda n: response(400, {"x-request-id": "\x01 " * (n // 2),
                                 "content-encoding": "," * n, "x-should-retry": " " * n}),
        id="other-headers",
    ),
]  # fmt: skip


@pytest.mark.parametrize("make", PATHOLOGICAL)
def test_pathological_input_takes_linear_time(make: Any) -> None:
    """Each input that made a scan quadratic is classified for real (not by the last resort),
    and four times as much of it takes about four times as long (quadratic: sixteen)."""
    error = tdk.http.classify(make(KB64))
    assert isinstance(error, UpstreamError)
    assert "fallback" not in error.details
    assert_linear(lambda n: partial(tdk.http.classify, make(n)), KB64)


# -- 6. the last resort ----------------------------------------------------------------------


class TextContent(httpx.Response):
    """A response whose ``content`` is text, not bytes: a broken test double or subclass, the
    kind of input no classifier path expects."""

    @property
    def content(self) -> Any:
        return "Rate limit exceeded"


def undecodable_headers(status: int, headers: dict[str, str]) -> httpx.Response:
    """A response whose headers cannot be decoded (``headers.encoding`` names a codec that
    always fails)."""
    hostile = response(status, headers)
    hostile.headers.encoding = "undefined"
    return hostile


def test_an_unexpected_failure_in_the_body_falls_back_to_status_and_headers() -> None:
    """A body that breaks the classifier gives the status's error, its wait read from the
    headers, and says so, instead of a foreign exception."""
    broken = TextContent(429, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    error = tdk.http.classify(broken)
    assert isinstance(error, UpstreamRateLimitError)
    assert (error.status_code, error.retry_after_ms) == (429, 7_000)
    assert error.details["fallback"] == "status and headers"
    assert error.details["fallback_error"] == "TypeError"
    assert error.developer_message == (
        f"GET {URL} -> HTTP 429 Too Many Requests [tdk could not read this response's body "
        "(TypeError): classified from its status and headers alone]"
    )
    json.dumps(error.to_dict())


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        pytest.param(503, UpstreamServerError, id="503"),
        pytest.param(429, UpstreamRateLimitError, id="429"),
        pytest.param(404, UpstreamNotFoundError, id="404"),
        pytest.param(408, UpstreamBadRequestError, id="408"),
        pytest.param(999, UpstreamError, id="999"),
    ],
)
def test_an_unexpected_failure_in_the_headers_falls_back_to_the_status(
    status: int, cls: type[UpstreamError]
) -> None:
    """Headers that break the classifier give the status's error from the status alone."""
    error = tdk.http.classify(undecodable_headers(status, {"Retry-After": "7"}))
    assert type(error) is cls
    assert error.status_code == status
    assert error.retry_after_ms is None
    assert error.retryable is UpstreamError(".", status_code=status).retryable
    assert error.details == {
        "status_code": status,
        "fallback": "status",
        "fallback_error": "UnicodeError",
    }
    assert error.developer_message is not None
    assert error.developer_message.endswith(
        " [tdk could not read this response's body or headers (UnicodeError): classified from "
        "its status alone]"
    )


class UnreadableRequest(httpx.Response):
    """A response whose ``request`` raises what httpx never raises there (a broken subclass)."""

    @property
    def request(self) -> httpx.Request:
        raise LookupError("no request")


def test_an_unexpected_failure_after_the_body_falls_back_to_the_status() -> None:
    """A failure in the classification proper, body and headers read, still gives the
    status's error."""
    broken = UnreadableRequest(429, headers={"Retry-After": "7"}, json={"message": "slow"})
    error = tdk.http.classify(broken)
    assert isinstance(error, UpstreamRateLimitError)
    assert error.status_code == 429
    assert error.details == {
        "status_code": 429,
        "fallback": "status",
        "fallback_error": "LookupError",
    }


def test_the_last_resort_is_logged_without_upstream_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The fallback logs one warning naming the exception type and where it was raised."""
    broken = TextContent(429, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    with caplog.at_level("WARNING", logger="tdk.http"):
        tdk.http.classify(broken)
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert "TypeError" in record.getMessage()
    assert "_body.py" in record.getMessage()
    assert "Rate limit exceeded" not in record.getMessage()


def test_the_hooks_raise_the_fallback_error() -> None:
    """The sync and async hooks raise the last-resort error, never the foreign exception."""
    broken = TextContent(503, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    with pytest.raises(UpstreamServerError) as caught:
        tdk.http.raise_for_upstream(broken)
    assert caught.value.details["fallback"] == "status and headers"
    with pytest.raises(UpstreamServerError):
        asyncio.run(tdk.http.araise_for_upstream(broken))


def test_a_body_check_still_runs_and_its_exceptions_are_not_swallowed() -> None:
    """A body check sees None for a body that broke the parser, and its own exception
    propagates: it is the user's, not a classification bug."""
    seen: list[object] = []

    def check(response: httpx.Response, payload: object) -> UpstreamError | None:
        seen.append(payload)
        raise LookupError("my check is broken")

    hook = tdk.http.UpstreamHook(check_body=check)
    broken = TextContent(400, request=httpx.Request("GET", URL))
    with pytest.raises(LookupError, match="my check is broken"):
        hook.classify(broken)
    assert seen == [None]
    with pytest.raises(LookupError, match="my check is broken"):
        hook.classify(response(400, body=b'{"message": "fine"}'))
    assert seen == [None, {"message": "fine"}]


def test_a_body_check_answer_wins_over_the_last_resort() -> None:
    """An error returned by the body check is used even when the body broke the parser."""
    hook = tdk.http.UpstreamHook(check_body=lambda response, payload: UpstreamServerError("x"))
    error = hook.classify(TextContent(400, request=httpx.Request("GET", URL)))
    assert isinstance(error, UpstreamServerError)
    assert "fallback" not in error.details


# -- 7. the property -------------------------------------------------------------------------

#: Every header that carries a wait, a reset, a quota or a verdict, in the spellings of UPSTREAM.md.
HINT_HEADERS = [
    "Retry-After", "retry-after-ms", "x-ms-retry-after-ms", "x-amz-retry-after",
    "X-RateLimit-Reset", "X-RateLimit-Reset-After", "X-RateLimit-Remaining", "X-RateLimit-Limit",
    "x-rate-limit-reset", "x-rate-limit-remaining", "RateLimit-Reset", "RateLimit-Remaining",
    "RateLimit-Limit", "RateLimit", "RateLimit-Policy", "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-tokens", "x-ratelimit-limit-requests",
    "anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining", "Date",
    "x-should-retry", "Stripe-Should-Retry", "x-request-id", "Content-Encoding",
]  # fmt: skip
STATUSES = [400, 401, 403, 404, 408, 409, 410, 413, 422, 429, 500, 502, 503, 529, 599, 999, 99]
#: Statuses that a rate-limit signal may turn into an ``UpstreamRateLimitError``.
RATE_LIMITABLE = {400, 403, 503}

digits = st.text("0123456789", min_size=1, max_size=12)
#: Long strings built by repetition (cheap to generate, up to 64 KB).
long = st.builds(
    lambda piece, count: piece * count,
    st.sampled_from(["9", "0", "1.", ", ", "1h", "\x01", "\u202e", "r=0;", "ratelimit-", " "]),
    st.integers(1, KB64),
)
numbers = st.one_of(
    digits,
    st.builds(lambda count: "9" * count, st.integers(4_000, 6_000)),
    st.builds(lambda a, b: f"{a}.{b}", digits, digits),
    st.builds(lambda a, count: f"{a}.{'0' * count}1", digits, st.integers(1, 6_000)),
    st.builds(lambda sign, n: sign + n, st.sampled_from(["+", "-", " ", "\t"]), digits),
    st.builds(lambda a, e: f"{a}e{e}", digits, st.integers(-400, 400)),
    st.sampled_from(["inf", "-inf", "nan", "1_000", "0x10", "\u0663", "\u00b2", "", " ", "."]),
)
header_values = st.one_of(
    numbers,
    st.builds(
        lambda n, u: n + u, numbers, st.sampled_from(["h", "m", "s", "ms", "us", "µs", "ns"])
    ),
    st.builds(lambda r, t: f'"default";r={r};t={t}', numbers, numbers),
    st.builds(lambda a, b, c: f"limit={a}, remaining={b}, reset={c}", numbers, numbers, numbers),
    st.builds(lambda n: f"Tue, 14 Nov 2023 22:13:{n} GMT", numbers),
    st.builds(lambda n: f"2023-11-14T22:13:{n}Z", numbers),
    st.sampled_from(["Tue, 14 Nov 2023 22:14:20 GMT", "Fri, 01 Jan 10000 00:00:00 GMT", "true"]),
    long,
    st.text(max_size=40),
)
#: Header values as bytes, as a transport hands them over: odd unicode arrives UTF-8 encoded
#: (httpx then reads the headers as UTF-8, else latin-1); control bytes, CR and LF included.
header_bytes = st.one_of(
    header_values.map(lambda text: text.encode("utf-8")),
    st.binary(max_size=64),
)
#: Names of the dialects' shapes, assembled from their pieces (``x-rate-limit-reset-tokens``,
#: ``anthropic-ratelimit-x-remaining``, ``ratelimit-ratelimit-limit-limit``...).
NAME_PIECES = ["x-", "anthropic-", "ratelimit", "rate-limit", "-limit", "-remaining", "-reset",
               "-reset-after", "-tokens", "-requests", "-", "retry-after", "-ms"]  # fmt: skip
header_names = st.one_of(
    st.sampled_from(HINT_HEADERS),
    st.lists(st.sampled_from(NAME_PIECES), min_size=1, max_size=8).map("".join),
)
headers = st.lists(st.tuples(header_names, header_bytes), max_size=6)
charsets = st.one_of(
    st.sampled_from(["utf-8", "utf-16", "latin-1", "idna", "punycode", "undefined", "base64",
                     "rot13", "hex", "zlib", "unicode_escape", "utf-7", "__init__", "x" * 10_240]),
    st.text(max_size=12).map(lambda label: label.replace(";", "")),
)  # fmt: skip
MEDIA = ["application/json", "application/problem+json", "text/plain", "text/html", "text/xml", ""]
content_types = st.one_of(
    st.none(),
    st.builds(
        lambda media, charset: media if charset is None else f"{media}; charset={charset}",
        st.sampled_from(MEDIA),
        st.none() | charsets,
    ),
)
json_values = st.one_of(
    numbers,
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=8), max_size=3),
)
json_bodies = st.one_of(
    st.builds(lambda v: {"retry_after": v}, json_values),
    st.builds(lambda v: {"retryAfter": v, "message": "slow down"}, json_values),
    st.builds(
        lambda v: {"error": {"message": "quota", "details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": v}]}},
        json_values,
    ),
    st.builds(lambda f, p: {"errors": [{"pointer": f, "detail": p}]}, json_values, json_values),
    st.builds(lambda f, p: {"detail": [{"loc": [f, 0], "msg": p, "input": "x"}]}, json_values,
              json_values),
    st.builds(lambda f, p: {"invalid-params": [{"name": f, "reason": p}]}, json_values,
              json_values),
)  # fmt: skip
bodies = st.one_of(
    json_bodies.map(lambda body: json.dumps(body).encode()),
    st.builds(lambda n: b'{"retry_after": %s, "code": %s}' % (n, n), st.sampled_from([
        b"9" * 5_000, b"-" + b"9" * 5_000, b"1e999", b"NaN", b"Infinity"])),
    st.binary(max_size=256),
    long.map(lambda text: text.encode()),
)  # fmt: skip


def _check(error: UpstreamError | None, status: int) -> None:
    assert isinstance(error, UpstreamError)
    assert error.status_code == status
    assert "fallback" not in error.details, error.details  # never the last resort
    if status == 429:
        assert isinstance(error, UpstreamRateLimitError)
    elif not isinstance(error, UpstreamRateLimitError) or status not in RATE_LIMITABLE:
        assert type(error) is UpstreamError.class_for_status(status)
    assert error.retry_after_ms is None or 0 <= error.retry_after_ms <= CLAMP
    json.dumps(error.to_dict())
    str(error), repr(error)


@settings(
    max_examples=150, deadline=timedelta(seconds=1), suppress_health_check=[HealthCheck.too_slow]
)
@given(
    status=st.sampled_from(STATUSES),
    fields=headers,
    content_type=content_types,
    body=bodies,
)
def test_classify_always_returns_the_classified_error(
    status: int, fields: list[tuple[str, bytes]], content_type: str | None, body: bytes
) -> None:
    """Whatever the header values, content type and body, ``classify`` returns the status's
    error (a rate limit on a 429), JSON-safe, with a wait within the clamp."""
    hostile = response(status, fields, body=body, content_type=content_type)
    _check(tdk.http.classify(hostile), status)


@settings(
    max_examples=100, deadline=timedelta(seconds=1), suppress_health_check=[HealthCheck.too_slow]
)
@given(fields=headers)
def test_parse_retry_after_ms_is_none_or_within_the_clamp(fields: list[tuple[str, bytes]]) -> None:
    """Whatever the header values, ``parse_retry_after_ms`` is None or a wait within the clamp."""
    wait = tdk.http.parse_retry_after_ms(httpx.Headers(fields))
    assert wait is None or (type(wait) is int and 0 <= wait <= CLAMP)


@settings(
    max_examples=25, deadline=timedelta(seconds=1), suppress_health_check=[HealthCheck.too_slow]
)
@given(status=st.sampled_from(STATUSES), fields=headers, body=bodies)
def test_the_hooks_raise_the_classified_error(
    status: int, fields: list[tuple[str, bytes]], body: bytes
) -> None:
    """Through a client and the sync hook, the same inputs raise the classified error."""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(status, headers=fields, content=body)
    )
    with (
        tdk.http.install(httpx.Client(transport=transport)) as client,
        pytest.raises(UpstreamError) as caught,
    ):
        client.get(URL)
    _check(caught.value, status)


@pytest.mark.parametrize("status", [2**53, 10**30, -(10**30)], ids=["2**53", "10**30", "-10**30"])
def test_a_status_no_error_can_carry_is_unmapped(status: int) -> None:
    """A status beyond any integer JSON keeps (only a transport of the caller's own makes one)
    is an unmapped upstream error without a status, and no fallback was needed."""
    response = httpx.Response(status, content=b"x", request=httpx.Request("GET", "https://h/"))
    error = tdk.http.classify(response)
    assert error is not None
    assert error.kind is ErrorKind.UPSTREAM_RUNTIME_UNMAPPED
    assert error.status_code is None
    assert "fallback" not in error.details
    json.dumps(error.to_dict())
