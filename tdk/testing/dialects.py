"""What real upstreams answer when they fail: the answers :class:`~tdk.testing.Upstream` plays.

Each answer is what the API itself sends (status, headers, body), taken from the providers'
documentation and the facts in tdk's ``UPSTREAM.md``, so that a tool's test sees what
production would:

- ``rate_limited(dialect, retry_after=...)``: the quota exhausted, the way each API says so
  and says when to come back (:data:`DIALECTS`);
- ``server_error(status, retry_after=None)``: a 5xx (a proxy's HTML for 502 and 504, the
  API's JSON otherwise), with ``Retry-After`` when given;
- ``invalid(fields)``: a 422 whose body names each field and what is wrong with it;
- ``timeout()``: the request was sent and no answer came in time (``httpx.ReadTimeout``);
- ``reset()``: the request was sent and the connection was reset before the answer
  (``httpx.ReadError``): the upstream may have acted, so a write must not be repeated;
- ``refused()``: the connection was refused: the request never left (``httpx.ConnectError``).

Every answer carries a ``Date`` header of the moment it is made, and reset times that are
absolute (GitHub's epoch seconds, Anthropic's RFC 3339) are that ``Date`` plus the wait: a
classifier that measures against ``Date``, as tdk's does, reads the wait exactly.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, Final

import httpx

__all__ = [
    "DIALECTS",
    "Answer",
    "answer_invalid",
    "answer_ok",
    "answer_rate_limited",
    "answer_refused",
    "answer_reset",
    "answer_server_error",
    "answer_timeout",
    "go_duration",
]

#: A request's answer: a response, or an exception raised as the transport would.
Respond = Callable[[httpx.Request, datetime], httpx.Response]


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer of an upstream route: ``respond(request, now)`` gives the response, or
    raises the transport error (``raises``) as httpx would."""

    label: str
    """What this answer is, for messages (``"429 github"``, ``"reset"``)."""
    respond: Respond | None = None
    raises: Callable[[httpx.Request], httpx.TransportError] | None = field(default=None)

    def __call__(self, request: httpx.Request, now: datetime) -> httpx.Response:
        """The response to ``request`` made at ``now`` (an aware datetime), or the transport
        error raised."""
        if self.raises is not None:
            raise self.raises(request)
        assert self.respond is not None  # (one of the two is always set)
        return self.respond(request, now)


def _headers(now: datetime, extra: Mapping[str, str], *, kind: str = "json") -> dict[str, str]:
    """The headers every answer carries: ``Date``, the content type, and ``extra``."""
    types = {"json": "application/json; charset=utf-8", "html": "text/html"}
    return {"Date": format_datetime(now, usegmt=True), "Content-Type": types[kind], **extra}


def _json_response(
    status: int, now: datetime, body: object, headers: Mapping[str, str]
) -> httpx.Response:
    return httpx.Response(status, headers=_headers(now, headers), content=json.dumps(body))


