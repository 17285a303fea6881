"""How long an upstream asks us to wait: ``Retry-After`` and its millisecond cousins.

This module knows the value grammars (delta seconds, HTTP-dates, epoch numbers, Go and protobuf
durations, RFC 3339 timestamps) and the reference clock; :mod:`tdk.http._ratelimit` knows which
headers carry them. Every parser returns whole milliseconds rounded up, ``0`` for a time in the
past, and ``None`` for anything it does not recognise (so that the caller falls through to the
next source). Arithmetic is exact (integers and :class:`~fractions.Fraction`), so huge values
never overflow and ``1.0001`` seconds is 1001 ms, not 1000.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from fractions import Fraction
from typing import Final

import httpx

#: Waits above this are clamped (6 hours, as urllib3 does since 2.6.3).
DEFAULT_MAX_RETRY_AFTER_MS: Final = 21_600_000

#: Headers holding a delay in milliseconds, read before ``Retry-After`` (OpenAI, Azure, AWS).
MS_HEADERS: Final = ("retry-after-ms", "x-ms-retry-after-ms", "x-amz-retry-after")

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
#: A bare number at least this large is an epoch in milliseconds; see ``reset_wait_ms``.
_EPOCH_MS_FLOOR: Final = 10**12
#: A bare number at least this large (and below the one above) is an epoch in seconds.
_EPOCH_S_FLOOR: Final = 10**9

_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_GO_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:h|ms|m|s|us|µs|ns))+")
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")
_GO_UNIT_US: Final[Mapping[str, Fraction]] = {
    "h": Fraction(3_600_000_000),
    "m": Fraction(60_000_000),
    "s": Fraction(1_000_000),
    "ms": Fraction(1_000),
    "us": Fraction(1),
    "µs": Fraction(1),
    "ns": Fraction(1, 1_000),
}
_PROTO_DURATION = re.compile(r"([0-9]+(?:\.[0-9]{1,9})?)s")
_ISO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}")
#: The three HTTP-date forms of RFC 9110 section 5.6.7 (IMF-fixdate, RFC 850, asctime), read
#: a little leniently (numeric zones, one-digit days). ``parsedate_to_datetime`` alone would
#: accept trailing garbage such as a second, different date.
_HTTP_DATE = re.compile(
    r"(?:[a-z]{3,9},\s*)?[0-9]{1,2}[ -][a-z]{3}[ -][0-9]{2,4}\s+[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
    r"\s*(?:gmt|utc|ut|z|[+-][0-9]{4})?"
    r"|[a-z]{3}\s+[a-z]{3}\s+[0-9]{1,2}\s+[0-9]{1,2}:[0-9]{2}:[0-9]{2}\s+[0-9]{4}",
    re.IGNORECASE | re.ASCII,
)

HeaderMap = Mapping[str, str]
"""Response headers with lower-case names; repeated fields joined with ``", "``."""


def header_map(headers: httpx.Headers | Mapping[str, str]) -> dict[str, str]:
    """``headers`` as a plain dict with lower-case names (one pass; lookups then cost nothing).

    Repeated fields are joined with ``", "`` as RFC 9110 section 5.3 allows.
    """
    merged: dict[str, str] = {}
    if isinstance(headers, httpx.Headers):
        for key, value in headers.multi_items():  # names come lower-cased
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        return merged
    for name, value in headers.items():
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return merged


class Clock:
    """The reference "now" for absolute times, decided lazily and at most once.

    An explicit ``now`` wins; else the response's ``Date`` header (immune to local clock skew);
    else the local clock. A naive datetime is taken as UTC.
    """

    __slots__ = ("_date", "_now", "_us")

    def __init__(self, date: str | None, now: datetime | None) -> None:
        self._date = date
        self._now = now
        self._us: int | None = None

    def now_us(self) -> int:
        """Microseconds since the epoch."""
        if self._us is None:
            reference = self._now or _http_date(self._date) or datetime.now(UTC)
            self._us = epoch_us(reference)
        return self._us

    def wait_until_ms(self, target_us: Fraction | int) -> int:
        """Milliseconds from now until ``target_us`` (epoch microseconds); 0 if it has passed."""
        return max(0, math.ceil(Fraction(target_us - self.now_us(), 1000)))


def epoch_us(moment: datetime) -> int:
    """Exact microseconds since the epoch; a naive datetime is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def single_value(value: str) -> str | None:
    """One field value from several joined with commas, or None when they disagree.

    RFC 9110 section 5.5: two different ``Retry-After`` fields (``"5, 10"``) must be ignored,
    while identical duplicates are harmless. The split is tried at every group size, because an
    HTTP-date holds a comma of its own.
    """
    value = value.strip()
    if "," not in value:
        return value
    pieces = value.split(",")
    for copies in range(len(pieces), 1, -1):
        if len(pieces) % copies:
            continue
        size = len(pieces) // copies
        groups = {",".join(pieces[i : i + size]).strip() for i in range(0, len(pieces), size)}
        if len(groups) == 1:
            return groups.pop()
    return value  # one value holding a comma (an HTTP-date), or several that disagree


def seconds_ms(text: str) -> int | None:
    """``DIGITS[.DIGITS]`` seconds as whole milliseconds (rounded up), else None."""
    if text.isdigit() and text.isascii():
        return int(text) * 1000
    if _DECIMAL.fullmatch(text) is None:
        return None
    return math.ceil(Fraction(text) * 1000)


