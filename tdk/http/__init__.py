"""Upstream HTTP failures that classify themselves: httpx response hooks.

Install the hook once and every 4xx/5xx answer becomes an :class:`~tdk.errors.UpstreamError`
carrying ``status_code``, a correct ``retry_after_ms`` and the upstream's own words (redacted),
without the tool calling ``raise_for_status()``::

    import httpx
    import tdk.http

    client = tdk.http.install(httpx.Client())

The public names live in private modules: hooks and ``install`` in ``_hooks``, the status
table and overrides in ``_classify``, the retry-hint dialects in ``_retry_after`` and
``_ratelimit``, the bounded body reader in ``_body``, and the filter that redacts httpx's own
log lines in ``_logging``. The httpx rows of the exception mapping (``raise_for_status()`` and
transport errors inside a tool) belong to the error pipeline (``tdk._failures.httpx_rows``),
which calls :func:`classify`: nothing here imports that pipeline. See ``docs/http.md``.
"""

from tdk.http._body import DEFAULT_MAX_BODY_BYTES
from tdk.http._classify import BodyCheck
from tdk.http._hooks import (
    UpstreamHook,
    araise_for_upstream,
    classify,
    install,
    raise_for_upstream,
)
from tdk.http._logging import RedactingLogFilter, redact_httpx_logs
from tdk.http._retry_after import DEFAULT_MAX_RETRY_AFTER_MS, parse_retry_after_ms

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_RETRY_AFTER_MS",
    "BodyCheck",
    "RedactingLogFilter",
    "UpstreamHook",
    "araise_for_upstream",
    "classify",
    "install",
    "parse_retry_after_ms",
    "raise_for_upstream",
    "redact_httpx_logs",
]
