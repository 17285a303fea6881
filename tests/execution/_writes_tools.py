"""Tools that write, read or put over HTTP, for tests/execution/test_writes_everywhere.py:
imported there, and loaded by ``tdk run`` in a subprocess. Each takes the URL it calls (a
server of ``_http_server.Writes``, or a port that refuses connections).
"""

from __future__ import annotations

import contextlib
import time
from typing import Annotated

import httpx

import tdk.http
from tdk import tool
from tdk.errors import RetryableToolError

#: The client's read timeout: the answer to ``/lost`` (and to a GET) comes long after it.
READ_TIMEOUT = httpx.Timeout(30.0, read=0.2)
#: How an answer that never came shows: a read timeout, or a connection closed unanswered.
LOST = (httpx.ReadTimeout, httpx.RemoteProtocolError)

Url = Annotated[str, "The URL to call."]


def _client() -> httpx.AsyncClient:
    return tdk.http.install(httpx.AsyncClient(timeout=READ_TIMEOUT))


@tool
async def create_issue(url: Url) -> str:
    """Create an issue (a write), through a client tdk is installed on."""
    async with _client() as client:
        return (await client.post(url, json={"title": "a"})).text


@tool
async def create_issue_plain(url: Url) -> str:
    """Create an issue (a write), through a plain httpx client: nothing notes its requests."""
    async with httpx.AsyncClient(timeout=READ_TIMEOUT) as client:
        return (await client.post(url, json={"title": "a"})).raise_for_status().text


@tool
def create_issue_sync(url: Url) -> str:
    """Create an issue (a write), from a sync tool in a worker thread."""
    with tdk.http.install(httpx.Client(timeout=READ_TIMEOUT)) as client:
        return client.post(url, json={"title": "a"}).text


@tool
async def create_then_notify(url: Url, notify: Url) -> str:
    """Create an issue (its answer may be lost), then notify another service."""
    async with _client() as client:
        with contextlib.suppress(*LOST):  # the answer is lost; the issue may exist
            await client.post(url, json={"title": "a"})
        return (await client.post(notify, json={"title": "a"})).text


@tool
async def create_through_another(url: Url, notify: Url) -> str:
    """Create an issue through another tool (whose answer may be lost), then notify."""
    await create_issue.run({"url": url})  # a failed result, read and let go
    async with _client() as client:
        return (await client.post(notify, json={"title": "a"})).text


@tool(timeout=0.2)
async def create_slowly(url: Url) -> str:
    """Create an issue, past the tool's own time limit (the client would wait 30 s)."""
    async with tdk.http.install(httpx.AsyncClient(timeout=30.0)) as client:
        return (await client.post(url, json={"title": "a"})).text


@tool(timeout=0.2)
def create_slowly_sync(url: Url) -> str:
    """Create an issue from a worker thread, past the tool's own time limit."""
    with tdk.http.install(httpx.Client(timeout=30.0)) as client:
        return client.post(url, json={"title": "a"}).text


@tool
async def create_or_ask(url: Url) -> str:
    """Refuse the arguments: the model is asked to try again with others."""
    raise RetryableToolError("Give the title in English.")


@tool(read_only=True)
async def find_issues(url: Url) -> str:
    """Find issues (a read)."""
    async with _client() as client:
        return (await client.get(url)).text


@tool(read_only=True, timeout=0.2)
def find_issues_slowly(url: Url) -> str:
    """Find issues, past the tool's own time limit."""
    time.sleep(0.4)
    return url


@tool(idempotent=True)
async def put_issue(url: Url) -> str:
    """Put an issue (idempotent: the same again changes nothing more)."""
    async with _client() as client:
        return (await client.put(url, json={"title": "a"})).text