def millis(text: str) -> int | None:
    """``DIGITS[.DIGITS]`` milliseconds, rounded up, else None (signs and exponents too)."""
    if text.isdigit() and text.isascii():
        return int(text)
    if _DECIMAL.fullmatch(text) is None:
        return None
    return math.ceil(Fraction(text))


def _http_date(text: str | None) -> datetime | None:
    if not text or _HTTP_DATE.fullmatch(text) is None:
        return None
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def retry_after_value_ms(value: str, clock: Clock) -> int | None:
    """A ``Retry-After`` value: delta seconds (fractions allowed) or an HTTP-date."""
    text = single_value(value)
    if not text:
        return None
    delay = seconds_ms(text)
    if delay is not None:
        return delay
    moment = _http_date(text)  # signs, exponents and ISO 8601 match neither grammar
    if moment is None:
        return None
    return clock.wait_until_ms(epoch_us(moment))


def header_retry_ms(headers: HeaderMap, clock: Clock) -> tuple[int, str] | None:
    """The explicit delay headers in precedence order: the millisecond ones, then
    ``Retry-After``. Returns (milliseconds, header name); an invalid value falls through."""
    for name in MS_HEADERS:
        value = headers.get(name)
        if value is not None:
            text = single_value(value)
            delay = millis(text) if text else None
            if delay is not None:
                return delay, name
    value = headers.get("retry-after")
    if value is not None:
        delay = retry_after_value_ms(value, clock)
        if delay is not None:
            return delay, "retry-after"
    return None


def parse_retry_after_ms(
    headers: httpx.Headers | Mapping[str, str],
    *,
    now: datetime | None = None,
    max_retry_after_ms: int = DEFAULT_MAX_RETRY_AFTER_MS,
) -> int | None:
    """Milliseconds to wait according to the explicit delay headers alone, or None.

    Reads, in order, ``retry-after-ms``, ``x-ms-retry-after-ms`` and ``x-amz-retry-after``
    (milliseconds), then ``Retry-After`` (delta seconds with optional fraction, or an HTTP-date
    in IMF-fixdate, RFC 850 or asctime form). An invalid or negative value falls through to the
    next header. Header names are case-insensitive; two different joined values (``"5, 10"``)
    are ignored. HTTP-dates are measured against ``now`` (an aware datetime), else the
    ``Date`` header, else the clock; a past date gives 0. The result is rounded up to whole
    milliseconds and clamped to ``max_retry_after_ms``.

    The rate-limit reset headers and body hints are not read here: :func:`classify` adds them.

    >>> parse_retry_after_ms({"Retry-After": "1.5"})
    1500
    """
    merged = header_map(headers)
    found = header_retry_ms(merged, Clock(merged.get("date"), now))
    return None if found is None else min(found[0], max_retry_after_ms)


def reset_wait_ms(value: str, clock: Clock, *, delta_only: bool = False) -> int | None:
    """A rate-limit reset value as a wait in milliseconds, or None.

    A bare number is told apart by size: at least 10**12 is epoch milliseconds, at least 10**9
    epoch seconds (a fraction allowed, as Discord sends), anything smaller seconds from now.
    Go durations (``6m0s``, ``1.5s``, ``20ms``: OpenAI) and RFC 3339 / ISO 8601 timestamps
    (Anthropic, Atlassian) are read too. With ``delta_only`` a number is always seconds from
    now (the IETF ``RateLimit`` field).
    """
    text = single_value(value)
    if not text:
        return None
    if _DECIMAL.fullmatch(text):
        number = Fraction(text)
        if delta_only or number < _EPOCH_S_FLOOR:
            return math.ceil(number * 1000)
        if number < _EPOCH_MS_FLOOR:
            return clock.wait_until_ms(number * 1_000_000)
        return clock.wait_until_ms(number * 1000)
    if _GO_DURATION.fullmatch(text):
        total_us = sum(
            (Fraction(amount) * _GO_UNIT_US[unit] for amount, unit in _GO_PART.findall(text)),
            Fraction(0),
        )
        return math.ceil(total_us / 1000)
    if _ISO_TIMESTAMP.match(text):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        return clock.wait_until_ms(epoch_us(moment))
    return None


def body_retry_ms(payload: object) -> tuple[int, str] | None:
    """Retry hints in a JSON body: Google's ``RetryInfo.retryDelay``, then a top-level
    ``retry_after``/``retryAfter`` in seconds (Discord, Cloudflare, Salesforce).

    Returns (milliseconds, source name); members of the wrong type are ignored.
    """
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        payload = payload[0]  # Google sometimes wraps the whole body in an array
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    details = error.get("details") if isinstance(error, dict) else None
    if isinstance(details, list):
        for item in details[:20]:
            if not isinstance(item, dict):
                continue
            kind = item.get("@type")
            delay = item.get("retryDelay")
            if isinstance(kind, str) and kind.endswith("google.rpc.RetryInfo"):
                match = _PROTO_DURATION.fullmatch(delay) if isinstance(delay, str) else None
                if match is not None:
                    return math.ceil(Fraction(match[1]) * 1000), "body:retryDelay"
    for key in ("retry_after", "retryAfter"):
        value = payload.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value >= 0:
            return value * 1000, f"body:{key}"
        if isinstance(value, float) and math.isfinite(value) and value >= 0:
            return math.ceil(Fraction(repr(value)) * 1000), f"body:{key}"
        if isinstance(value, str):
            delay = seconds_ms(value.strip())
            if delay is not None:
                return delay, f"body:{key}"
    return None
