"""``RedisStore`` against what a busy, flaky or tampered Redis does, on a real redis-server:
bursts larger than the connection pool, connections killed under it, state planted with
future times or nonsense fields, keys of the wrong type (that key's problem, not an outage),
errors of the whole server (outages), a server paused under calls with deadlines, equal
limits written differently, keys that cannot be sent as they are, and a store used from one
event loop after another."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from _redis_support import RedisServer, command, free_port, running_redis
from _runner_support import in_loop

from tdk import CircuitBreaker, RateLimit, RetryPolicy, ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import ErrorKind, UpstreamServerError
from tdk.runner import RedisStore

BODIES: list[float] = []
#: The port of the server a tool pauses (``pausing``).
PAUSED = {"port": 0, "calls": 0}


@tool(read_only=True)
async def work() -> str:
    """Count a body that ran."""
    BODIES.append(time.monotonic())
    await asyncio.sleep(0.01)
    return "done"


@tool(read_only=True)
async def broken() -> str:
    """Fail as an upstream that is down."""
    raise UpstreamServerError("down", status_code=503)


@tool(read_only=True)
async def pausing() -> str:
    """The first call pauses the server's writes (Redis freezes under the call) and fails as
    an upstream that is down; the next one succeeds."""
    PAUSED["calls"] += 1
    if PAUSED["calls"] == 1:
        pause(PAUSED["port"])
        raise UpstreamServerError("down", status_code=503)
    return "done"


TOOLKIT = Toolkit("hostile_redis", [work, broken, pausing])
#: How long the tests pause a server (milliseconds): past any store timeout they use.
PAUSE_MS = 20_000


def pause(port: int) -> None:
    """Hold every write (and every script) of the server on ``port`` until :func:`unpause`."""
    assert command(port, "CLIENT", "PAUSE", str(PAUSE_MS), "WRITE") == b"+OK\r\n"


def unpause(port: int) -> None:
    """Let the server on ``port`` run writes again."""
    assert command(port, "CLIENT", "UNPAUSE") == b"+OK\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the module."""
    with running_redis(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
def url(server: RedisServer) -> str:
    """The server's URL, running and empty; the body log cleared."""
    server.start()
    server.flush()
    BODIES.clear()
    return server.url


def outages(caplog: pytest.LogCaptureFixture) -> int:
    return sum(
        r.name == "tdk.runner" and r.getMessage().startswith("Redis failed") for r in caplog.records
    )


def replacements(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNINGs of keys replaced, as logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tdk.runner"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("Redis key ")
    ]


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every WARNING (or worse) the runner logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tdk.runner" and r.levelno >= logging.WARNING
    ]


