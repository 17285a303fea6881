"""``RedisStore`` when Redis fails, on a real redis-server: the per-process fallback during an
outage (one WARNING, ``stats().store``) and the way back, errors of the whole server (a
read-only replica, out of memory, busy with a script), a server paused under calls with
deadlines; and what is no outage: bursts larger than the connection pool, connections killed
under the store, scripts flushed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from _redis_support import RedisServer, command, free_port
from _redis_tools import (
    BODIES,
    PAUSED,
    TOOLKIT,
    UPSTREAM,
    WORK_TOOLKIT,
    increment,
    outage_warnings,
    outages,
    pause,
    replacements,
    unpause,
    warnings_logged,
)
from _runner_support import in_loop

import tdk
from tdk import CircuitBreaker, RateLimit, RetryPolicy, ToolRunner
from tdk.errors import ErrorKind
from tdk.runner import RedisStore
from tdk.runner._redis_scripts import ADMIT

ANSWERS_AGAIN = "Redis answers again: runner state is shared again"
ADMIT_SHA = hashlib.sha1(ADMIT.encode()).hexdigest()


def returns(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The INFO records of Redis answering again."""
    return [
        r
        for r in caplog.records
        if r.name == "tdk.runner" and r.levelno == logging.INFO and r.getMessage() == ANSWERS_AGAIN
    ]


# ------------------------------------------------------------------------- what is no outage


