"""How long an upstream asks us to wait: ``Retry-After`` and its millisecond cousins.

This module knows the value grammars (delta seconds, HTTP-dates, epoch numbers, Go and protobuf
durations, RFC 3339 timestamps) and the reference clock; :mod:`tdk.http._ratelimit` knows which
headers carry them. Every parser returns whole milliseconds rounded up, ``0`` for a time in the
past, and ``None`` for anything it does not recognise (so that the caller falls through to the
next source). Arithmetic is exact (integers and :class:`~fractions.Fraction`), so
``1.0001`` seconds is 1001 ms, not 1000.

Upstream numbers are read at bounded cost (:func:`number`): Python's ``int()`` and
``Fraction()`` refuse more than 4,300 digits and cost quadratic time below that. A number
with more than 24 integer digits stands for "longer than any clamp", and every wait is at most
:data:`MAX_WAIT_MS`, so that what lands in ``details`` stays a JSON-safe integer.
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

#: The longest wait reported (2**53 - 1 ms, about 285,000 years: the largest integer that JSON
#: readers keep exact). A longer wait, however many digits it has, reads as this one.
MAX_WAIT_MS: Final = 2**53 - 1

#: Headers holding a delay in milliseconds, read before ``Retry-After`` (OpenAI, Azure, AWS).
MS_HEADERS: Final = ("retry-after-ms", "x-ms-retry-after-ms", "x-amz-retry-after")

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
#: A bare number at least this large is an epoch in milliseconds; see ``reset_wait_ms``.
_EPOCH_MS_FLOOR: Final = 10**12
#: A bare number at least this large (and below the one above) is an epoch in seconds.
_EPOCH_S_FLOOR: Final = 10**9

#: Integer digits (leading zeros aside) read exactly; a number with more is "huge".
_MAX_DIGITS: Final = 24
#: What a huge number reads as: longer than ``MAX_WAIT_MS`` in any unit read here.
_HUGE: Final = 10**_MAX_DIGITS
#: Fraction digits read exactly; any non-zero digit after them rounds up in the last one.
_MAX_FRACTION_DIGITS: Final = 24
_GO_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:h|ms|m|s|us|µs|ns))+")
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")
_GO_UNIT_NS: Final[Mapping[str, int]] = {
    "h": 3_600_000_000_000,
    "m": 60_000_000_000,
    "s": 1_000_000_000,
    "ms": 1_000_000,
    "us": 1_000,
    "µs": 1_000,
    "ns": 1,
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

    Repeated fields are joined with ``", "`` as RFC 9110 section 5.3 allows: collected first
    and joined once, so that thousands of repeats cost linear time, not quadratic.
    """
    if isinstance(headers, httpx.Headers):
        items = headers.multi_items()  # names come lower-cased
    else:
        items = [(name.lower(), value) for name, value in headers.items()]
    merged: dict[str, str] = {}
    repeated: dict[str, list[str]] = {}
    for key, value in items:
        if key in merged:
            repeated.setdefault(key, [merged[key]]).append(value)
        else:
            merged[key] = value
    for key, values in repeated.items():
        merged[key] = ", ".join(values)
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
        return max(0, whole_ms(Fraction(target_us - self.now_us(), 1000)))