@in_loop
async def test_a_burst_larger_than_the_pool_is_no_outage(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """150 concurrent calls (the pool holds 50 connections) wait for a connection: the
    quota holds, and no outage is declared."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(url, timeout=2.0)
    try:
        runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=5, period=30.0), store=store)
        results = await asyncio.gather(*(runner.run("work") for _ in range(150)))
    finally:
        await store.aclose()
    assert sum(r.is_success for r in results) == 5
    assert len(BODIES) == 5
    assert outages(caplog) == 0


@in_loop
async def test_killed_connections_are_tried_again_not_an_outage(
    url: str, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection closed under the store (a proxy's idle timeout, CLIENT KILL) is tried
    again on a fresh one: no outage, no fresh per-process quota."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(url)
    try:
        runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=3, period=60.0), store=store)
        answers = []
        for _ in range(10):
            command(server.port, "CLIENT", "KILL", "TYPE", "normal")
            answers.append((await runner.run("work")).is_success)
    finally:
        await store.aclose()
    assert answers.count(True) == 3
    assert outages(caplog) == 0
    assert runner.stats().store == "shared"


@in_loop
async def test_future_entries_count_as_now(url: str) -> None:
    """Admission times planted in the future (a failover to a replica whose clock is
    behind) count as made now: the wait is at most the period, and the window frees."""
    store = RedisStore(url)
    client = aioredis.Redis.from_url(url)
    try:
        key = store.key("tdk:rate_limit:work/1/0.3")
        far = (time.time() + 3600) * 1_000_000
        await client.zadd(key, {"planted": far})
        runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=0.3), store=store)
        refused = await runner.run("work")
        assert refused.kind == "TOOL_RUNTIME_RATE_LIMITED"
        assert 0 < (refused.retry_after_ms or 0) <= 300
        assert 0 < await client.pttl(key) <= 1300  # a refusal renews the time to live
        await asyncio.sleep(0.35)
        assert (await runner.run("work")).is_success
    finally:
        await client.aclose()
        await store.aclose()


@pytest.mark.parametrize(
    ("fields", "admitted"),
    [
        pytest.param({"state": "closed", "generation": "-1"}, True, id="negative-generation"),
        pytest.param({"state": "closed", "generation": "nan"}, True, id="nan-generation"),
        pytest.param({"state": "closed", "generation": "1e300"}, True, id="huge-generation"),
        pytest.param({"state": "closed", "failures": "nan"}, True, id="nan-failures"),
        pytest.param({"state": "weird", "probes": "inf"}, True, id="unknown-state"),
        pytest.param(
            {"state": "open", "opened_at": str((time.time() + 3600) * 1e6)},
            False,
            id="opened-in-the-future",
        ),
    ],
)
@in_loop
async def test_tampered_circuits_are_read_as_sane_ones(
    url: str, fields: dict[str, str], admitted: bool
) -> None:
    """Nonsense in a circuit's hash reads as zero; an opening in the future counts from now
    (so it half-opens after one reset timeout, not in an hour)."""
    store = RedisStore(url)
    client = aioredis.Redis.from_url(url)
    try:
        await client.hset(store.key("tdk:circuit:work"), mapping=fields)
        breaker = CircuitBreaker(failure_threshold=2, reset_timeout=0.3)
        runner = ToolRunner(TOOLKIT, circuit_breaker=breaker, store=store)
        assert (await runner.run("work")).is_success is admitted
        if not admitted:
            await asyncio.sleep(0.35)
            assert (await runner.run("work")).is_success  # the probe
    finally:
        await client.aclose()
        await store.aclose()


@in_loop
async def test_equal_limits_written_differently_share_a_quota(url: str) -> None:
    """``period=10`` and ``period=10.0`` are one limit: one key, one quota."""
    stores = [RedisStore(url), RedisStore(url)]
    try:
        runners = [
            ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=2, period=period), store=store)
            for period, store in zip((10, 10.0), stores, strict=True)
        ]
        results = [await runners[n % 2].run("work") for n in range(4)]
    finally:
        for store in stores:
            await store.aclose()
    assert [r.is_success for r in results] == [True, True, False, False]


@in_loop
async def test_a_user_id_that_is_not_utf8_is_keyed_not_refused(url: str) -> None:
    """A user id holding a lone surrogate (read with surrogateescape) has state of its own
    on Redis; the call never fails for it."""
    store = RedisStore(url)
    try:
        limit = RateLimit(calls=1, period=30.0, scope="per-user:{user_id}")
        runner = ToolRunner(TOOLKIT, rate_limit=limit, store=store)
        odd, plain = ToolContext(user_id="caf\udce9"), ToolContext(user_id="cafe")
        assert (await runner.run("work", context=odd)).is_success
        assert (await runner.run("work", context=plain)).is_success
        assert (await runner.run("work", context=odd)).kind == "TOOL_RUNTIME_RATE_LIMITED"
        assert runner.stats().store == "shared"
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "prefix", [pytest.param("caf\udce9", id="surrogate"), pytest.param("a\nb", id="newline")]
)
def test_a_prefix_that_cannot_be_sent_is_refused(prefix: str) -> None:
    """A prefix Redis could not be sent (or that breaks a log line) is refused at once."""
    with pytest.raises(ValueError, match="prefix must be printable UTF-8 text"):
        RedisStore("redis://127.0.0.1:1/0", prefix=prefix)


def connected_clients(port: int) -> int:
    """How many clients the server on ``port`` has, counting the one asking."""
    return command(port, "CLIENT", "LIST").count(b"id=")


def test_a_store_made_from_a_url_serves_one_loop_after_another(
    url: str, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``asyncio.run()`` per request with one store: every call of every loop is counted on
    Redis, nothing falls back and nothing is logged; the connections of each loop are closed
    when ``asyncio.run()`` ends it."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(url)
    runner = ToolRunner(
        TOOLKIT, rate_limit=RateLimit(calls=100, period=60.0, scope="loops"), store=store
    )
    key = store.key("tdk:rate_limit:scope:loops/100/60.0")

    async def request() -> tuple[list[bool], str]:
        results = await asyncio.gather(*(runner.run("work") for _ in range(3)))
        return [result.is_success for result in results], store.status

    for _ in range(5):
        assert asyncio.run(request()) == ([True] * 3, "shared")
        for _ in range(200):  # (the server notices closed connections in its own time)
            if connected_clients(server.port) == 1:
                break
            time.sleep(0.01)
        assert connected_clients(server.port) == 1  # only the one asking
    assert command(server.port, "ZCARD", key) == b":15\r\n"
    assert not warnings_logged(caplog)


def test_a_client_given_and_used_from_another_event_loop_falls_back(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client given to the store is used as it is: its connections belong to the loop
    that has ended, and calls from the next loop never raise (per-process state; one
    WARNING)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(aioredis.Redis.from_url(url))
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=50, period=1.0), store=store)

    async def burst(runner: ToolRunner) -> list[bool]:
        calls = (runner.run("work") for _ in range(5))
        return [result.is_success for result in await asyncio.gather(*calls)]

    assert asyncio.run(burst(runner)) == [True] * 5
    assert asyncio.run(burst(runner)) == [True] * 5
    assert outages(caplog) == 1
    # The connections of the first loop cannot be closed from another: let them go quietly.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del runner, store
        gc.collect()


def test_a_store_closed_in_one_loop_serves_the_next(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Closed at the end of one loop (as it should be), the store serves the next one."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(url)
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=3, period=30.0), store=store)

    async def two_calls() -> list[bool]:
        try:
            return [(await runner.run("work")).is_success for _ in range(2)]
        finally:
            await store.aclose()

    assert asyncio.run(two_calls()) + asyncio.run(two_calls()) == [True, True, True, False]
    assert outages(caplog) == 0


# ------------------------------------------------------- a key of the wrong type: that key's


def planted(
    *command_args: str,
) -> Callable[[int, str], None]:
    """A planting: ``command_args`` sent for a key (``{key}``) of the server on a port."""

    def plant(port: int, key: str) -> None:
        reply = command(port, *(arg.replace("{key}", key) for arg in command_args))
        assert not reply.startswith(b"-"), reply

    return plant


def overfull(port: int, key: str) -> None:
    """A log with more entries than its limit (2) allows, all in the window."""
    now = str(int(time.time() * 1_000_000))
    planted("ZADD", "{key}", now, "a", now, "b", now, "c")(port, key)


LIMITER_KEY = "tdk:rate_limit:work/2/30.0"
CIRCUIT_KEY = "tdk:circuit:work"
BAD_KEYS = {
    "limiter-string": (LIMITER_KEY, planted("SET", "{key}", "junk"), "string"),
    "limiter-list": (LIMITER_KEY, planted("RPUSH", "{key}", "a", "b"), "list"),
    "limiter-hash": (LIMITER_KEY, planted("HSET", "{key}", "a", "b"), "hash"),
    "limiter-longer-than-its-limit": (LIMITER_KEY, overfull, "zset longer than its limit"),
    "circuit-string": (CIRCUIT_KEY, planted("SET", "{key}", "open"), "string"),
    "circuit-zset": (CIRCUIT_KEY, planted("ZADD", "{key}", "1", "open"), "zset"),
    "circuit-list": (CIRCUIT_KEY, planted("RPUSH", "{key}", "open"), "list"),
}


@pytest.mark.parametrize(
    ("state_key", "plant", "held"),
    [pytest.param(*case, id=name) for name, case in BAD_KEYS.items()],
)
@in_loop
async def test_a_key_of_the_wrong_type_is_replaced_not_an_outage(
    url: str,
    server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    state_key: str,
    plant: Callable[[int, str], None],
    held: str,
) -> None:
    """A key holding something else than its state is replaced by the script, atomically:
    the limit stays shared on Redis, nothing falls back, and one WARNING names the key, once
    however often it is planted again."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(url)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=2, period=30.0),
            circuit_breaker=CircuitBreaker(failure_threshold=2),
            store=store,
        )
        redis_key = store.key(state_key)
        for _ in range(2):  # planted, then planted again
            await store.client.delete(store.key(LIMITER_KEY))
            plant(server.port, redis_key)
            results = [await runner.run("work") for _ in range(3)]
            assert [r.kind for r in results] == [None, None, ErrorKind.TOOL_RUNTIME_RATE_LIMITED]
            assert await store.client.zcard(store.key(LIMITER_KEY)) == 2  # shared, on Redis
            assert await store.client.type(redis_key) in {b"zset", b"hash", b"none"}
            assert store.status == "shared"
        assert outages(caplog) == 0
        assert replacements(caplog) == [
            f"Redis key {redis_key} held no state of this store ({held}): replaced; the other "
            "keys stay shared"
        ]


