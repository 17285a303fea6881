"""The tool list follows the circuits: ``tools/list`` leaves out a tool whose circuit is open
(in the toolkit's order), and the SDK's client is told when the list changes: a 2025-era
client by ``notifications/tools/list_changed``, a 2026-07-28 one on its
``subscriptions/listen`` stream. In process, over streamable HTTP, and across two servers
("replicas") sharing a ``RedisStore`` on a real ``redis-server``.

Changes are waited for as events (bounded by a hang guard), never timed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import mcp
import pytest
from _mcp_live import connected, serving
from _mcp_support import run
from _redis_support import RedisServer, free_port, running_redis
from mcp import types
from mcp.client.subscriptions import ToolsListChanged

from tdk import CircuitBreaker, Toolkit, ToolRunner, tool
from tdk.errors import UpstreamServerError
from tdk.hosts import mcp as tdk_mcp
from tdk.runner import InMemoryStore, RedisStore

#: Bound of one wait for a change (it comes at once, or after a reset timeout of 0.5 s).
CHANGE_TIMEOUT = 30.0
MODES = ["auto", "legacy"]
ALL = ["first", "flaky", "last"]
WITHOUT = ["first", "last"]


class Upstream:
    """An upstream that is down or up; ``flaky`` fails with its 503 while it is down."""

    def __init__(self) -> None:
        self.down = True


UPSTREAM = Upstream()


@tool(read_only=True)
def first() -> str:
    """The first tool."""
    return "first"


@tool(read_only=True)
def flaky() -> str:
    """Ask an upstream that may be down."""
    if UPSTREAM.down:
        raise UpstreamServerError("down", status_code=503)
    return "up"


@tool(read_only=True)
def last() -> str:
    """The last tool."""
    return "last"


def breaker() -> CircuitBreaker:
    """A circuit that opens on one failure and tries again after half a second."""
    return CircuitBreaker(failure_threshold=1, reset_timeout=0.5)


@pytest.fixture(autouse=True)
def upstream_down() -> Iterator[None]:
    """Each test starts with the upstream down."""
    UPSTREAM.down = True
    yield
    UPSTREAM.down = True


class Changes:
    """What a client hears of list changes, in either era: a 2025-era client's notifications
    (through its message handler), or a 2026 client's listen stream, read in a task."""

    def __init__(self) -> None:
        self.heard = asyncio.Event()
        self.count = 0
        self.listening = False

    async def message_handler(self, message: Any) -> None:
        """The 2025-era client's message handler (a 2026 client's sees the frames of its
        listen stream too: those are counted from the stream)."""
        if isinstance(message, types.ToolListChangedNotification) and not self.listening:
            self.told()

    def told(self) -> None:
        self.count += 1
        self.heard.set()

    async def next(self) -> None:
        """Wait for the next change (failing the test after ``CHANGE_TIMEOUT``)."""
        await asyncio.wait_for(self.heard.wait(), CHANGE_TIMEOUT)
        self.heard.clear()

    @contextlib.asynccontextmanager
    async def following(self, client: mcp.Client) -> AsyncIterator[None]:
        """Follow ``client``'s changes: on a 2026-07-28 connection, through a listen stream
        read in a task; on a 2025 one the message handler already does."""
        if client.protocol_version == "2026-07-28":
            self.listening = True
            async with client.listen(tools_list_changed=True) as subscription:
                task = asyncio.create_task(self._read(subscription))
                try:
                    yield
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        else:
            yield

    async def _read(self, subscription: Any) -> None:
        async for event in subscription:
            if isinstance(event, ToolsListChanged):
                self.told()


async def names(client: mcp.Client) -> list[str]:
    """The names ``tools/list`` answers, in its order."""
    return [each.name for each in (await client.list_tools()).tools]


async def open_then_closed(caller: mcp.Client, watcher: mcp.Client, changes: Changes) -> list[Any]:
    """Open ``flaky``'s circuit through ``caller``, let the upstream recover, and close it
    again; what ``watcher`` lists and hears at each step."""
    seen: list[Any] = [await names(watcher)]
    failed = await caller.call_tool("flaky", {})
    seen.append(failed.is_error)
    await changes.next()  # the circuit opened
    seen.append(await names(watcher))
    UPSTREAM.down = False
    await changes.next()  # its reset timeout passed: offered again, for a probe
    seen.append(await names(watcher))
    seen.append((await caller.call_tool("flaky", {})).structured_content)
    seen.append(await names(watcher))
    return seen


EXPECTED = [ALL, True, WITHOUT, ALL, {"result": "up"}, ALL]