def epoch_us(moment: datetime) -> int:
    """Exact microseconds since the epoch; a naive datetime is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def single_value(value: str) -> str | None:
    """One field value from several joined with commas, or None when they disagree.

    RFC 9110 section 5.5: two different ``Retry-After`` fields (``"5, 10"``) must be ignored,
    while identical duplicates are harmless. Copies of one piece are tried, then copies of two
    pieces, because an HTTP-date holds a comma of its own (no value read here holds two): two
    passes, linear in the length of ``value`` (trying every group size was not).
    """
    value = value.strip()
    if "," not in value:
        return value
    pieces = value.split(",")
    for size in (1, 2):
        if len(pieces) % size == 0:
            groups = {",".join(pieces[i : i + size]).strip() for i in range(0, len(pieces), size)}
            if len(groups) == 1:
                return groups.pop()
    return value  # one value holding a comma (an HTTP-date), or several that disagree


def number(text: str) -> int | Fraction | None:
    """A ``DIGITS[.DIGITS]`` number (ASCII digits only), read at bounded cost; else None.

    Leading zeros are skipped. More than 24 integer digits read as ``10**24`` (a wait longer
    than any clamp, whatever the unit); fraction digits past the 24th count only as "more than
    zero", rounding the 24th up. Never calls ``int()`` or ``Fraction()`` on more than 48
    digits, so 5,000 digits cost a scan, not an exception.
    """
    if text.isdigit() and text.isascii() and len(text) <= _MAX_DIGITS:
        return int(text)  # the common case
    whole, dot, fraction = text.partition(".")
    if not (whole.isdigit() and whole.isascii()):  # "".isdigit() is False: ".5" is no number
        return None
    if dot and not (fraction.isdigit() and fraction.isascii()):  # "5." and "5.x" neither
        return None
    whole = whole.lstrip("0")
    if len(whole) > _MAX_DIGITS:
        return _HUGE
    round_up = 0
    if len(fraction) > _MAX_FRACTION_DIGITS:
        round_up = 1 if fraction[_MAX_FRACTION_DIGITS:].strip("0") else 0
        fraction = fraction[:_MAX_FRACTION_DIGITS]
    scaled = int(whole + fraction or "0") + round_up
    return Fraction(scaled, 10 ** len(fraction)) if fraction else scaled


def whole_ms(milliseconds: int | Fraction) -> int:
    """``milliseconds`` rounded up, at most :data:`MAX_WAIT_MS`."""
    return min(math.ceil(milliseconds), MAX_WAIT_MS)


def seconds_ms(text: str) -> int | None:
    """``DIGITS[.DIGITS]`` seconds as whole milliseconds (rounded up), else None."""
    if text.isdigit() and text.isascii() and len(text) <= _MAX_DIGITS:
        return min(int(text) * 1000, MAX_WAIT_MS)  # the common case, without two calls
    seconds = number(text)
    return None if seconds is None else whole_ms(seconds * 1000)


def millis(text: str) -> int | None:
    """``DIGITS[.DIGITS]`` milliseconds, rounded up, else None (signs and exponents too)."""
    milliseconds = number(text)
    return None if milliseconds is None else whole_ms(milliseconds)


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
    amount = number(text)
    if amount is not None:
        if delta_only or amount < _EPOCH_S_FLOOR:
            return whole_ms(amount * 1000)
        if amount < _EPOCH_MS_FLOOR:
            return clock.wait_until_ms(amount * 1_000_000)
        return clock.wait_until_ms(amount * 1000)
    if _GO_DURATION.fullmatch(text):
        return _go_duration_ms(text)
    if _ISO_TIMESTAMP.match(text):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        return clock.wait_until_ms(epoch_us(moment))
    return None


def _go_duration_ms(text: str) -> int:
    """A Go duration that matched ``_GO_DURATION``, in whole milliseconds (rounded up)."""
    total_ns: int | Fraction = 0
    for amount, unit in _GO_PART.findall(text):
        part = number(amount)
        assert part is not None  # the pattern matched DIGITS[.DIGITS]
        total_ns += part * _GO_UNIT_NS[unit]
        if total_ns >= _HUGE:  # already longer than any wait: the rest cannot shorten it
            break
    return whole_ms(Fraction(total_ns, 1_000_000))


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
                seconds = number(match[1]) if match is not None else None
                if seconds is not None:
                    return whole_ms(seconds * 1000), "body:retryDelay"
    for key in ("retry_after", "retryAfter"):
        value = payload.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value >= 0:
            return whole_ms(min(value, _HUGE) * 1000), f"body:{key}"
        if isinstance(value, float) and value >= 0:  # NaN fails the comparison
            exact = Fraction(repr(value)) if value < _HUGE else _HUGE  # infinity too
            return whole_ms(exact * 1000), f"body:{key}"
        if isinstance(value, str):
            delay = seconds_ms(value.strip())
            if delay is not None:
                return delay, f"body:{key}"
    return None
