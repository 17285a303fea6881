"""One failed response -> one :class:`~tdk.errors.UpstreamError`.

The status picks the class through :meth:`UpstreamError.class_for_status` (the one status
table). Then the rate-limit overrides (a 403/400 that is really a rate limit keeps its
``status_code``), the retry hint (:mod:`._retry_after`, :mod:`._ratelimit`), the explicit server
verdicts on retryability, and the texts: a fixed sentence per kind for the model, the
upstream's own words (redacted) for developers.

A last resort keeps the promise that only the classified error leaves the hook: should the
classification meet an unexpected exception (a bug), the error is built again from the status
and headers alone, else from the status alone, and ``details["fallback"]`` says so.
"""

from __future__ import annotations

import base64
import binascii
import http
import logging
import math
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote_plus

import httpx

from tdk._failures.redact import (
    SECRET_HEADER_NAMES,
    SECRET_QUERY_NAMES,
    SHORTEST_INFERRED_SECRET,
    credential_name,
    credential_parameter,
    redact_text,
    redact_url,
)
from tdk.errors import (
    MAX_DEVELOPER_MESSAGE_CHARS,
    MAX_SAFE_INT,
    ErrorKind,
    UpstreamError,
    UpstreamRateLimitError,
)
from tdk.http._body import (
    EMPTY,
    MAX_TOKEN_CHARS,
    UpstreamBody,
    clean,
    parse_body,
    supported_encoding,
)
from tdk.http._ratelimit import RateLimitState, rate_limit_state
from tdk.http._retry_after import Clock, body_retry_ms, header_map, header_retry_ms

_LOG: Final = logging.getLogger("tdk.http")

BodyCheck = Callable[[httpx.Response, object], UpstreamError | None]
"""A provider-specific check: ``(response, parsed JSON body or None) -> error or None``."""

#: Codes (compared case-insensitively) that make a 400/403 (or a 503) a rate limit: Google's
#: reasons and gRPC status, Salesforce, AWS throttling, S3 ``SlowDown``, Stripe's legacy code,
#: Notion, GraphQL ``RATE_LIMITED``.
RATE_LIMIT_CODES: Final = frozenset(
    code.lower()
    for code in (
        "rateLimitExceeded", "userRateLimitExceeded", "dailyLimitExceeded",
        "dailyLimitExceededUnreg", "quotaExceeded", "concurrentLimitExceeded",
        "servingLimitExceeded", "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED",
        "REQUEST_LIMIT_EXCEEDED", "ThrottlingException", "Throttling", "ThrottledException",
        "TooManyRequestsException", "RequestLimitExceeded", "RequestThrottled",
        "RequestThrottledException", "ProvisionedThroughputExceededException", "SlowDown",
        "rate_limit", "rate_limited", "rate_limit_exceeded",
    )
)  # fmt: skip
#: Codes of a quota that time will not refill (OpenAI billing): a rate limit, not retryable.
QUOTA_CODES: Final = frozenset({"insufficient_quota"})
#: Headers that may carry the upstream's request id, first found wins. No other response
#: header is copied, and no request header ever.
REQUEST_ID_HEADERS: Final = (
    "x-request-id", "request-id", "x-amzn-requestid", "x-amz-request-id", "x-github-request-id",
    "x-ms-request-id", "x-correlation-id", "cf-ray",
)  # fmt: skip
#: Explicit server verdicts on retryability (OpenAI/Anthropic, Stripe).
VERDICT_HEADERS: Final = ("x-should-retry", "stripe-should-retry")
#: Statuses whose upstream text may reach the model (after redaction).
QUOTED_STATUSES: Final = frozenset({400, 404, 409, 422})
#: Longest upstream text in the model-facing message / in the developer message.
MODEL_TEXT_CHARS: Final = 300
DEVELOPER_TEXT_CHARS: Final = 1_000
#: Field errors listed in the model-facing message, and the longest field name and problem
#: text there (all of them, up to ``MAX_FIELD_ERRORS``, stay in ``details["errors"]``).
MODEL_FIELD_ERRORS: Final = 5
MODEL_FIELD_CHARS: Final = 80
MODEL_PROBLEM_CHARS: Final = 150

