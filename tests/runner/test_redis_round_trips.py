"""``RedisStore`` round trips: one per admitted call, none for a quiet success.

A runner with a rate limit and a circuit breaker on a ``RedisStore`` asks the circuit for its
ticket and the limiter for its admission in one script (``ENTER``); a success in a closed
circuit without failures is not reported, nor is a neutral outcome (a call the limiter
refused, a bad argument) of such an attempt. The round trips are counted at the client, by a
connection class that counts what it sends (a pipeline or a command is one write, one round
trip), on a real ``redis-server``. ``ENTER`` answers as ``acquire`` then ``admit`` do, step by
step, against the in-memory store's default ``enter``; on a Redis Cluster (a real one-node
cluster) the two keys lie in different slots, and the store asks them one after the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from _redis_support import CLUSTER_PORT_MAX, RedisServer, command, free_port, running_redis
from _runner_support import in_loop

from tdk import CircuitBreaker, RateLimit, RetryPolicy, Toolkit, ToolRunner, tool
from tdk.errors import ErrorKind, ToolInputError, UpstreamServerError
from tdk.runner import CircuitState, InMemoryStore, RedisStore
from tdk.runner._breaker import FAILURE, NEUTRAL, SUCCESS

CLOSED, OPEN, HALF_OPEN = CircuitState.CLOSED, CircuitState.OPEN, CircuitState.HALF_OPEN


class CountingConnection(aioredis.Connection):
    """A connection that counts what it sends: each write is one round trip."""

    sent = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        await super().send_packed_command(command, check_health)


def counting_client(url: str) -> aioredis.Redis:
    """A ``redis.asyncio`` client whose connections count their round trips."""
    pool = aioredis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    return aioredis.Redis.from_pool(pool)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the module."""
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the module's server, empty."""
    redis_server.flush()
    return redis_server.url


# ------------------------------------------------------------------------------ the tools

STATE = {"failures": 0}