def answer_ok(
    body: object = None, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Answer:
    """A success: ``body`` as JSON (``{}`` when None)."""
    content = {} if body is None else body
    return Answer(
        f"{status}", lambda _r, now: _json_response(status, now, content, dict(headers or {}))
    )


def go_duration(seconds: float) -> str:
    """``seconds`` as a Go duration string, the way OpenAI's reset headers write it: ``20ms``,
    ``1.5s``, ``6m0s``, ``1h2m3s``."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _github(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    reset = int(now.timestamp()) + wait
    headers = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-used": "5000",
        "x-ratelimit-reset": str(reset),
        "x-ratelimit-resource": "core",
        "x-github-request-id": "C0DE:1234:5678:9ABC:DEF0",
    }
    body = {
        "message": "API rate limit exceeded for installation ID 4242.",
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
    }
    return status, headers, body


def _github_secondary(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    body = {
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
        "before you try again.",
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
    }
    headers = {"retry-after": str(wait), "x-github-request-id": "C0DE:1234:5678:9ABC:DEF1"}
    return status, headers, body


def _openai(status: int, seconds: float, now: datetime) -> tuple[int, dict[str, str], object]:
    headers = {  # the requests bucket is exhausted; the tokens bucket is not (and resets later)
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": go_duration(seconds),
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": go_duration(seconds + 330),
        "x-request-id": "req_0123456789abcdef",
    }
    body = {
        "error": {
            "message": "Rate limit reached for requests per min (RPM): Limit 500, Used 500, "
            f"Requested 1. Please try again in {go_duration(seconds)}.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    return status, headers, body


def _stripe(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    headers = {"Retry-After": str(wait), "Stripe-Should-Retry": "true", "Request-Id": "req_T3st"}
    body = {
        "error": {
            "code": "rate_limit",
            "doc_url": "https://stripe.com/docs/error-codes/rate-limit",
            "message": "Request rate limit exceeded. Learn more about rate limits here "
            "https://stripe.com/docs/rate-limits.",
            "type": "invalid_request_error",
        }
    }
    return status, headers, body


def _anthropic_limit(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    reset = _rfc3339(now + timedelta(seconds=wait))
    headers = {
        "retry-after": str(wait),
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset,
        "request-id": "req_011CTest",
    }
    body = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded "
                  "your per-minute rate limit."},
    }  # fmt: skip
    return status, headers, body


def _ietf(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    headers = {"RateLimit": f'"default";r=0;t={wait}', "RateLimit-Policy": '"default";q=100;w=60'}
    return status, headers, {"detail": "Too many requests.", "status": status}


def _ietf_07(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    headers = {"RateLimit": f"limit=100, remaining=0, reset={wait}"}
    return status, headers, {"detail": "Too many requests.", "status": status}


def _ietf_06(status: int, wait: int, now: datetime) -> tuple[int, dict[str, str], object]:
    headers = {"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": str(wait)}
    return status, headers, {"detail": "Too many requests.", "status": status}


Dialect = Callable[[int, Any, datetime], tuple[int, dict[str, str], object]]

#: Rate-limit dialect -> (its status, how it writes the wait, whole seconds or not).
DIALECTS: Final[Mapping[str, tuple[int, Dialect, bool]]] = {
    # GitHub's primary limit: 403 or 429, remaining 0, the reset in epoch seconds.
    "github": (429, _github, True),
    # GitHub's secondary limit: 403 or 429 with Retry-After and its message.
    "github-secondary": (403, _github_secondary, True),
    # OpenAI: the exhausted bucket's reset as a Go duration (x-ratelimit-reset-requests).
    "openai": (429, _openai, False),
    # Stripe: 429 with Stripe-Should-Retry and Retry-After (which Stripe's SDKs honour).
    "stripe": (429, _stripe, True),
    # Anthropic: Retry-After and RFC 3339 resets per bucket.
    "anthropic": (429, _anthropic_limit, True),
    # IETF RateLimit headers, draft -08 and later (Cloudflare's API since 2025-09).
    "ietf": (429, _ietf, True),
    # IETF draft -07 (one RateLimit field with limit, remaining and reset).
    "ietf-07": (429, _ietf_07, True),
    # IETF draft -06 and earlier (RateLimit-Limit, -Remaining, -Reset).
    "ietf-06": (429, _ietf_06, True),
}


def answer_rate_limited(
    dialect: str = "github", *, retry_after: float = 30.0, status: int | None = None
) -> Answer:
    """The quota exhausted, as ``dialect`` (a key of :data:`DIALECTS`) says it, with a wait of
    ``retry_after`` seconds (rounded up to whole seconds where the dialect writes whole
    seconds). ``status`` replaces the dialect's usual one (GitHub sends 403 or 429)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
    if not (isinstance(retry_after, int | float) and 0 <= retry_after < 10**7):
        raise ValueError(f"retry_after must be seconds from 0 to 10**7, got {retry_after!r}")
    usual, build, whole = DIALECTS[dialect]
    wait = math.ceil(retry_after) if whole else retry_after

    def respond(_request: httpx.Request, now: datetime) -> httpx.Response:
        code, headers, body = build(status or usual, wait, now)
        return _json_response(code, now, body, headers)

    return Answer(f"{status or usual} {dialect}", respond)


def answer_server_error(
    status: int = 503, *, retry_after: float | None = None, html: bool | None = None
) -> Answer:
    """A server error: the API's JSON, or (``html``; by default for 502 and 504) the HTML page
    of a proxy in front of it; ``Retry-After`` in whole seconds when ``retry_after`` is given."""
    if not 500 <= status <= 599:
        raise ValueError(f"a server error has a 5xx status, got {status!r}")
    page = status in (502, 504) if html is None else html
    extra = {} if retry_after is None else {"Retry-After": str(math.ceil(retry_after))}

    def respond(_request: httpx.Request, now: datetime) -> httpx.Response:
        if page:
            text = f"<html><head><title>{status} Bad Gateway</title></head><body></body></html>"
            return httpx.Response(status, headers=_headers(now, extra, kind="html"), text=text)
        return _json_response(status, now, {"message": "Server Error"}, extra)

    return Answer(f"{status}", respond)


def answer_invalid(
    fields: Mapping[str, str] | None = None, *, resource: str = "Issue", status: int = 422
) -> Answer:
    """A validation failure naming each field and its problem (GitHub's shape: ``message``
    and ``errors`` with ``resource``, ``field``, ``code``). ``fields``: field -> code
    (default ``{"title": "missing_field"}``)."""
    problems = dict(fields or {"title": "missing_field"})
    body = {
        "message": "Validation Failed",
        "errors": [
            {"resource": resource, "field": name, "code": code} for name, code in problems.items()
        ],
        "documentation_url": "https://docs.github.com/rest",
    }
    return Answer(f"{status} invalid", lambda _r, now: _json_response(status, now, body, {}))


def answer_timeout() -> Answer:
    """The request was sent; no answer came in time."""
    return Answer("answer_timeout", raises=lambda r: httpx.ReadTimeout("timed out", request=r))


def answer_reset() -> Answer:
    """The request was sent; the connection was reset before any answer."""
    return Answer(
        "reset", raises=lambda r: httpx.ReadError("[Errno 104] Connection reset by peer", request=r)
    )


def answer_refused() -> Answer:
    """The connection was refused: the request never left."""
    return Answer(
        "answer_refused",
        raises=lambda r: httpx.ConnectError("[Errno 111] Connection refused", request=r),
    )