_SENTENCES: Final[Mapping[ErrorKind, str]] = {
    ErrorKind.UPSTREAM_RUNTIME_BAD_REQUEST: "The upstream service rejected the request",
    ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR: (
        "The upstream service refused the credentials or permissions of the request"
    ),
    ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND: "The upstream service did not find the resource",
    ErrorKind.UPSTREAM_RUNTIME_VALIDATION_ERROR: (
        "The upstream service could not process the content of the request"
    ),
    ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT: "The upstream service is rate limiting requests",
    ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR: "The upstream service failed",
    ErrorKind.UPSTREAM_RUNTIME_UNMAPPED: "The upstream service answered with an unknown status",
}
_QUOTA_SENTENCE: Final = "The upstream account has run out of quota; waiting will not help"
_RATE_LIMITABLE: Final = frozenset({400, 403})
#: Reason phrases from the standard, never from the server (HTTP/2 has none, and a server's
#: phrase is free text).
_PHRASES: Final[Mapping[int, str]] = {status.value: status.phrase for status in http.HTTPStatus}


def build_error(
    response: httpx.Response,
    body: bytes | None,
    *,
    now: datetime | None,
    max_retry_after_ms: int,
    secrets: Iterable[str] = (),
    check_body: BodyCheck | None = None,
) -> UpstreamError:
    """Classify a response of status >= 400 (or outside 100-599) given at most its body.

    Raises only what ``check_body`` raises (or a ``TypeError`` for what it returns): an
    unexpected exception of the classification itself gives :func:`_status_only_error`'s error.
    """
    secrets = tuple(secrets)  # read twice when the last resort runs
    if not -MAX_SAFE_INT <= response.status_code <= MAX_SAFE_INT:
        return _status_only(response)  # no status an error can carry: nothing else to read
    failure: Exception | None = None
    headers: dict[str, str] = {}
    parsed = EMPTY
    try:
        headers = header_map(response.headers)
        parsed = parse_body(body, headers.get("content-type", ""))
    except Exception as exc:  # a bug: the check still runs, on no payload
        failure = exc
    if check_body is not None:  # the user's code: its exceptions are the user's
        custom = check_body(response, parsed.payload)
        if custom is not None:
            return complete_body_check_error(custom, response)
    if failure is None:
        try:
            return _classified(
                response, headers, parsed, body, now=now, limit=max_retry_after_ms, secrets=secrets
            )
        except Exception as exc:  # a bug: never let a foreign exception leave the hook
            failure = exc
    return _status_only_error(response, failure, now=now, limit=max_retry_after_ms, secrets=secrets)


def _status_only_error(
    response: httpx.Response,
    failure: Exception,
    *,
    now: datetime | None,
    limit: int,
    secrets: Sequence[str],
) -> UpstreamError:
    """The error of a response whose classification failed: built again from the status and
    headers alone (the body is the usual culprit), else from the status alone; marked in
    ``details["fallback"]`` and the developer message, and logged as the bug it is."""
    try:
        headers = header_map(response.headers)
        error = _classified(response, headers, EMPTY, None, now=now, limit=limit, secrets=secrets)
        used, unread = "status and headers", "body"
    except Exception:
        error = _status_only(response)
        used, unread = "status", "body or headers"
    name = type(failure).__name__
    error.details["fallback"] = used
    error.details["fallback_error"] = name
    note = (
        f"[tdk could not read this response's {unread} ({name}): classified from its {used} alone]"
    )
    error.developer_message = f"{error.developer_message} {note}"[:MAX_DEVELOPER_MESSAGE_CHARS]
    where = traceback.extract_tb(failure.__traceback__)[-1]
    _LOG.warning(
        "classifying an HTTP %s response failed with %s at %s:%s in %s(); classified from its "
        "%s alone. This is a bug in tdk.http: please report it.",
        response.status_code,
        name,
        Path(where.filename).name,
        where.lineno,
        where.name,
        used,
    )
    return error