def increment(state: int | None, by: int) -> tuple[int, int]:
    """A custom change: add ``by`` to a counter."""
    total = (state or 0) + by
    return total, total


@pytest.mark.parametrize(
    ("plant", "held"),
    [
        pytest.param(planted("HSET", "{key}", "a", "b"), "another type", id="hash"),
        pytest.param(planted("RPUSH", "{key}", "a"), "another type", id="list"),
        pytest.param(planted("SET", "{key}", "{not json"), "text, not JSON", id="not-json"),
        pytest.param(planted("SET", "{key}", "[" * 100_000), "text, not JSON", id="too-deep"),
    ],
)
@in_loop
async def test_a_custom_key_without_json_state_is_written_afresh(
    url: str,
    server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    plant: Callable[[int, str], None],
    held: str,
) -> None:
    """A custom change's key that holds no JSON state reads as no state and is written
    afresh (one WARNING): no outage, no exception."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(url)) as store:
        redis_key = store.key("jobs:1")
        plant(server.port, redis_key)
        assert await store.update("jobs:1", increment, 1) == 1
        assert await store.update("jobs:1", increment, 1) == 2
        assert await store.client.get(redis_key) == b"2"
        assert store.status == "shared"
        assert outages(caplog) == 0
        assert replacements(caplog) == [
            f"Redis key {redis_key} held no state of this store ({held}): replaced; the other "
            "keys stay shared"
        ]


# ------------------------------------------------------- errors of the whole server: outages


@contextlib.contextmanager
def read_only(port: int) -> Iterator[None]:
    """The server a replica (of a master that is not there): writes are refused."""
    assert command(port, "REPLICAOF", "127.0.0.1", str(free_port())) == b"+OK\r\n"
    try:
        yield
    finally:
        command(port, "REPLICAOF", "NO", "ONE")


@contextlib.contextmanager
def out_of_memory(port: int) -> Iterator[None]:
    """The server past its ``maxmemory`` (of one byte): writes that add are refused."""
    assert command(port, "CONFIG", "SET", "maxmemory", "1") == b"+OK\r\n"
    try:
        yield
    finally:
        command(port, "CONFIG", "SET", "maxmemory", "0")


@contextlib.contextmanager
def busy(port: int) -> Iterator[None]:
    """The server busy running a script that never ends: other commands get BUSY."""
    assert command(port, "CONFIG", "SET", "busy-reply-threshold", "20") == b"+OK\r\n"
    endless = threading.Thread(
        target=command, args=(port, "EVAL", "while true do end", "0"), kwargs={"timeout": 30}
    )
    endless.start()
    try:
        for _ in range(500):  # until the script runs (its client waits for it)
            if answers_busy(port):
                break
            time.sleep(0.01)
        yield
    finally:
        for _ in range(500):
            if command(port, "SCRIPT", "KILL").startswith(b"+OK"):
                break
            time.sleep(0.01)
        endless.join(30)
        command(port, "CONFIG", "SET", "busy-reply-threshold", "5000")


def answers_busy(port: int) -> bool:
    """Whether the server on ``port`` answers BUSY."""
    return command(port, "PING").startswith(b"-BUSY")


@pytest.mark.parametrize(
    ("trouble", "tool_name", "error"),
    [
        pytest.param(read_only, "work", "ReadOnlyError", id="read-only-replica"),
        pytest.param(out_of_memory, "broken", "OutOfMemoryError", id="out-of-memory"),
        pytest.param(busy, "work", "ResponseError: BUSY", id="busy-with-a-script"),
    ],
)
@in_loop
async def test_errors_of_the_whole_server_are_an_outage(
    url: str,
    server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    trouble: Callable[[int], contextlib.AbstractContextManager[None]],
    tool_name: str,
    error: str,
) -> None:
    """A server that refuses every write (a read-only replica, out of memory, busy with a
    script) is an outage, not a bad key: the call goes on in process, one WARNING."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(url, timeout=2.0)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=5, period=30.0),
            circuit_breaker=CircuitBreaker(failure_threshold=5),
            store=store,
        )
        await store.client.ping()  # (connected before the trouble)
        with trouble(server.port):
            result = await runner.run(tool_name)
        assert result.attempts == 1
        assert result.is_success is (tool_name == "work")
        assert store.status == "fallback"
        assert outages(caplog) == 1
        assert f"Redis failed ({error}" in warnings_logged(caplog)[0]
        assert not replacements(caplog)