@pytest.mark.parametrize("mode", MODES)
def test_in_process_the_list_follows_the_circuit(mode: str) -> None:
    """A circuit that opens takes its tool off the list (the others keep their order) and
    the client is told; once it may be tried again the tool is back and the client is told
    again. The capability says the list changes."""
    toolkit = Toolkit("changes", [first, flaky, last])
    server = tdk_mcp.server(toolkit, runner=ToolRunner(toolkit, circuit_breaker=breaker()))
    changes = Changes()

    async def scenario() -> tuple[list[Any], Any]:
        async with mcp.Client(server, mode=mode, message_handler=changes.message_handler) as client:  # type: ignore[arg-type]
            async with changes.following(client):
                seen = await open_then_closed(client, client, changes)
            return seen, client.server_capabilities.tools

    seen, capability = run(scenario())
    assert seen == EXPECTED
    assert capability is not None
    assert capability.list_changed is True
    assert changes.count == 2


@pytest.mark.parametrize("mode", MODES)
def test_over_http_the_list_follows_the_circuit(mode: str) -> None:
    """The same over streamable HTTP: a 2025-era session is told on its GET stream, a 2026
    client on its listen stream."""
    toolkit = Toolkit("changes", [first, flaky, last])
    server = tdk_mcp.server(toolkit, runner=ToolRunner(toolkit, circuit_breaker=breaker()))
    changes = Changes()

    async def scenario() -> list[Any]:
        async with (
            serving(server) as url,
            connected(url, mode=mode, message_handler=changes.message_handler) as client,
            changes.following(client),
        ):
            return await open_then_closed(client, client, changes)

    assert run(scenario()) == EXPECTED
    assert changes.count == 2


def test_a_server_without_circuits_offers_every_tool() -> None:
    """Without circuit breakers the list is the toolkit, in its order, and never changes."""
    toolkit = Toolkit("plain", [last, first, flaky])
    server = tdk_mcp.server(toolkit)

    async def scenario() -> tuple[list[str], list[str]]:
        async with mcp.Client(server) as client:
            before = await names(client)
            await client.call_tool("flaky", {})
            return before, await names(client)

    assert run(scenario()) == (["last", "first", "flaky"], ["last", "first", "flaky"])


# -- replicas sharing a RedisStore ------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real ``redis-server`` on a free port."""
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


def replica(url: str, prefix: str) -> Any:
    """One replica: a server whose runner keeps its circuits in a ``RedisStore`` of its own
    (the processes share nothing but Redis)."""
    toolkit = Toolkit("replicated", [first, flaky, last])
    store = RedisStore(url, prefix=prefix)
    return tdk_mcp.server(
        toolkit, runner=ToolRunner(toolkit, circuit_breaker=breaker(), store=store)
    )


@pytest.mark.parametrize("mode", MODES)
def test_every_replica_learns_through_redis(
    redis_server: RedisServer, mode: str, request: pytest.FixtureRequest
) -> None:
    """A call through one replica opens the circuit: a client of the other replica (over
    HTTP) is told, and both list the same tools; when the circuit may be tried again, and
    when a call through the first closes it, the other follows."""
    prefix = f"changes-{request.node.callspec.id}"
    one, other = replica(redis_server.url, prefix), replica(redis_server.url, prefix)
    changes = Changes()

    async def scenario() -> tuple[list[Any], list[str]]:
        async with (
            serving(other) as url,
            connected(url, mode=mode, message_handler=changes.message_handler) as watcher,
            changes.following(watcher),
            mcp.Client(one) as caller,
        ):
            seen = await open_then_closed(caller, watcher, changes)
            return seen, await names(caller)

    seen, on_the_first = run(scenario())
    assert seen == EXPECTED
    assert on_the_first == ALL


def test_redis_out_of_reach_costs_no_call() -> None:
    """A replica whose ``RedisStore`` cannot reach Redis serves its list and its calls as
    ever (its news are not heard; its circuits are per process meanwhile)."""
    server = replica(f"redis://127.0.0.1:{free_port()}/0", "nowhere")

    async def scenario() -> tuple[list[str], Any]:
        async with mcp.Client(server) as client:
            return await names(client), (await client.call_tool("first", {})).structured_content

    assert run(scenario()) == (ALL, {"result": "first"})


class FailingStore(InMemoryStore):
    """A state store whose every operation fails."""

    async def update(self, key: str, change: Any, *args: Any) -> Any:
        raise ConnectionError("the store is down")


def test_a_failing_store_lists_every_tool() -> None:
    """A store that fails when the circuits are read costs ``tools/list`` nothing: every tool
    is listed, in order (a call of a tool with a circuit is that call's failure)."""
    toolkit = Toolkit("failing", [first, flaky, last])
    runner = ToolRunner(toolkit, circuit_breaker=breaker(), store=FailingStore())
    server = tdk_mcp.server(toolkit, runner=runner)

    async def scenario() -> tuple[list[str], Any]:
        async with mcp.Client(server) as client:
            return await names(client), (await client.call_tool("first", {})).is_error

    assert run(scenario()) == (ALL, True)
