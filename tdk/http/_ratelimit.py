"""Rate-limit buckets from every header dialect of UPSTREAM.md, and which are exhausted.

A *bucket* is one quota the upstream reports: its ``limit``, ``remaining`` and ``reset``. The
dialects differ in names and units; this module only finds the buckets, and
:func:`tdk.http._retry_after.reset_wait_ms` reads the values:

- IETF ``RateLimit: "default";r=0;t=30`` (draft -08 and later, with ``RateLimit-Policy``
  for the limit) and ``RateLimit: limit=100, remaining=0, reset=5`` (draft -07);
- ``RateLimit-Remaining``/``RateLimit-Reset`` (draft -06), ``X-RateLimit-*`` (GitHub, Reddit,
  Discord, with ``X-RateLimit-Reset-After`` as the fallback of ``X-RateLimit-Reset``) and
  ``x-rate-limit-*`` (X/Twitter);
- ``x-ratelimit-{limit,remaining,reset}-<bucket>`` (OpenAI and Azure OpenAI);
- ``<vendor>-ratelimit-<bucket>-{limit,remaining,reset}`` (Anthropic).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from tdk.http._retry_after import Clock, HeaderMap, number, reset_wait_ms

_FLAT = re.compile(r"(?P<prefix>(?:x-)?rate-?limit)-(?P<field>limit|remaining|reset|reset-after)")
_SUFFIXED = re.compile(
    r"(?P<prefix>[a-z0-9-]*rate-?limit)-(?P<field>limit|remaining|reset)-(?P<bucket>[a-z0-9-]+)"
)
_INFIXED = re.compile(
    r"(?P<prefix>[a-z0-9-]*rate-?limit)-(?P<bucket>[a-z0-9-]+?)-(?P<field>limit|remaining|reset)"
)
#: Longest header name matched against the dialects. Real ones are short (Anthropic's
#: ``anthropic-ratelimit-output-tokens-remaining`` has 43 characters); a longer name is skipped
#: unread, because ``_SUFFIXED``/``_INFIXED`` cost O(n * k) on a name of length n holding k
#: ``ratelimit`` (``"x-ratelimit-" * 5000``: seconds).
_MAX_NAME_CHARS: Final = 100
_TOO_MANY_REQUESTS: Final = 429
#: Longest raw reset value copied into ``details``.
_MAX_RESET_CHARS: Final = 64
#: Longest ``limit``/``remaining`` value read: a 64-bit count has 20 digits, so anything longer
#: is garbage (and never reaches ``int()``, ``float()`` or ``details``).
_MAX_COUNT_CHARS: Final = 32


@dataclass(frozen=True, slots=True)
class Bucket:
    """One quota as the upstream reported it; raw header values, parsed on demand."""

    limit: str | None = None
    remaining: str | None = None
    reset: str | None = None
    reset_after: str | None = None
    delta_only: bool = False
    """The IETF field: its reset is always seconds from now, never an epoch."""

    def remaining_number(self) -> int | Fraction | None:
        """``remaining`` as a number (Reddit sends ``0.0``), or None if absent or garbage."""
        return _number(self.remaining)

    def exhausted(self, status: int) -> bool:
        """Remaining is 0; or, on a 429, the upstream did not say how much remains."""
        remaining = self.remaining_number()
        if remaining is None:
            return status == _TOO_MANY_REQUESTS
        return remaining == 0

    def wait_ms(self, clock: Clock) -> int | None:
        """Milliseconds until the bucket resets (``reset``, else ``reset_after``), or None."""
        if self.reset is not None:
            wait = reset_wait_ms(self.reset, clock, delta_only=self.delta_only)
            if wait is not None:
                return wait
        if self.reset_after is not None:
            return reset_wait_ms(self.reset_after, clock, delta_only=True)
        return None

    def details(self) -> dict[str, Any]:
        """``limit``, ``remaining`` (numbers) and ``reset`` (raw: units differ) when present."""
        facts: dict[str, Any] = {}
        for key, value in (("limit", self.limit), ("remaining", self.remaining)):
            number = _number(value)
            if number is not None:
                facts[key] = number if isinstance(number, int) else _plain(number)
        reset = self.reset if self.reset is not None else self.reset_after
        if reset is not None:
            facts["reset"] = "".join(ch for ch in reset if ch.isprintable())[:_MAX_RESET_CHARS]
        return facts


@dataclass(frozen=True, slots=True)
class RateLimitState:
    """What the rate-limit headers of one response say."""

    buckets: tuple[Bucket, ...]
    shown: Bucket | None
    """The bucket reported in ``details``: the exhausted one with the longest wait, else the
    first exhausted, else the first found."""
    wait_ms: int | None
    """The longest wait among exhausted buckets, or None."""

    @property
    def quota_exhausted(self) -> bool:
        """Some bucket says explicitly that nothing remains."""
        return any(bucket.remaining_number() == 0 for bucket in self.buckets)


def rate_limit_state(headers: HeaderMap, status: int, clock: Clock) -> RateLimitState:
    """The buckets of ``headers``, and the wait that the exhausted ones impose."""
    buckets = _buckets(headers)
    if not buckets:
        return _NO_BUCKETS
    shown: Bucket | None = None
    longest: int | None = None
    for bucket in buckets:
        if not bucket.exhausted(status):
            continue
        wait = bucket.wait_ms(clock)
        if wait is not None and (longest is None or wait > longest):
            shown, longest = bucket, wait
        elif shown is None:
            shown = bucket
    if shown is None and buckets:
        shown = buckets[0]
    return RateLimitState(buckets, shown, longest)


#: The state of a response without rate-limit headers (most of them).
_NO_BUCKETS: Final = RateLimitState((), None, None)


def _buckets(headers: HeaderMap) -> tuple[Bucket, ...]:
    found: list[Bucket] = []
    field = headers.get("ratelimit")
    if field is not None:
        found.extend(_ietf_buckets(field, headers.get("ratelimit-policy")))
    grouped: dict[tuple[str, str], dict[str, str]] = {}
    for name, value in headers.items():
        if ("ratelimit" not in name and "rate-limit" not in name) or len(name) > _MAX_NAME_CHARS:
            continue
        match = _FLAT.fullmatch(name) or _SUFFIXED.fullmatch(name) or _INFIXED.fullmatch(name)
        if match is None:
            continue
        parts = match.groupdict()
        prefix = parts["prefix"].replace("rate-limit", "ratelimit")
        grouped.setdefault((prefix, parts.get("bucket") or ""), {})[parts["field"]] = value
    for fields in grouped.values():
        found.append(
            Bucket(
                limit=fields.get("limit"),
                remaining=fields.get("remaining"),
                reset=fields.get("reset"),
                reset_after=fields.get("reset-after"),
            )
        )
    return tuple(found)


def _ietf_buckets(field: str, policy: str | None) -> list[Bucket]:
    """The IETF ``RateLimit`` field: a list of named items with ``r``/``t`` parameters
    (draft -08 and later) or one ``limit=, remaining=, reset=`` dictionary (draft -07)."""
    items = [item.strip() for item in field.split(",") if item.strip()]
    if not any(";" in item or item.startswith('"') for item in items):
        params = _params(items)
        return [
            Bucket(
                limit=params.get("limit"),
                remaining=params.get("remaining"),
                reset=params.get("reset"),
                delta_only=True,
            )
        ]
    quotas = {name: params.get("q") for name, params in _named_items(policy or "").items()}
    return [
        Bucket(
            limit=quotas.get(name),
            remaining=params.get("r"),
            reset=params.get("t"),
            delta_only=True,
        )
        for name, params in _named_items(field).items()
    ]


def _named_items(field: str) -> dict[str, Mapping[str, str]]:
    named: dict[str, Mapping[str, str]] = {}
    for item in field.split(","):
        name, *params = item.split(";")
        named[name.strip().strip('"')] = _params(params)
    return named


def _params(pairs: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if sep:
            params[key.strip().lower()] = value.strip().strip('"')
    return params


def _plain(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def _number(value: str | None) -> int | Fraction | None:
    """A count (``limit``, ``remaining``): ``DIGITS[.DIGITS]`` of at most 32 characters."""
    if value is None:
        return None
    text = value.strip()
    if "," in text:  # repeated fields joined: trust them only when they agree
        values = {part.strip() for part in text.split(",")}
        if len(values) != 1:
            return None
        text = values.pop()
    return number(text) if len(text) <= _MAX_COUNT_CHARS else None