# ------------------------------------------------- a paused server and the call's deadline


@pytest.mark.parametrize(
    "policies",
    [
        pytest.param({"circuit_breaker": CircuitBreaker(failure_threshold=2)}, id="breaker"),
        pytest.param(
            {
                "circuit_breaker": CircuitBreaker(failure_threshold=2),
                "rate_limit": RateLimit(calls=5, period=30.0),
            },
            id="breaker-and-limiter",
        ),
    ],
)
@in_loop
async def test_a_paused_redis_does_not_keep_a_call_from_running_within_its_deadline(
    url: str, server: RedisServer, caplog: pytest.LogCaptureFixture, policies: dict[str, Any]
) -> None:
    """Redis paused, a deadline far shorter than the store's timeout: the store waits at most
    half of what the deadline leaves, and the tool runs (on per-process state) and succeeds.
    That is the call's own business: no outage."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(url, timeout=10.0)) as store:
        runner = ToolRunner(TOOLKIT, deadline=0.5, store=store, **policies)
        await store.client.ping()
        pause(server.port)
        try:
            result = await runner.run("work")
        finally:
            unpause(server.port)
        assert result.is_success, result.error
        assert result.attempts == 1
        assert len(BODIES) == 1
        assert store.status == "shared"
        assert not warnings_logged(caplog)


@in_loop
async def test_a_redis_paused_during_a_call_leaves_its_retry_the_deadline(
    url: str, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The first attempt pauses Redis and fails: the report of that failure waits at most
    half of what the deadline leaves, and the retry still runs and succeeds."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    PAUSED.update(port=server.port, calls=0)
    async with contextlib.aclosing(RedisStore(url, timeout=10.0)) as store:
        runner = ToolRunner(
            TOOLKIT,
            deadline=1.0,
            retry=RetryPolicy(max_attempts=2, initial_delay=0.01, jitter=False),
            circuit_breaker=CircuitBreaker(failure_threshold=5),
            store=store,
        )
        await store.client.ping()
        try:
            result = await runner.run("pausing")
        finally:
            unpause(server.port)
        assert result.is_success, result.error
        assert result.attempts == 2
        assert store.status == "shared"
        assert not warnings_logged(caplog)


def test_the_support_module_is_real(tmp_path: Path) -> None:
    """(The servers these tests use are real: a second one answers PING on its own port.)"""
    with running_redis(tmp_path) as second:
        assert command(second.port, "PING") == b"+PONG\r\n"