def _status_only(response: httpx.Response) -> UpstreamError:
    """The error the status table gives, with the fixed sentence and the standard phrase."""
    status: int | None = response.status_code
    if status is not None and not -MAX_SAFE_INT <= status <= MAX_SAFE_INT:
        status = None  # no status an error can carry (a transport of the caller's own)
    shown = "status out of range" if status is None else status
    cls = UpstreamError.class_for_status(status)
    phrase = _PHRASES.get(status) if status is not None else None
    return cls(
        f"{_SENTENCES[cls.kind]} (HTTP {shown}).",
        status_code=status,
        developer_message=f"HTTP {shown} {phrase}" if phrase else f"HTTP {shown}",
        details={"status_code": status},
    )


def _classified(
    response: httpx.Response,
    headers: dict[str, str],
    parsed: UpstreamBody,
    body: bytes | None,
    *,
    now: datetime | None,
    limit: int,
    secrets: Sequence[str],
) -> UpstreamError:
    """The classification proper (see the module doc); ``limit`` is ``max_retry_after_ms``."""
    status = response.status_code
    request = _request_or_none(response)
    clock = Clock(headers.get("date"), now)
    state = rate_limit_state(headers, status, clock)
    cls = UpstreamError.class_for_status(status)
    if cls is not UpstreamRateLimitError and _really_rate_limit(status, headers, parsed, state):
        cls = UpstreamRateLimitError
    quota = cls is UpstreamRateLimitError and _out_of_quota(parsed)

    header_hint = header_retry_ms(headers, clock)
    retry_after_ms, source = _wait(header_hint, state, parsed)
    retryable = _said_retryable(status, headers, quota=quota, header_hint=header_hint)

    known = [*request_secrets(request), *secrets]
    details = _details(request, status, parsed=parsed, headers=headers, state=state, secrets=known)
    fields = [(redact_text(f, known), redact_text(p, known)) for f, p in parsed.fields]
    if fields:
        details["errors"] = [{"field": field, "problem": problem} for field, problem in fields]
    if source is not None:
        details["retry_after_source"] = source
    if retry_after_ms is not None and retry_after_ms > limit:
        details["retry_after_clamped_from_ms"] = retry_after_ms
        retry_after_ms = limit

    text = redact_text(parsed.text, known, limit=DEVELOPER_TEXT_CHARS) if parsed.text else None
    kind = cls.kind
    will_retry = retryable if retryable is not None else _default_retryable(cls, status)
    message = _model_message(
        kind, status, text, retry_after_ms, will_retry, quota=quota, fields=fields
    )
    developer = _developer_message(
        details, text, parsed=parsed, body=body, response=response, secrets=known
    )
    return cls(
        message,
        status_code=status,
        retry_after_ms=retry_after_ms,
        retryable=retryable,
        developer_message=developer,
        details=details,
    )


def _wait(
    header_hint: tuple[int, str] | None, state: RateLimitState, parsed: UpstreamBody
) -> tuple[int | None, str | None]:
    """How long to wait before a retry, in milliseconds, and which part of the response says
    so: a retry header, else the reset of an exhausted rate limit, else the body; (None, None)
    when none does."""
    hint = header_hint
    if hint is None and state.wait_ms is not None:
        hint = (state.wait_ms, "ratelimit-reset")
    if hint is None:
        hint = body_retry_ms(parsed.payload)
    return hint if hint is not None else (None, None)


def _said_retryable(
    status: int,
    headers: Mapping[str, str],
    *,
    quota: bool,
    header_hint: tuple[int, str] | None,
) -> bool | None:
    """Whether the response says a retry may succeed: not for a quota used up, yes for a 413
    that says when to retry, and as an ``x-should-retry`` header says, which wins; None when
    it says nothing (the class's default applies)."""
    retryable: bool | None = None
    if quota:
        retryable = False
    elif status == 413 and header_hint is not None:
        retryable = True  # RFC 9110 section 15.5.14: the condition is temporary
    verdict = _verdict(headers)
    if verdict is not None:
        retryable = verdict
    return retryable


