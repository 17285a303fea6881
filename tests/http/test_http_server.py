"""The hook against a real HTTP server on 127.0.0.1 (see ``tests/_http_server.py``)."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _http_server import DRIP_BODY, serve

import tdk.http
from tdk.errors import (
    UpstreamBadRequestError,
    UpstreamError,
    UpstreamRateLimitError,
    UpstreamServerError,
)

#: The hook may pull one network chunk past its limit before it stops.
NETWORK_CHUNK = 65_536


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve() as url:
        yield url


def hooked(seen: list[httpx.Response] | None = None, **options: float) -> httpx.Client:
    """A client that records each response (before the tdk hook runs) into ``seen``."""
    hooks = {"response": [seen.append]} if seen is not None else {}
    return tdk.http.install(httpx.Client(event_hooks=hooks, timeout=10), **options)


def test_429_with_retry_after(base_url: str) -> None:
    """A real 429 with ``Retry-After: 7`` is a rate limit of 7000 ms."""
    with hooked() as client, pytest.raises(UpstreamRateLimitError) as caught:
        client.get(f"{base_url}/limited")
    error = caught.value
    assert (error.status_code, error.retry_after_ms, error.retryable) == (429, 7_000, True)
    assert error.details["url"] == f"{base_url}/limited"
    assert "API rate limit exceeded" in (error.developer_message or "")


def test_429_with_retry_after_async(base_url: str) -> None:
    """The async hook classifies the same real 429."""

    async def fetch() -> UpstreamError:
        async with tdk.http.install(httpx.AsyncClient(timeout=10)) as client:
            with pytest.raises(UpstreamRateLimitError) as caught:
                await client.get(f"{base_url}/limited")
        return caught.value

    assert asyncio.run(fetch()).retry_after_ms == 7_000


def test_503_with_http_date(base_url: str) -> None:
    """A 503 whose ``Retry-After`` is an HTTP-date is measured against the ``Date`` header."""
    with hooked() as client, pytest.raises(UpstreamServerError) as caught:
        client.get(f"{base_url}/overloaded")
    assert caught.value.retry_after_ms == 120_000
    assert caught.value.message.endswith("Retry after 120 s.")
    assert "back soon" not in caught.value.message  # 5xx text stays with developers
    assert "Service Unavailable: back soon" in (caught.value.developer_message or "")


def test_redirect_into_an_error(base_url: str) -> None:
    """The 302 hop passes; the 503 it leads to raises, naming the final URL."""
    seen: list[httpx.Response] = []
    with hooked(seen) as client, pytest.raises(UpstreamServerError) as caught:
        client.get(f"{base_url}/moved", follow_redirects=True)
    assert [response.status_code for response in seen] == [302, 503]
    assert caught.value.details["url"] == f"{base_url}/overloaded"


def test_redirect_not_followed_passes(base_url: str) -> None:
    """Without ``follow_redirects`` the 302 itself comes back untouched."""
    with hooked() as client:
        response = client.get(f"{base_url}/moved")
    assert response.status_code == 302
    assert response.headers["location"] == "/overloaded"


def test_streamed_error_body(base_url: str) -> None:
    """With ``client.stream`` the hook reads the chunked error body itself, bounded."""
    with (
        hooked() as client,
        pytest.raises(UpstreamServerError) as caught,
        client.stream("GET", f"{base_url}/streamed"),
    ):
        pytest.fail("the hook should have raised")
    assert "database is on fire" in (caught.value.developer_message or "")


def test_streamed_error_body_async(base_url: str) -> None:
    """The async hook reads a chunked error body through ``aiter_raw``."""

    async def fetch() -> UpstreamError:
        async with tdk.http.install(httpx.AsyncClient(timeout=10)) as client:
            with pytest.raises(UpstreamServerError) as caught:
                async with client.stream("GET", f"{base_url}/streamed"):
                    pytest.fail("the hook should have raised")
        return caught.value

    assert "database is on fire" in (asyncio.run(fetch()).developer_message or "")


def test_gzip_bomb_stays_bounded(base_url: str) -> None:
    """50 MB of gzipped zeros costs the hook a bounded read, and still classifies."""
    seen: list[httpx.Response] = []
    with hooked(seen) as client:
        tracemalloc.start()
        try:
            with pytest.raises(UpstreamServerError) as caught:
                client.get(f"{base_url}/bomb")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert caught.value.status_code == 500
    assert seen[0].is_closed
    assert seen[0].num_bytes_downloaded <= tdk.http.DEFAULT_MAX_BODY_BYTES + NETWORK_CHUNK
    assert peak < 4 * 1024 * 1024  # a full read() would hold 50 MB


def test_large_body_read_is_bounded_by_the_option(base_url: str) -> None:
    """A 10 MB error body is read no further than ``max_body_bytes`` (plus one chunk)."""
    seen: list[httpx.Response] = []
    with (
        hooked(seen, max_body_bytes=1_024) as client,
        pytest.raises(UpstreamBadRequestError) as caught,
    ):
        client.get(f"{base_url}/big")
    assert seen[0].num_bytes_downloaded <= 1_024 + NETWORK_CHUNK
    assert "field 'q' is invalid" in caught.value.message  # a 400 quotes the upstream


def test_success_passes_untouched(base_url: str) -> None:
    """A 200 is not read by the hook: the caller reads it as usual."""
    with hooked() as client:
        assert client.get(f"{base_url}/ok").json() == {"items": [1, 2, 3]}
        with client.stream("GET", f"{base_url}/ok") as response:
            assert not response.is_stream_consumed
            assert b"".join(response.iter_bytes()) == b'{"items": [1, 2, 3]}'


def test_success_passes_untouched_async(base_url: str) -> None:
    """The async hook lets a streamed 200 through unread."""

    async def fetch() -> bytes:
        client = tdk.http.install(httpx.AsyncClient(timeout=10))
        async with client, client.stream("GET", f"{base_url}/ok") as response:
            assert not response.is_stream_consumed
            return await response.aread()

    assert asyncio.run(fetch()) == b'{"items": [1, 2, 3]}'


#: The budget the drip tests give the body read: two or three of the drip's bytes arrive.
BUDGET = 0.5


def test_a_dripping_body_is_read_for_max_body_seconds(base_url: str) -> None:
    """A body trickling in for 10 s is read for ``max_body_seconds`` only; what arrived is used."""
    seen: list[httpx.Response] = []
    with (
        hooked(seen, max_body_seconds=BUDGET) as client,
        pytest.raises(UpstreamBadRequestError) as caught,
    ):
        client.get(f"{base_url}/drip")
    arrived = seen[0].num_bytes_downloaded
    assert 0 < arrived < len(DRIP_BODY) // 4
    assert caught.value.status_code == 400
    assert caught.value.message.endswith(f'Upstream message: "{DRIP_BODY[:arrived].decode()}"')
    assert seen[0].is_closed


def test_a_dripping_body_is_read_for_max_body_seconds_async(base_url: str) -> None:
    """The async hook reads a trickling body under ``asyncio.timeout`` and uses what arrived."""
    seen: list[httpx.Response] = []

    async def fetch() -> UpstreamError:
        client = httpx.AsyncClient(timeout=10, event_hooks={"response": [_record(seen)]})
        async with tdk.http.install(client, max_body_seconds=BUDGET):
            with pytest.raises(UpstreamBadRequestError) as caught:
                await client.get(f"{base_url}/drip")
        return caught.value

    error = asyncio.run(fetch())
    arrived = seen[0].num_bytes_downloaded
    assert 0 < arrived < len(DRIP_BODY) // 4
    assert error.message.endswith(f'Upstream message: "{DRIP_BODY[:arrived].decode()}"')
    assert seen[0].is_closed


def _record(seen: list[httpx.Response]) -> Any:
    async def record(response: httpx.Response) -> None:
        seen.append(response)

    return record
