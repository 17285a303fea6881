"""``RedisStore`` against what a busy, flaky or tampered Redis does, on a real redis-server:
bursts larger than the connection pool, connections killed under it, state planted with
future times or nonsense fields, equal limits written differently, keys that cannot be sent
as they are, and a store used from another event loop."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from _redis_support import RedisServer, command, running_redis
from _runner_support import in_loop

from tdk import CircuitBreaker, RateLimit, ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import UpstreamServerError
from tdk.runner import RedisStore

BODIES: list[float] = []


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


TOOLKIT = Toolkit("hostile_redis", [work, broken])


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


def test_a_store_used_from_another_event_loop_falls_back(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A store whose connections belong to a loop that has ended: calls from the next loop
    never raise (per-process state; one WARNING)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(url)
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


def test_the_support_module_is_real(tmp_path: Path) -> None:
    """(The servers these tests use are real: a second one answers PING on its own port.)"""
    with running_redis(tmp_path) as second:
        assert command(second.port, "PING") == b"+PONG\r\n"