@pytest.fixture(autouse=True)
def _healthy() -> None:
    STATE["failures"] = 0


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up; fail with a 503 while failures are due, with bad input on 'bad'.

    Args:
        key: What to look up.
    """
    if key == "bad":
        raise ToolInputError("no such key")
    if STATE["failures"]:
        STATE["failures"] -= 1
        raise UpstreamServerError("the upstream is down", status_code=503)
    return key


TOOLKIT = Toolkit("round_trips", [lookup])
LIMIT = RateLimit(calls=1000, period=60.0)
BREAKER = CircuitBreaker(failure_threshold=5, reset_timeout=60.0)
NO_BACKOFF = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False)


def runner_on(store: RedisStore, **policies: Any) -> ToolRunner:
    return ToolRunner(TOOLKIT, store=store, **policies)


async def round_trips(runner: ToolRunner, calls: Iterable[tuple[str, int]]) -> list[int]:
    """The round trips of each call (``(key, failures due)``), after a warm-up (a failure,
    then a success that resets it) that loaded the scripts (the first use of each loads it:
    two round trips more, once per connection's server)."""
    for failures in (1, 0):
        STATE["failures"] = failures
        await runner.run("lookup", {"key": "warm-up"})
    counts = []
    for key, failures in calls:
        STATE["failures"] = failures
        before = CountingConnection.sent
        await runner.run("lookup", {"key": key})
        counts.append(CountingConnection.sent - before)
    return counts


@pytest.mark.parametrize(
    ("policies", "calls", "expected"),
    [
        pytest.param(
            {"rate_limit": LIMIT, "circuit_breaker": BREAKER},
            [("k", 0)] * 5,
            [1] * 5,
            id="limiter-and-breaker-success-one-each",
        ),
        pytest.param(
            {"circuit_breaker": BREAKER}, [("k", 0)] * 3, [1] * 3, id="breaker-success-one-each"
        ),
        pytest.param({"rate_limit": LIMIT}, [("k", 0)] * 3, [1] * 3, id="limiter-success-one-each"),
        pytest.param(
            {"rate_limit": LIMIT, "circuit_breaker": BREAKER},
            [("bad", 0)] * 3,
            [1] * 3,
            id="bad-input-is-neutral-and-not-reported",
        ),
        pytest.param(
            {"rate_limit": LIMIT, "circuit_breaker": BREAKER},
            [("k", 1), ("k", 0)],
            # enter, report the failure; then enter (1 failure seen) and report the reset
            [2, 2],
            id="a-failure-and-the-success-that-resets-it",
        ),
        pytest.param(
            {"rate_limit": LIMIT, "circuit_breaker": BREAKER, "retry": NO_BACKOFF},
            [("k", 1), ("k", 0)],
            # enter, report the failure, enter the retry, report its success (a reset)
            [4, 1],
            id="a-retry-enters-in-one-round-trip",
        ),
    ],
)
@in_loop
async def test_round_trips_per_call(
    redis_url: str, policies: dict[str, Any], calls: list[tuple[str, int]], expected: list[int]
) -> None:
    """Each call costs the round trips expected: one to enter (the limiter and the circuit
    together), none for a success or a neutral outcome in a closed circuit without failures."""
    async with contextlib.aclosing(RedisStore(counting_client(redis_url))) as store:
        runner = runner_on(store, **policies)
        assert await round_trips(runner, calls) == expected
        assert store.status == "shared"


@in_loop
async def test_a_call_the_limiter_refuses_costs_one_round_trip(redis_url: str) -> None:
    """A call refused by the shared limiter is answered ``TOOL_RUNTIME_RATE_LIMITED`` after
    one round trip: its ticket of a quiet circuit is handed back without one."""
    limit = RateLimit(calls=2, period=60.0)
    async with contextlib.aclosing(RedisStore(counting_client(redis_url))) as store:
        runner = runner_on(store, rate_limit=limit, circuit_breaker=BREAKER)
        assert (await runner.run("lookup", {"key": "a"})).is_success  # (the scripts loaded)
        before = CountingConnection.sent
        admitted = await runner.run("lookup", {"key": "b"})
        refused = await runner.run("lookup", {"key": "c"})
        assert admitted.is_success
        assert refused.error is not None
        assert refused.error.kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
        assert CountingConnection.sent - before == 2


@in_loop
async def test_an_open_circuit_refuses_without_touching_the_limiter(redis_url: str) -> None:
    """Once the shared circuit is open, a call is refused ``TOOL_RUNTIME_CIRCUIT_OPEN`` in one
    round trip, and the limiter's log keeps only the calls that ran."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    async with contextlib.aclosing(RedisStore(counting_client(redis_url))) as store:
        runner = runner_on(store, rate_limit=LIMIT, circuit_breaker=breaker)
        STATE["failures"] = 1
        failed = await runner.run("lookup", {"key": "a"})
        assert failed.error is not None
        assert failed.error.kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
        before = CountingConnection.sent
        refused = await runner.run("lookup", {"key": "b"})
        assert refused.error is not None
        assert refused.error.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
        assert refused.error.details["failure_count"] == 1
        assert 0 < refused.error.retry_after_ms <= 60_000
        assert CountingConnection.sent - before == 1
        log = store.key("tdk:rate_limit:lookup/1000/60.0")
        assert await store.client.zcard(log) == 1  # the failed call's only
        assert runner.stats().circuits["lookup"] is OPEN


# ------------------------------------------- ENTER answers as acquire, then admit, would


class FakeClock:
    """The in-memory side's clock: moved by the sequences' sleeps only."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


SHORT = (RateLimit(calls=2, period=0.3), CircuitBreaker(failure_threshold=1, reset_timeout=0.3))
#: Waits answered by the two stores may differ by the real time the operations take.
WAIT_TOLERANCE = 0.1

SEQUENCES: dict[str, list[tuple[Any, ...]]] = {
    "closed-admits-then-limits": [("enter",), ("enter",), ("enter",)],
    "open-circuit-leaves-the-log-alone": [
        ("record", 0, FAILURE),
        ("enter",),
        ("enter",),
        ("enter",),
        ("sleep", 0.35),
        ("enter",),  # a probe, admitted by the (empty) log
        ("record", 2, SUCCESS),
        ("enter",),
        ("enter",),
    ],
    "probe-refused-by-the-limiter-is-still-a-probe": [
        ("enter",),
        ("enter",),
        ("record", 0, FAILURE),
        ("sleep", 0.2),
        ("enter",),
        ("sleep", 0.15),
        ("enter",),  # the probe: the circuit gives it, the log is still full
        ("enter",),  # a second call while the probe is out: refused by the circuit
        ("record", 2, NEUTRAL),
        ("enter",),
    ],
}


async def step(store: InMemoryStore | RedisStore, op: tuple[Any, ...], clock: FakeClock) -> Any:
    """One operation of a sequence through ``store``, as the runner would ask it."""
    limit, breaker = SHORT
    name, *rest = op
    if name == "enter":
        return tuple(
            await store.enter(
                "tdk:circuit:seq",
                breaker,
                clock,
                None,
                limiter_key="tdk:rate_limit:seq",
                limit=limit,
            )
        )
    generation, outcome = rest
    return await store.record("tdk:circuit:seq", breaker, clock, generation, outcome)


def alike(python: Any, lua: Any) -> bool:
    """Equal answers; waits (floats) equal within ``WAIT_TOLERANCE`` and both zero or not."""
    if isinstance(python, tuple) and isinstance(lua, tuple):
        return len(python) == len(lua) and all(map(alike, python, lua))
    if isinstance(python, float) and isinstance(lua, float):
        return (python == 0) == (lua == 0) and abs(python - lua) <= WAIT_TOLERANCE
    return type(python) is type(lua) and python == lua


@pytest.mark.parametrize("ops", [pytest.param(ops, id=name) for name, ops in SEQUENCES.items()])
@in_loop
async def test_enter_answers_as_acquire_then_admit(
    redis_url: str, ops: list[tuple[Any, ...]]
) -> None:
    """The same sequence through ``InMemoryStore`` (the default ``enter``: ``acquire``, then
    ``admit`` when a ticket was given) and ``RedisStore`` (the ``ENTER`` script) gives the
    same answers, step by step."""
    clock = FakeClock()
    in_memory = InMemoryStore()
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        for number, op in enumerate(ops):
            if op[0] == "sleep":
                await asyncio.sleep(op[1])
                clock.now += op[1]
                continue
            python = await step(in_memory, op, clock)
            lua = await step(store, op, clock)
            assert alike(python, lua), (number, op, python, lua)
        assert store.status == "shared"


@pytest.fixture
def unused_url() -> str:
    """A ``redis://`` URL of a port of 127.0.0.1 nothing listens on."""
    return f"redis://127.0.0.1:{free_port()}/0"


@in_loop
async def test_enter_falls_back_in_process_during_an_outage(unused_url: str) -> None:
    """With Redis unreachable, ``enter`` applies both rules in this process: the limiter
    admits up to its limit, an open circuit refuses without touching the log."""
    limit = RateLimit(calls=1, period=60.0)
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    store = RedisStore(unused_url, timeout=0.2)
    clock = FakeClock()

    async def enter() -> tuple[Any, ...]:
        return tuple(
            await store.enter("tdk:circuit:x", breaker, clock, limiter_key="l", limit=limit)
        )

    first = await enter()
    assert first[0].ticket == 0
    assert first[1] == 0.0
    assert store.status == "fallback"
    assert (await enter())[1] == 60.0
    await store.record("tdk:circuit:x", breaker, clock, 0, FAILURE)
    refused = await enter()
    assert refused[0].ticket is None
    assert refused[1] is None


# ------------------------------------------------------------------------ a Redis Cluster


def test_a_cluster_node_gets_a_port_its_cluster_bus_can_follow(tmp_path: Path) -> None:
    """A Redis Cluster node's bus listens on its port + 10000, so its port must be 55535 at
    most: every cluster server the tests make gets one (the system's free ports go higher,
    and the cluster tests then failed now and then at start)."""
    ports = {RedisServer(tmp_path, extra=("--cluster-enabled", "yes")).port for _ in range(50)}

    assert max(ports) <= CLUSTER_PORT_MAX


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A one-node Redis Cluster holding every slot."""
    folder = tmp_path_factory.mktemp("cluster")
    server = RedisServer(
        folder,
        extra=("--cluster-enabled", "yes", "--cluster-config-file", str(folder / "nodes.conf")),
    )
    server.start()
    try:
        assert command(server.port, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").startswith(b"+OK")
        for _ in range(500):
            if b"cluster_state:ok" in command(server.port, "CLUSTER", "INFO"):
                break
            time.sleep(0.01)
        else:
            raise RuntimeError("the one-node cluster never came up")
        yield server
    finally:
        server.stop()


@in_loop
async def test_on_a_cluster_a_call_enters_in_two_round_trips(cluster: RedisServer) -> None:
    """On a Redis Cluster the limiter's and the circuit's keys lie in different slots (a
    script may only touch one): the store asks them one after the other, and stays shared."""
    client = aioredis.RedisCluster.from_url(f"redis://127.0.0.1:{cluster.port}")
    async with contextlib.aclosing(RedisStore(client)) as store:
        runner = runner_on(
            store, rate_limit=RateLimit(calls=2, period=60.0), circuit_breaker=BREAKER
        )
        results = [await runner.run("lookup", {"key": str(n)}) for n in range(3)]
        assert [r.is_success for r in results] == [True, True, False]
        assert results[2].error is not None
        assert results[2].error.kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
        assert store.status == "shared"
        log = store.key("tdk:rate_limit:lookup/2/60.0")
        assert await client.zcard(log) == 2


@in_loop
async def test_log_entries_name_their_exact_time(redis_url: str) -> None:
    """Each admission's entry in the limiter's log is named by its time in whole
    microseconds, exactly its score (Lua's own number-to-text keeps 14 digits of the 16 a
    time in microseconds has: the script formats them whole, as it does the bound of the
    entries later than now it looks for)."""
    limit = RateLimit(calls=5, period=60.0)
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        runner = runner_on(store, rate_limit=limit, circuit_breaker=BREAKER)
        for _ in range(3):
            assert (await runner.run("lookup", {"key": "k"})).is_success
        log = store.key("tdk:rate_limit:lookup/5/60.0")
        entries = await store.client.zrange(log, 0, -1, withscores=True)
    assert len(entries) == 3
    for member, score in entries:
        assert member.decode().split(":")[0] == str(int(score))
