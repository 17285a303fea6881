"""``tdk.http.parse_retry_after_ms`` alone, the reference clock of ``classify``, and waits too
long for any clock (numbers of thousands of digits, in every header and body hint)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from _http_responses import CLAMP, HUGE, LONGEST_WAIT_MS, classified

import tdk.http
from tdk.errors import UpstreamRateLimitError

DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
NOW = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Retry-After": "120"}, 120_000, id="delta-seconds"),
        pytest.param({"retry-after": "1.5"}, 1_500, id="lower-case-name-fraction"),
        pytest.param({"RETRY-AFTER": "0.0004"}, 1, id="upper-case-name-rounds-up"),
        pytest.param({"Retry-After": "\u0663"}, None, id="non-ascii-digit"),
        pytest.param({"Retry-After": "+5"}, None, id="plus-sign"),
        pytest.param({"Retry-After": "inf"}, None, id="infinity"),
        pytest.param({"Retry-After": "5."}, None, id="dangling-point"),
        pytest.param({"Retry-After": "5, 5, 5"}, 5_000, id="three-identical"),
        pytest.param({"Retry-After": "5,10"}, None, id="two-different-no-space"),
        pytest.param({"Retry-After": "Tue, 14 Nov 2023 22:14:20 GMT"}, 60_000, id="imf-date"),
        pytest.param({"Retry-After": "Tue, 14 Nov 2023 23:14:20 +0100"}, 60_000, id="zone-offset"),
        pytest.param({"Retry-After": "Tue, 14 Nov 2023 22:14:20 GMT, junk"}, None, id="date-junk"),
        pytest.param({"Retry-After": "Tue, 14 Nov 2023 25:14:20 GMT"}, None, id="bad-hour"),
        pytest.param({"Retry-After": "Fri, 01 Jan 10000 00:00:00 GMT"}, None, id="year-10000"),
        pytest.param({"retry-after-ms": "250", "Retry-After": "9"}, 250, id="ms-first"),
        pytest.param({"retry-after-ms": "", "Retry-After": "9"}, 9_000, id="empty-ms-falls"),
        pytest.param({"retry-after-ms": "1e3", "Retry-After": "9"}, 9_000, id="exp-ms-falls"),
        pytest.param({"x-ms-retry-after-ms": "75"}, 75, id="azure-ms"),
        pytest.param({"x-amz-retry-after": "800"}, 800, id="aws-ms"),
        pytest.param({"X-RateLimit-Reset": "60"}, None, id="reset-headers-not-read"),
        pytest.param({}, None, id="no-headers"),
    ],
)
def test_parse_retry_after_ms(headers: dict[str, str], expected: int | None) -> None:
    """Each header value gives the documented wait, measured from a fixed ``now``."""
    assert tdk.http.parse_retry_after_ms(headers, now=NOW) == expected


def test_httpx_headers_with_duplicates_are_read_as_fields() -> None:
    """``httpx.Headers`` keeps repeated fields apart; two different values are ignored."""
    different = httpx.Headers([("Retry-After", "5"), ("retry-after", "10")])
    same = httpx.Headers([("Retry-After", "5"), ("retry-after", "5")])
    assert tdk.http.parse_retry_after_ms(different) is None
    assert tdk.http.parse_retry_after_ms(same) == 5_000


def test_several_repeated_fields_are_each_joined() -> None:
    """Repeated ``Retry-After`` and rate-limit fields are each joined and read."""
    headers = httpx.Headers(
        [
            ("Retry-After", "5"),
            ("x-ratelimit-remaining", "0"),
            ("retry-after", "5"),
            ("X-RateLimit-Remaining", "0"),
            ("x-ratelimit-remaining", "0"),
        ]
    )
    request = httpx.Request("GET", "https://api.example.com/v1/items")
    error = tdk.http.classify(httpx.Response(403, headers=headers, request=request))
    assert isinstance(error, UpstreamRateLimitError)
    assert (error.retry_after_ms, error.details["remaining"]) == (5_000, 0)


def test_date_header_is_the_reference_when_now_is_not_given() -> None:
    """Without ``now``, an HTTP-date is measured against the response's own ``Date``."""
    headers = {"Date": DATE, "Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"}
    assert tdk.http.parse_retry_after_ms(headers) == 30_000


def test_explicit_now_wins_over_the_date_header() -> None:
    """``now`` is the reference when given, whatever the ``Date`` header says."""
    headers = {"Date": DATE, "Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"}
    later = NOW + timedelta(seconds=20)
    assert tdk.http.parse_retry_after_ms(headers, now=later) == 10_000