@in_loop
async def test_a_burst_larger_than_the_pool_is_no_outage(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """150 concurrent calls (the pool holds 50 connections) wait for a connection: the
    quota holds, and no outage is declared."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(redis_url, timeout=2.0)
    try:
        runner = ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=5, period=30.0), store=store)
        results = await asyncio.gather(*(runner.run("work") for _ in range(150)))
    finally:
        await store.aclose()
    assert sum(r.is_success for r in results) == 5
    assert len(BODIES) == 5
    assert outages(caplog) == 0


@in_loop
async def test_killed_connections_are_tried_again_not_an_outage(
    redis_url: str, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection closed under the store (a proxy's idle timeout, CLIENT KILL) is tried
    again on a fresh one: no outage, no fresh per-process quota."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(redis_url)
    try:
        runner = ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=3, period=60.0), store=store)
        answers = []
        for _ in range(10):
            command(redis_server.port, "CLIENT", "KILL", "TYPE", "normal")
            answers.append((await runner.run("work")).is_success)
    finally:
        await store.aclose()
    assert answers.count(True) == 3
    assert outages(caplog) == 0
    assert runner.stats().store == "shared"


# ----------------------------------------------------------------- outages, and the way back


@in_loop
async def test_flushed_scripts_are_loaded_again(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``SCRIPT FLUSH`` (or a failover to a server without them) is no outage: ``EVALSHA``
    fails with NOSCRIPT, the script is loaded again, and the state stays shared."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=2, period=60.0),
            circuit_breaker=CircuitBreaker(failure_threshold=1),
            store=store,
        )
        assert (await runner.run("ping")).is_success
        await store.client.script_flush()
        assert await store.client.script_exists(ADMIT_SHA) == [False]
        results = [await runner.run("ping") for _ in range(2)]
        assert [r.kind for r in results] == [None, ErrorKind.TOOL_RUNTIME_RATE_LIMITED]
        assert runner.stats().store == "shared"
        assert not outage_warnings(caplog)


def keep(state: Any) -> tuple[Any, None]:
    """A custom change that changes nothing."""
    return state, None


@in_loop
async def test_the_limiter_survives_a_server_restart(
    redis_server: RedisServer, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis stops mid-run: calls go on (per-process state), one WARNING, ``"fallback"``;
    once it is back and ``retry_interval`` has passed, the state is shared again (INFO) and
    Redis enforces the limit again."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    limit = RateLimit(calls=3, period=30.0, scope="api")
    async with contextlib.aclosing(RedisStore(redis_url, retry_interval=0.3)) as store:
        runner = ToolRunner(TOOLKIT, rate_limit=limit, store=store)
        redis_key = store.key("tdk:rate_limit:scope:api/3/30.0")
        shared = [await runner.run("ping") for _ in range(4)]
        assert [r.is_success for r in shared] == [True, True, True, False]
        assert shared[3].kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
        assert await store.client.zcard(redis_key) == 3
        assert runner.stats().store == "shared"

        redis_server.stop()
        during = [await runner.run("ping") for _ in range(3)]
        assert [r.is_success for r in during] == [True, True, True]
        assert runner.stats().store == "fallback"
        assert store.status == "fallback"
        assert len(outage_warnings(caplog)) == 1
        assert not returns(caplog)

        # (the fallback enforces the limit too: its 3 slots are taken now)
        assert (await runner.run("ping")).kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED

        redis_server.start()  # the same port, empty
        deadline = time.monotonic() + 5.0
        while runner.stats().store != "shared":  # a change that takes no limiter slot
            assert time.monotonic() < deadline, "the store never went back to Redis"
            await asyncio.sleep(0.1)
            await store.update("tdk:custom:probe", keep)
        assert len(returns(caplog)) == 1
        assert len(outage_warnings(caplog)) == 1  # still one for the one outage
        again = [await runner.run("ping") for _ in range(4)]  # on Redis again: 3 slots
        assert [r.is_success for r in again] == [True, True, True, False]
        assert again[3].kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
        assert await store.client.zcard(redis_key) == 3


@in_loop
async def test_with_redis_down_from_the_start_every_call_succeeds(
    unused_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens: 50 calls under a limiter and a circuit all succeed, one WARNING is
    logged, and only the first pays for finding out (the batch takes far less than 50 x the
    timeout)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    timeout = 0.25
    async with contextlib.aclosing(RedisStore(unused_url, timeout=timeout)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=100, period=60.0),
            circuit_breaker=CircuitBreaker(failure_threshold=2),
            store=store,
        )
        started = time.perf_counter()
        results = [await runner.run("ping") for _ in range(50)]
        elapsed = time.perf_counter() - started
        assert all(r.is_success for r in results)
        assert elapsed < 50 * timeout
        assert runner.stats().store == "fallback"
        warnings = outage_warnings(caplog)
        assert len(warnings) == 1
        message = warnings[0].getMessage()
        assert message.startswith("Redis failed (ConnectionError: Error 111 connecting to ")
        assert message.endswith("): runner state is per process until it answers")


@in_loop
async def test_the_fallback_keeps_the_rules_in_process(unused_url: str) -> None:
    """During an outage the limit still holds, per process."""
    async with contextlib.aclosing(RedisStore(unused_url)) as store:
        runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=2, period=60.0), store=store)
        results = [await runner.run("ping") for _ in range(3)]
        assert [r.kind for r in results] == [None, None, ErrorKind.TOOL_RUNTIME_RATE_LIMITED]


@in_loop
async def test_one_warning_per_outage_with_many_calls_in_flight(
    unused_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Ten calls at once find Redis unreachable: still one WARNING for the one outage."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(unused_url)) as store:
        runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=100, period=60.0), store=store)
        results = await runner.run_many([("ping", {})] * 10)
        assert all(r.is_success for r in results)
        assert runner.stats().store == "fallback"
        assert len(outage_warnings(caplog)) == 1


@in_loop
async def test_a_redis_that_never_answers_times_out_into_the_fallback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that accepts connections and never answers (a hung Redis), reached through a
    client given to the store: each try is cut at ``timeout`` and the call goes on; until
    ``retry_interval`` has passed, calls do not even try (one connection for all)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    peers: list[asyncio.StreamWriter] = []

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer)
        await reader.read()  # until the client hangs up

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = aioredis.Redis(host="127.0.0.1", port=port)  # no socket timeouts of its own
    try:
        async with contextlib.aclosing(
            RedisStore(client, timeout=0.1, retry_interval=0.5)
        ) as store:
            assert store.client is client
            runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=100, period=60.0), store=store)
            started = time.perf_counter()
            first = await asyncio.wait_for(runner.run("ping"), 30)  # (a hang guard)
            assert first.is_success
            assert time.perf_counter() - started > 0.05  # (it did wait for Redis first)
            assert runner.stats().store == "fallback"
            assert len(peers) == 1
            rest = [await runner.run("ping") for _ in range(10)]
            assert all(r.is_success for r in rest)
            assert len(peers) == 1  # within retry_interval: Redis left alone
            await asyncio.sleep(0.55)  # past retry_interval: the next call tries, times out
            assert (await runner.run("ping")).is_success
            assert len(peers) >= 2  # (the timed-out connection was dropped: a new one)
            assert runner.stats().store == "fallback"
            await asyncio.sleep(0.55)  # a custom change's try is cut at the timeout too
            started = time.perf_counter()
            changed = await asyncio.wait_for(store.update("tdk:custom:hung", increment, 1), 30)
            assert changed == 1  # in process
            assert time.perf_counter() - started > 0.05  # (it did wait for Redis first)
            assert store.status == "fallback"
            warnings = outage_warnings(caplog)
            assert len(warnings) == 1
            assert warnings[0].getMessage() == (
                "Redis failed (TimeoutError): runner state is per process until it answers"
            )
    finally:
        for peer in peers:
            peer.close()
        server.close()
        await server.wait_closed()


USERS = 20_000


@in_loop
async def test_the_fallback_sweeps_idle_per_user_state(unused_url: str) -> None:
    """20,000 users served during an outage, each with a limiter and a circuit of their own:
    the store keeps a bounded number of states in process (idle ones are swept, as the
    in-memory store's are), not two for every user ever seen; a user whose circuit is open
    keeps it."""
    now = [1000.0]
    scope = "api:{user_id}"
    async with contextlib.aclosing(RedisStore(unused_url)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=1, period=1.0, scope=scope),
            circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=1e6, scope=scope),
            store=store,
            clock=lambda: now[0],
        )
        unlucky = tdk.ToolContext(user_id="unlucky")
        UPSTREAM["down"] = True
        assert (await runner.run("flaky", context=unlucky)).error is not None
        UPSTREAM["down"] = False
        for n in range(USERS):
            now[0] += 2.0  # (past each user's period: their logs are idle at once)
            result = await runner.run("flaky", context=tdk.ToolContext(user_id=f"user{n}"))
            assert result.is_success
        assert store.status == "fallback"
        assert store.fallback_states < USERS // 4  # (unswept: 2 per user, 40,000)
        refused = await runner.run("flaky", context=unlucky)
        assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


@in_loop
async def test_asking_about_circuits_during_an_outage_keeps_nothing(unused_url: str) -> None:
    """``runner.available()`` for 1,000 users during an outage makes no state for any."""
    breaker = CircuitBreaker(failure_threshold=1, scope="api:{user_id}")
    async with contextlib.aclosing(RedisStore(unused_url)) as store:
        runner = ToolRunner(TOOLKIT, circuit_breaker=breaker, store=store)
        for n in range(1000):
            context = tdk.ToolContext(user_id=f"user{n}")
            assert len(await runner.available(TOOLKIT, context=context)) == len(TOOLKIT)
        assert store.status == "fallback"
        assert store.fallback_states == 0


# ---------------------------------------------------------------- errors of the whole server


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
    redis_url: str,
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    trouble: Callable[[int], contextlib.AbstractContextManager[None]],
    tool_name: str,
    error: str,
) -> None:
    """A server that refuses every write (a read-only replica, out of memory, busy with a
    script) is an outage, not a bad key: the call goes on in process, one WARNING."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url, timeout=2.0)) as store:
        runner = ToolRunner(
            WORK_TOOLKIT,
            rate_limit=RateLimit(calls=5, period=30.0),
            circuit_breaker=CircuitBreaker(failure_threshold=5),
            store=store,
        )
        await store.client.ping()  # (connected before the trouble)
        with trouble(redis_server.port):
            result = await runner.run(tool_name)
        assert result.attempts == 1
        assert result.is_success is (tool_name == "work")
        assert store.status == "fallback"
        assert outages(caplog) == 1
        assert f"Redis failed ({error}" in warnings_logged(caplog)[0]
        assert not replacements(caplog)


# --------------------------------------------------- a paused server and the call's deadline


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
    redis_url: str,
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    policies: dict[str, Any],
) -> None:
    """Redis paused, a deadline far shorter than the store's timeout: the store waits at most
    half of what the deadline leaves, and the tool runs (on per-process state) and succeeds.
    That is the call's own business: no outage."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url, timeout=10.0)) as store:
        runner = ToolRunner(WORK_TOOLKIT, deadline=0.5, store=store, **policies)
        await store.client.ping()
        pause(redis_server.port)
        try:
            result = await runner.run("work")
        finally:
            unpause(redis_server.port)
        assert result.is_success, result.error
        assert result.attempts == 1
        assert len(BODIES) == 1
        assert store.status == "shared"
        assert not warnings_logged(caplog)


@in_loop
async def test_a_redis_paused_during_a_call_leaves_its_retry_the_deadline(
    redis_url: str, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The first attempt pauses Redis and fails: the report of that failure waits at most
    half of what the deadline leaves, and the retry still runs and succeeds."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    PAUSED.update(port=redis_server.port, calls=0)
    async with contextlib.aclosing(RedisStore(redis_url, timeout=10.0)) as store:
        runner = ToolRunner(
            WORK_TOOLKIT,
            deadline=1.0,
            retry=RetryPolicy(max_attempts=2, initial_delay=0.01, jitter=False),
            circuit_breaker=CircuitBreaker(failure_threshold=5),
            store=store,
        )
        await store.client.ping()
        try:
            result = await runner.run("pausing")
        finally:
            unpause(redis_server.port)
        assert result.is_success, result.error
        assert result.attempts == 2
        assert store.status == "shared"
        assert not warnings_logged(caplog)
