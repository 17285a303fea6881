"""Bounded reads of an authorization server's JSON: its metadata, its keys, its introspection.

An authorization server that is down, slow, or answers something else than JSON (an HTML
login page, a 500, a body that never ends) must cost a request no more than
:data:`FETCH_TIMEOUT` seconds and :data:`MAX_BODY` bytes, and must never raise anything but
:class:`FetchError` to the verifier, which refuses the token (a 401) and logs why: the URL
redacted, the reason in words of tdk's own, never the foreign exception's text.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Collection, Mapping
from typing import Any, Final
from urllib.parse import quote_plus

import httpx

__all__ = [
    "FETCH_TIMEOUT",
    "MAX_BODY",
    "MAX_TOKEN_ANSWER",
    "TOKEN_STATUSES",
    "FetchError",
    "client_basic",
    "fetch_json",
]

#: Seconds one fetch may take, from the connection to the last byte of the body.
FETCH_TIMEOUT: Final = 5.0
#: The largest body read, in bytes (a JWKS of a few dozen keys is under 50 KB).
MAX_BODY: Final = 256 * 1024


#: The largest answer of a token endpoint read, in bytes (a token answer is far smaller).
MAX_TOKEN_ANSWER: Final = 64 * 1024
#: The statuses a token endpoint answers with JSON (its errors: RFC 6749 section 5.2).
TOKEN_STATUSES: Final = (200, 400, 401)


def client_basic(client_id: str, secret: str) -> str:
    """The ``Authorization`` header of an OAuth client authenticating with HTTP Basic: its
    id and secret each form-encoded first (RFC 6749 section 2.3.1)."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


class FetchError(Exception):
    """A fetch gave no JSON object; ``str()`` says why in tdk's words (safe to log)."""


async def fetch_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    form: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = FETCH_TIMEOUT,
    limit: int = MAX_BODY,
    statuses: Collection[int] = (200,),
) -> dict[str, Any]:
    """The JSON object at ``url`` (a GET; a POST of ``form`` when given), answered with one
    of ``statuses`` (200; a token endpoint's errors come with 400 too) and a JSON media type,
    read in ``timeout`` seconds and ``limit`` bytes at most; else :class:`FetchError`.
    Redirects are not followed."""
    try:
        async with asyncio.timeout(timeout):
            body = await _body(client, url, form, headers, limit=limit, statuses=statuses)
    except FetchError:
        raise
    except TimeoutError:
        raise FetchError(f"no complete answer within {timeout:g} s") from None
    except httpx.HTTPError as failed:
        raise FetchError(f"the request failed ({type(failed).__name__})") from None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise FetchError("the answer is not JSON") from None
    if not isinstance(value, dict):
        raise FetchError("the answer is not a JSON object")
    return value


async def _body(
    client: httpx.AsyncClient,
    url: str,
    form: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    *,
    limit: int,
    statuses: Collection[int],
) -> bytes:
    method = "GET" if form is None else "POST"
    # (no compression: a small gzip body may inflate to gigabytes before any size check)
    sent = {"Accept": "application/json", "Accept-Encoding": "identity", **(headers or {})}
    async with client.stream(
        method, url, data=form, headers=sent, follow_redirects=False
    ) as response:
        if response.status_code not in statuses:
            raise FetchError(f"the answer is HTTP {response.status_code}, not 200")
        media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise FetchError(f"the answer is {media or 'untyped'}, not JSON")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            raise FetchError("the answer is compressed, which was not asked for")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FetchError(f"the answer is larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > limit:
                raise FetchError(f"the answer is larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