def test_naive_now_is_utc_and_other_zones_are_converted() -> None:
    """A naive ``now`` is read as UTC; an aware one in another zone is converted."""
    headers = {"Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"}
    naive = datetime(2023, 11, 14, 22, 13, 20)
    paris = NOW.astimezone(timezone(timedelta(hours=1)))
    assert tdk.http.parse_retry_after_ms(headers, now=naive) == 30_000
    assert tdk.http.parse_retry_after_ms(headers, now=paris) == 30_000


def test_garbage_date_header_falls_back_to_the_clock() -> None:
    """An unreadable ``Date`` is ignored: a date far in the past is 0 against the clock."""
    headers = {"Date": "yesterday", "Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    assert tdk.http.parse_retry_after_ms(headers) == 0


def test_clamp_is_a_parameter() -> None:
    """Values above ``max_retry_after_ms`` are clamped; the default is six hours."""
    headers = {"Retry-After": "86400"}
    assert tdk.http.parse_retry_after_ms(headers) == 6 * 3600 * 1000
    assert tdk.http.parse_retry_after_ms(headers, max_retry_after_ms=1_000) == 1_000


def _response(status: int, headers: dict[str, str]) -> httpx.Response:
    request = httpx.Request("GET", "https://api.example.com/v1/items")
    return httpx.Response(status, headers=headers, request=request)


def test_classify_now_is_the_reference_for_reset_epochs() -> None:
    """``classify(now=...)`` measures epoch resets from ``now`` rather than the clock."""
    response = _response(429, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000045"})
    error = tdk.http.classify(response, now=NOW)
    assert isinstance(error, UpstreamRateLimitError)
    assert error.retry_after_ms == 45_000
    assert error.details["retry_after_source"] == "ratelimit-reset"


def test_epoch_reset_without_date_uses_the_clock() -> None:
    """With neither ``now`` nor ``Date``, an epoch reset in the past is 0, not 57 years."""
    response = _response(429, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1000000000"})
    error = tdk.http.classify(response)
    assert error is not None
    assert error.retry_after_ms == 0


def test_clamp_is_noted_in_details() -> None:
    """A clamped wait keeps the upstream's own value in ``details``."""
    response = _response(503, {"Retry-After": "99999999999"})
    error = tdk.http.classify(response)
    assert error is not None
    assert error.retry_after_ms == tdk.http.DEFAULT_MAX_RETRY_AFTER_MS
    assert error.details["retry_after_clamped_from_ms"] == 99_999_999_999_000
    assert error.details["retry_after_source"] == "retry-after"
    assert "Retry after 21600 s." in error.message


@pytest.mark.parametrize(
    ("headers", "details"),
    [
        pytest.param(
            {"x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "7"},
            {"limit": 60, "remaining": 0, "reset": "7"},
            id="github-style",
        ),
        pytest.param(
            {"X-Ratelimit-Remaining": "0.0", "X-Ratelimit-Reset": "42"},
            {"remaining": 0, "reset": "42"},
            id="reddit-float",
        ),
        pytest.param(
            {"RateLimit": '"default";r=0;t=30', "RateLimit-Policy": '"default";q=100;w=60'},
            {"limit": 100, "remaining": 0, "reset": "30"},
            id="ietf-draft08",
        ),
        pytest.param(
            {"x-ratelimit-remaining": "1.5, 2"},
            {},
            id="disagreeing-duplicates-dropped",
        ),
        pytest.param(
            {"x-ratelimit-remaining": "0, 0", "x-ratelimit-limit": "10"},
            {"limit": 10, "remaining": 0},
            id="agreeing-duplicates-kept",
        ),
        pytest.param(
            {
                "x-ratelimit-remaining-requests": "10",
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-limit-tokens": "1000",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "6m0s",
            },
            {"limit": 1000, "remaining": 0, "reset": "6m0s"},
            id="openai-shows-the-exhausted-bucket",
        ),
        pytest.param(
            {"x-ratelimit-remaining": "12.5", "x-ratelimit-reset-after": "3"},
            {"remaining": 12.5, "reset": "3"},
            id="first-bucket-when-none-exhausted",
        ),
    ],
)
def test_rate_limit_details(headers: dict[str, str], details: dict[str, object]) -> None:
    """``limit``/``remaining``/``reset`` come from the bucket that matters."""
    error = tdk.http.classify(_response(404, headers), now=NOW)
    assert error is not None
    shown = {
        key: error.details[key] for key in ("limit", "remaining", "reset") if key in error.details
    }
    assert shown == details


# -- huge numbers ---------------------------------------------------------------------------


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