def complete_body_check_error(error: object, response: httpx.Response) -> UpstreamError:
    """Fill in what a provider-specific check left out: status, method and redacted URL."""
    if not isinstance(error, UpstreamError):
        raise TypeError(
            f"a body check must return an UpstreamError or None, not {type(error).__name__}"
        )
    if error.status_code is None:
        error.status_code = response.status_code
    base = _details(_request_or_none(response), response.status_code)
    for key, value in base.items():
        error.details.setdefault(key, value)
    return error


def request_secrets(request: httpx.Request | None) -> list[str]:
    """The credentials a request carried, to be scrubbed by exact value from every text.

    Values of the headers whose names look like a credential's
    (:func:`~tdk._failures.redact.credential_name`: ``Authorization``, ``X-RapidAPI-Key``,
    ``X-Vault-Token``...): whole, the token after the scheme, the decoded ``Basic`` pair, each
    cookie value. The URL's userinfo, and the values of credential query parameters (decoded
    and raw). A value that only the rule marks (not ``SECRET_HEADER_NAMES`` or
    ``SECRET_QUERY_NAMES``) counts from ``SHORTEST_INFERRED_SECRET`` characters:
    ``X-Session-Affinity: true`` does not make every "true" a secret.
    """
    if request is None:
        return []
    found: list[str] = []
    for raw_name, raw_value in request.headers.raw:  # no decoding of the harmless headers
        lowered = raw_name.decode("latin-1").lower()
        listed = lowered in SECRET_HEADER_NAMES
        if not listed and not credential_name(lowered):
            continue
        value = raw_value.decode("latin-1")
        values: list[str] = []
        if not value.isascii():  # a value given as bytes: most likely UTF-8
            values.append(raw_value.decode("utf-8", "replace"))
        values.append(value)
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        if credential:
            values.append(credential)
        if scheme.lower() == "basic":
            values.extend(_basic_pair(credential))
        if lowered in ("cookie", "set-cookie"):
            values.extend(part.partition("=")[2].strip() for part in value.split(";"))
        if not listed:
            values = [v for v in values if len(v.strip()) >= SHORTEST_INFERRED_SECRET]
        found.extend(values)
    url = request.url
    if url.userinfo:
        found.extend((url.userinfo.decode("ascii", "replace"), url.password or ""))
    query = url.query.decode("ascii", "replace")
    for pair in query.split("&") if query else ():
        name, _, raw = pair.partition("=")
        if "%" in name or "+" in name:
            name = unquote_plus(name)
        if credential_parameter(name):
            values = [raw, unquote_plus(raw)]
            if name.lower() not in SECRET_QUERY_NAMES:
                values = [v for v in values if len(v.strip()) >= SHORTEST_INFERRED_SECRET]
            found.extend(values)
    return found


def _basic_pair(credential: str) -> list[str]:
    try:
        pair = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return []
    return [pair, pair.partition(":")[2]]


def _request_or_none(response: httpx.Response) -> httpx.Request | None:
    try:
        return response.request
    except RuntimeError:  # a response built by hand, without a request
        return None


def _really_rate_limit(
    status: int, headers: Mapping[str, str], parsed: UpstreamBody, state: RateLimitState
) -> bool:
    """A 400/403 (or an S3-style 503) that the upstream means as a rate limit."""
    if any(code.lower() in RATE_LIMIT_CODES for code in parsed.codes):
        return status in _RATE_LIMITABLE or status == 503
    if status not in _RATE_LIMITABLE:
        return False
    if state.quota_exhausted:
        return True
    if parsed.text is not None and "secondary rate limit" in parsed.text.lower():
        return True
    return status == 403 and ("retry-after" in headers or "retry-after-ms" in headers)


