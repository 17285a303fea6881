"""Responses as the hook sees them, for the tests of ``tdk.http``'s classifier: a request (method
and URL) and a fixed ``Date``, with the headers, body and content type a test gives; and
``classify`` of one, checked to be printable, JSON-safe plain data."""

from __future__ import annotations

import json
from typing import Any

import httpx

import tdk.http
from tdk.errors import UpstreamError

URL = "https://api.example.com/v1/items"
#: The response's clock: epoch 1_700_000_000.
DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
CLAMP = tdk.http.DEFAULT_MAX_RETRY_AFTER_MS
#: What ``details["retry_after_clamped_from_ms"]`` shows for any wait longer than it.
LONGEST_WAIT_MS = 2**53 - 1
#: More digits than Python converts between ``int`` and ``str`` (4,300 by default).
HUGE = "9" * 5_000


#: What the hook reads of a body at most: the size of the longest inputs the tests make.
KB64 = 65_536


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
