"""Property: whatever the header values, content type and body of an upstream's answer,
``classify`` and the hooks return the status's classified error (a rate limit on a 429), in
JSON-safe plain data, with a wait within the clamp; never the last resort, never a foreign
exception."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from _http_responses import CLAMP, KB64, URL, response
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdk.http
from tdk.errors import UpstreamError, UpstreamRateLimitError

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