def redacted_url(url: httpx.URL, secrets: Sequence[str]) -> str:
    """``url`` as :func:`~tdk._failures.redact.redact_url` shows it: no userinfo; the values of
    credential parameters, token shapes and ``secrets`` replaced, wherever they are."""
    return redact_url(str(url), secrets)


def _out_of_quota(parsed: UpstreamBody) -> bool:
    words = [*parsed.codes, parsed.type] if parsed.type else parsed.codes
    return any(word.lower() in QUOTA_CODES for word in words)


def _verdict(headers: Mapping[str, str]) -> bool | None:
    for name in VERDICT_HEADERS:
        value = headers.get(name)
        if value is not None:
            verdict = value.strip().lower()
            if verdict in ("true", "false"):
                return verdict == "true"
    return None


def _default_retryable(cls: type[UpstreamError], status: int) -> bool:
    if status in UpstreamError.RETRYABLE_CLIENT_STATUSES:
        return True
    return cls.retryable


def _details(
    request: httpx.Request | None,
    status: int,
    *,
    parsed: UpstreamBody | None = None,
    headers: Mapping[str, str] | None = None,
    state: RateLimitState | None = None,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if request is not None:
        details["method"] = request.method
        details["url"] = redacted_url(request.url, secrets)
    details["status_code"] = status
    if parsed is not None:
        if parsed.codes:
            details["code"] = redact_text(parsed.codes[0], secrets)
        if parsed.type:
            details["type"] = redact_text(parsed.type, secrets)
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name) if headers else None
        if value:
            details["request_id"] = redact_text(clean(value, MAX_TOKEN_CHARS), secrets)
            break
    if state is not None and state.shown is not None:
        details.update(state.shown.details())
    return details


def _seconds(retry_after_ms: int) -> int:
    return math.ceil(retry_after_ms / 1000)


def _model_message(
    kind: ErrorKind,
    status: int,
    text: str | None,
    retry_after_ms: int | None,
    retryable: bool,
    *,
    quota: bool,
    fields: Sequence[tuple[str, str]] = (),
) -> str:
    sentence = _QUOTA_SENTENCE if quota else _SENTENCES[kind]
    parts = [f"{sentence} (HTTP {status})."]
    if status in QUOTED_STATUSES:
        if text:
            parts.append(f'Upstream message: "{_cut(text, MODEL_TEXT_CHARS)}"')
        if fields:
            parts.append(_field_list(fields))
    if retry_after_ms is not None and retryable:
        parts.append(f"Retry after {_seconds(retry_after_ms)} s.")
    return " ".join(parts)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _field_list(fields: Sequence[tuple[str, str]]) -> str:
    """``Upstream field errors: name: "problem"; ...`` for the first few, then how many more."""
    listed = "; ".join(
        f'{_cut(field, MODEL_FIELD_CHARS)}: "{_cut(problem, MODEL_PROBLEM_CHARS)}"'
        for field, problem in fields[:MODEL_FIELD_ERRORS]
    )
    more = len(fields) - MODEL_FIELD_ERRORS
    return f"Upstream field errors: {listed}" + (f" (and {more} more)." if more > 0 else ".")


def _developer_message(
    details: Mapping[str, Any],
    text: str | None,
    *,
    parsed: UpstreamBody,
    body: bytes | None,
    response: httpx.Response,
    secrets: Sequence[str],
) -> str:
    status = response.status_code
    phrase = _PHRASES.get(status)
    head = f"HTTP {status} {phrase}" if phrase else f"HTTP {status}"
    if "method" in details:
        head = f"{details['method']} {details['url']} -> {head}"
    if text:
        head = f"{head}: {text}"
    if parsed.html_title:
        head = f'{head} [HTML page titled "{redact_text(parsed.html_title, secrets)}"]'
    if body is None and supported_encoding(response) is None:
        encoding = redact_text(
            clean(response.headers.get("content-encoding", ""), MAX_TOKEN_CHARS), secrets
        )
        head = f"{head} [body in {encoding!r} encoding not decoded]"
    return head[:MAX_DEVELOPER_MESSAGE_CHARS]
