"""``RedisStore``: limiter and circuit state shared between processes, on a real redis-server.

Every test talks to a ``redis-server`` started for this module on a free port of 127.0.0.1
(``tests/runner/conftest.py``); nothing is faked and nothing skips: without a server that
answers, the tests fail. Covered: one quota for four worker processes, one circuit for two
runners (and the generations that keep stale reports out, the quiet successes that are not
reported), hash-tagged keys that expire when idle (equal limits written differently share
one), the constructor's checks and ``stats().store``, and one store used from one event loop
after another. Outages are in ``test_redis_outages.py``; custom changes, the Lua scripts and
state planted on the server in ``test_redis_state.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from _redis_support import RedisServer, command, running_redis
from _redis_tools import (
    GATE,
    TOOLKIT,
    UPSTREAM,
    WORK_TOOLKIT,
    FakeClock,
    increment,
    outages,
    warnings_logged,
)
from _runner_support import in_loop

import tdk
from tdk import CircuitBreaker, RateLimit, ToolContext, ToolRunner
from tdk.errors import ErrorKind
from tdk.runner import CircuitState, InMemoryStore, RedisStore, RunnerStats
from tdk.runner._breaker import FAILURE, SUCCESS, acquire, peek, record

ROOT = Path(tdk.__file__).resolve().parents[1]
CLOSED, OPEN, HALF_OPEN = CircuitState.CLOSED, CircuitState.OPEN, CircuitState.HALF_OPEN
#: A key in the form the store writes: ``{<prefix>:<scope or tool>}:<policy>``.
KEY_FORM = re.compile(r"^\{(?P<prefix>[^{}:]+):[^{}]+\}:(?P<policy>rate_limit|circuit)$")


# ----------------------------------------------------------- 1. one quota for four processes

WORKER = '''
"""A worker process: hammer the shared limiter, note when each admitted body starts."""

import asyncio
import json
import logging
import sys
import time

from tdk import RateLimit, Toolkit, ToolRunner, tool
from tdk.runner import RedisStore

URL, OUT, SECONDS, TIMEOUT = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
STARTS: list[float] = []


@tool(read_only=True)
async def hit() -> str:
    """Call the shared API."""
    STARTS.append(time.time())
    return "ok"


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.outages = self.replaced = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.outages += record.getMessage().startswith("Redis failed (")
        self.replaced += record.getMessage().startswith("Redis key ")


async def main() -> None:
    warned = Warnings()
    logging.getLogger("tdk.runner").addHandler(warned)
    store = RedisStore(URL, timeout=TIMEOUT)
    limit = RateLimit(calls=10, period=1.0, scope="shared-api")
    runner = ToolRunner(Toolkit("worker", [hit]), rate_limit=limit, store=store)
    await store.client.ping()  # connected before the start
    print("ready", flush=True)
    sys.stdin.readline()  # the go
    refused, kinds = 0, set()
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        result = await runner.run("hit")
        if result.error is not None:
            refused += 1
            kinds.add(result.error.kind)
            await asyncio.sleep(0.005)  # hammer, but leave the CPU to the others
    status = runner.stats().store
    await store.aclose()
    with open(OUT, "w") as out:
        json.dump(
            {"starts": STARTS, "refused": refused, "kinds": sorted(kinds),
             "store": status, "outages": warned.outages, "replaced": warned.replaced},
            out,
        )


asyncio.run(main())
'''
#: A generous store timeout for the workers: on a loaded 2-CPU machine a command may take a
#: while, and a worker that fell back to per-process state would admit calls on its own.
WORKER_TIMEOUT = 2.0
WORKERS = 4
HAMMER_SECONDS = 2.5
#: The admitted bodies' start times are checked in windows this much shorter than the period:
#: the server admits a call at its own TIME, and the body starts a little later (the script's
#: reply, the runner, a busy CPU), by a delay that differs between calls. Two admissions
#: exactly one period apart by the server's clock may so show up a few ms closer together.
TOLERANCE = 0.1


@pytest.mark.parametrize(
    "planted",
    [
        pytest.param((), id="clean"),
        pytest.param(("SET", "junk"), id="a-string-under-the-quota-key"),
        pytest.param(("RPUSH", "a", "b"), id="a-list-under-the-quota-key"),
    ],
)
def test_four_processes_share_one_quota(
    redis_server: RedisServer, redis_url: str, tmp_path: Path, planted: tuple[str, ...]
) -> None:
    """Four worker processes on one scope admit at most 10 calls in any 1 s window in all,
    also when the quota's key held a value of another type at the start: the first script to
    meet it replaces it (one WARNING in all), and no worker falls back."""
    if planted:
        key = RedisStore(redis_url).key("tdk:rate_limit:scope:shared-api/10/1.0")
        assert not command(redis_server.port, planted[0], key, *planted[1:]).startswith(b"-")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outputs = [tmp_path / f"worker{n}.json" for n in range(WORKERS)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                redis_url,
                str(out),
                f"{HAMMER_SECONDS}",
                f"{WORKER_TIMEOUT}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for out in outputs
    ]
    try:
        for worker in workers:  # all connected before any starts
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == b"ready\n", (line, worker.stderr.read() if worker.stderr else b"")
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        for worker in workers:
            _, stderr = worker.communicate(timeout=60)
            assert worker.returncode == 0, stderr.decode()
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    reports = [json.loads(out.read_text()) for out in outputs]
    assert [r["store"] for r in reports] == ["shared"] * WORKERS
    assert [r["outages"] for r in reports] == [0] * WORKERS
    assert sum(r["replaced"] for r in reports) == (1 if planted else 0)
    assert {kind for r in reports for kind in r["kinds"]} <= {"TOOL_RUNTIME_RATE_LIMITED"}
    starts = sorted(t for r in reports for t in r["starts"])
    # At most 10 in any window of (1 s - tolerance): the 11th start after any start is later.
    closest = min(starts[i + 10] - starts[i] for i in range(len(starts) - 10))
    assert closest >= 1.0 - TOLERANCE, (closest, starts)
    # Shared, not per process: 2.5 s of hammering fill about three windows (30 calls); with
    # state per process, four workers would have been admitted about 4 x as many.
    assert 20 < len(starts) <= 30, starts
    assert sum(r["refused"] for r in reports) > 0
    assert sum(1 for r in reports if r["starts"]) >= 2  # the quota went to several workers


# ---------------------------------------------------------------- 2. one circuit for all

BREAKER = CircuitBreaker(failure_threshold=2, reset_timeout=0.4, scope="upstream")


def breaker_runner(store: RedisStore) -> ToolRunner:
    """A runner whose tools share the circuit of scope ``upstream``."""
    return ToolRunner(TOOLKIT, circuit_breaker=BREAKER, store=store)


@in_loop
async def test_a_circuit_opened_by_one_runner_is_open_for_another(redis_url: str) -> None:
    """Two runners on two stores (two clients): one opens the circuit, the other is refused;
    after the reset timeout one probe's success closes it for both."""
    async with (
        contextlib.aclosing(RedisStore(redis_url)) as first,
        contextlib.aclosing(RedisStore(redis_url)) as second,
    ):
        assert first.client is not second.client
        one, other = breaker_runner(first), breaker_runner(second)
        UPSTREAM["down"] = True
        failed = [await one.run("flaky") for _ in range(2)]
        assert [r.kind for r in failed] == [ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR] * 2
        assert one.stats().circuits["flaky"] is OPEN
        calls = UPSTREAM["calls"]
        refused = await other.run("flaky")
        assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
        assert refused.attempts == 0
        assert UPSTREAM["calls"] == calls  # the body did not run
        assert refused.error is not None
        assert 0 < (refused.error.retry_after_ms or 0) <= 400
        assert other.stats().rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] == 1
        assert other.stats().circuits["flaky"] is OPEN
        assert await other.available(TOOLKIT) == []  # every tool is behind that circuit
        await asyncio.sleep(0.45)
        UPSTREAM["down"] = False
        assert [d.name for d in await other.available(TOOLKIT)] == ["ping", "flaky", "slow"]
        probe = await other.run("flaky")
        assert probe.is_success
        assert other.stats().circuits["flaky"] is CLOSED
        assert (await one.run("flaky")).is_success
        assert one.stats().circuits["flaky"] is CLOSED
        fields = await first.client.hgetall(first.key("tdk:circuit:scope:upstream"))
        assert fields[b"state"] == b"closed"
        assert fields[b"failures"] == b"0"


@in_loop
async def test_a_slow_success_from_before_the_circuit_opened_cannot_close_it(
    redis_url: str,
) -> None:
    """A call admitted while the circuit was closed ends with a success after another
    runner opened it, let a probe fail and opened it again: the circuit stays open on Redis.

    The late success came from a generation in which its store last saw the circuit closed
    without failures: it is not reported (docs/scaling.md), and its runner answers what it
    last saw (closed) until its next call asks Redis."""
    GATE["open"] = asyncio.Event()
    async with (
        contextlib.aclosing(RedisStore(redis_url)) as first,
        contextlib.aclosing(RedisStore(redis_url)) as second,
    ):
        one, other = breaker_runner(first), breaker_runner(second)
        late = asyncio.create_task(one.run("slow"))  # admitted in generation 0
        await asyncio.sleep(0.05)
        UPSTREAM["down"] = True
        for _ in range(2):
            await other.run("flaky")  # opens: generation 1
        await asyncio.sleep(0.45)
        probe = await other.run("flaky")  # half-open (2), the probe fails: open again (3)
        assert probe.kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
        GATE["open"].set()
        assert (await late).value == "late"
        refused = await other.run("flaky")
        assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
        fields = await first.client.hgetall(first.key("tdk:circuit:scope:upstream"))
        assert (fields[b"state"], fields[b"generation"]) == (b"open", b"3")
        # The late call's runner answered from what its store last saw (no round trip) ...
        assert one.stats().circuits["slow"] is CLOSED
        # ... and its next call asks Redis, which holds the circuit open for it too.
        calls = UPSTREAM["calls"]
        assert (await one.run("flaky")).kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
        assert UPSTREAM["calls"] == calls
        assert one.stats().circuits["flaky"] is OPEN  # (stats go by tool: its last answer)


@in_loop
async def test_a_report_from_an_earlier_generation_cannot_close_a_half_open_circuit(
    redis_url: str,
) -> None:
    """Straight through ``update``: with a probe out (generation 2), a success reported with
    ticket 0 or 1 changes nothing; the probe's own failure opens the circuit again, after
    which even the probe's generation is stale."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=0.2)
    key = "tdk:circuit:gen"
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        old, *_ = await store.update(key, acquire, breaker, time.monotonic, None)
        assert old == 0
        opened = await store.update(key, record, breaker, time.monotonic, old, FAILURE)
        assert opened == (CLOSED, OPEN, 1)
        await asyncio.sleep(0.25)
        ticket, before, after, _, _ = await store.update(
            key, acquire, breaker, time.monotonic, None
        )
        assert (ticket, before, after) == (2, OPEN, HALF_OPEN)
        for stale in (0, 1):
            answer = await store.update(key, record, breaker, time.monotonic, stale, SUCCESS)
            assert answer == (HALF_OPEN, HALF_OPEN, 1)
        assert await store.update(key, peek, breaker, time.monotonic) is True
        reopened = await store.update(key, record, breaker, time.monotonic, ticket, FAILURE)
        assert reopened == (HALF_OPEN, OPEN, 2)
        late = await store.update(key, record, breaker, time.monotonic, ticket, SUCCESS)
        assert late == (OPEN, OPEN, 2)


async def script_runs(client: aioredis.Redis | aioredis.RedisCluster) -> int:
    """How many scripts the server has run (``EVALSHA`` and ``EVAL``), all clients."""
    stats = await client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


@in_loop
async def test_a_quiet_success_is_answered_without_a_round_trip(redis_url: str) -> None:
    """A success of the generation in which this store last saw the circuit closed without
    failures is answered ``(closed, closed, 0)`` without running a script; an answer that is
    not (closed, 0 failures) drops that memory, and the next success goes to Redis."""
    breaker = CircuitBreaker(failure_threshold=3, reset_timeout=60.0)
    key = "tdk:circuit:quiet"
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        redis_key = store.key(key)
        assert await store.update(key, acquire, breaker, time.monotonic, None) == (
            0,
            CLOSED,
            CLOSED,
            0,
            None,
        )
        runs = await script_runs(store.client)
        for _ in range(3):
            answer = await store.update(key, record, breaker, time.monotonic, 0, SUCCESS)
            assert answer == (CLOSED, CLOSED, 0)
        assert await script_runs(store.client) == runs  # no round trip
        # A failure's answer (1 failure) drops the memory: the next success resets on Redis.
        failed = await store.update(key, record, breaker, time.monotonic, 0, FAILURE)
        assert failed == (CLOSED, CLOSED, 1)
        assert await store.client.hget(redis_key, "failures") == b"1"
        runs = await script_runs(store.client)
        reset = await store.update(key, record, breaker, time.monotonic, 0, SUCCESS)
        assert reset == (CLOSED, CLOSED, 0)
        assert await script_runs(store.client) == runs + 1
        assert await store.client.hget(redis_key, "failures") == b"0"
        # ... whose answer (closed, 0 failures) makes generation 0 quiet again.
        runs = await script_runs(store.client)
        again = await store.update(key, record, breaker, time.monotonic, 0, SUCCESS)
        assert again == (CLOSED, CLOSED, 0)
        assert await script_runs(store.client) == runs
        # A success of another generation is no quiet one: it goes to Redis.
        stale = await store.update(key, record, breaker, time.monotonic, 5, SUCCESS)
        assert stale == (CLOSED, CLOSED, 0)
        assert await script_runs(store.client) == runs + 1


@in_loop
async def test_a_quiet_success_does_not_undo_another_workers_failures(redis_url: str) -> None:
    """By design (docs/scaling.md): a success admitted by a closed circuit without failures is
    not reported, so a failure another store reported meanwhile stays counted, and a circuit
    another store opened stays open, where ``InMemoryStore`` (one process, one order) resets
    the count. The store answers what it last saw; Redis holds the circuit's real state."""
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=60.0)
    key = "tdk:circuit:quiet-shared"
    clock = FakeClock()
    in_memory = InMemoryStore()
    async with (
        contextlib.aclosing(RedisStore(redis_url)) as first,
        contextlib.aclosing(RedisStore(redis_url)) as second,
    ):
        redis_key = first.key(key)
        for store in (first, in_memory):
            verdict = await store.update(key, acquire, breaker, clock, None)
            assert verdict == (0, CLOSED, CLOSED, 0, None)
        # Another worker's failure, then this worker's success of generation 0:
        for store in (second, in_memory):
            assert await store.update(key, record, breaker, clock, 0, FAILURE) == (
                CLOSED,
                CLOSED,
                1,
            )
        assert await in_memory.update(key, record, breaker, clock, 0, SUCCESS) == (
            CLOSED,
            CLOSED,
            0,
        )
        assert await first.update(key, record, breaker, clock, 0, SUCCESS) == (CLOSED, CLOSED, 0)
        assert await first.client.hget(redis_key, "failures") == b"1"  # (in memory: 0)
        # ... so the other worker's next failure opens the circuit on Redis (not in memory).
        assert await in_memory.update(key, record, breaker, clock, 0, FAILURE) == (
            CLOSED,
            CLOSED,
            1,
        )
        opened = await second.update(key, record, breaker, clock, 0, FAILURE)
        assert opened == (CLOSED, OPEN, 2)
        # A stale success into the circuit the other store opened: the answer is what this
        # store last saw (closed) where in memory it is (open, open, 2) ...
        assert await first.update(key, record, breaker, clock, 0, SUCCESS) == (CLOSED, CLOSED, 0)
        # ... and Redis holds it open: the other store is refused, and so is this one.
        fields = await first.client.hgetall(redis_key)
        assert (fields[b"state"], fields[b"generation"]) == (b"open", b"1")
        for store in (second, first):
            ticket, before, after, failures, wait = await store.update(
                key, acquire, breaker, clock, None
            )
            assert (ticket, before, after, failures) == (None, OPEN, OPEN, 2)
            assert wait is not None
            assert 0 < wait <= 60.0


# ------------------------------------------------------------------- 3. keys and their TTL


@pytest.mark.parametrize(
    ("prefix", "expected_prefix"),
    [pytest.param(None, "tdk", id="default-prefix"), pytest.param("myapp", "myapp", id="myapp")],
)
@in_loop
async def test_keys_are_hash_tagged_and_have_a_ttl(
    redis_url: str, prefix: str | None, expected_prefix: str
) -> None:
    """Every key the runner writes is ``{<prefix>:...}:<policy>`` with a TTL of its period
    (limiter) or twice its reset timeout (circuit) plus one second, just after the write."""
    store = RedisStore(redis_url) if prefix is None else RedisStore(redis_url, prefix=prefix)
    async with contextlib.aclosing(store):
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=5, period=0.5, scope="api"),
            circuit_breaker=CircuitBreaker(failure_threshold=3, reset_timeout=2.0),
            store=store,
        )
        UPSTREAM["down"] = True
        assert (await runner.run("flaky")).kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
        assert (await runner.run("ping")).is_success
        keys = sorted(k.decode() for k in await store.client.keys("*"))
        assert keys == [  # (ping's clean closed circuit is never written)
            f"{{{expected_prefix}:flaky}}:circuit",
            f"{{{expected_prefix}:scope:api/5/0.5}}:rate_limit",
        ]
        bounds = {"rate_limit": 500 + 1000, "circuit": 2 * 2000 + 1000}
        for key in keys:
            form = KEY_FORM.match(key)
            assert form is not None, key
            assert form["prefix"] == expected_prefix
            bound = bounds[form["policy"]]
            assert bound - 500 < await store.client.pttl(key) <= bound, key


@in_loop
async def test_idle_keys_go_away(redis_url: str) -> None:
    """A limiter of period 0.2 s and a circuit of reset timeout 0.2 s leave no key behind
    once idle for their TTL (0.2 s + 1 s and 2 x 0.2 s + 1 s)."""
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        runner = ToolRunner(
            TOOLKIT,
            rate_limit=RateLimit(calls=3, period=0.2),
            circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=0.2),
            store=store,
        )
        UPSTREAM["down"] = True
        await runner.run("flaky")
        assert len(await store.client.keys("*")) == 2
        deadline = time.monotonic() + 5.0
        while await store.client.keys("*"):
            assert time.monotonic() < deadline, "the idle keys never expired"
            await asyncio.sleep(0.1)
        UPSTREAM["down"] = False
        assert (await runner.run("flaky")).is_success  # a fresh, closed circuit


@in_loop
async def test_an_open_circuit_outlives_an_idle_reset_timeout(redis_url: str) -> None:
    """An open circuit's key lives twice the reset timeout plus one second: left idle past
    the reset timeout plus one second (the TTL it had before), the next call is a probe of
    the circuit that opened, not the first call of a fresh one."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=0.5)
    key = "tdk:circuit:idle"
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        opened = await store.update(key, record, breaker, time.monotonic, 0, FAILURE)
        assert opened == (CLOSED, OPEN, 1)
        assert 1500 < await store.client.pttl(store.key(key)) <= 2 * 500 + 1000
        await asyncio.sleep(1.75)  # past 0.5 s + 1 s, short of 2 x 0.5 s + 1 s
        assert await store.client.exists(store.key(key)) == 1
        verdict = await store.update(key, acquire, breaker, time.monotonic, None)
        assert verdict == (2, OPEN, HALF_OPEN, 1, None)


@in_loop
async def test_a_long_probe_lifetime_lengthens_the_circuit_ttl(redis_url: str) -> None:
    """A probe admitted with a lifetime longer than the reset timeout: the circuit's key
    lives twice that lifetime plus one second."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=0.2)
    key = "tdk:circuit:long-probe"
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        await store.update(key, record, breaker, time.monotonic, 0, FAILURE)
        await asyncio.sleep(0.25)
        verdict = await store.update(key, acquire, breaker, time.monotonic, 5.0)
        assert verdict[:3] == (2, OPEN, HALF_OPEN)
        assert 10_500 < await store.client.pttl(store.key(key)) <= 2 * 5000 + 1000


@in_loop
async def test_equal_limits_written_differently_share_a_quota(redis_url: str) -> None:
    """``period=10`` and ``period=10.0`` are one limit: one key, one quota."""
    stores = [RedisStore(redis_url), RedisStore(redis_url)]
    try:
        runners = [
            ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=2, period=period), store=store)
            for period, store in zip((10, 10.0), stores, strict=True)
        ]
        results = [await runners[n % 2].run("work") for n in range(4)]
    finally:
        for store in stores:
            await store.aclose()
    assert [r.is_success for r in results] == [True, True, False, False]


@in_loop
async def test_a_user_id_that_is_not_utf8_is_keyed_not_refused(redis_url: str) -> None:
    """A user id holding a lone surrogate (read with surrogateescape) has state of its own
    on Redis; the call never fails for it."""
    store = RedisStore(redis_url)
    try:
        limit = RateLimit(calls=1, period=30.0, scope="per-user:{user_id}")
        runner = ToolRunner(WORK_TOOLKIT, rate_limit=limit, store=store)
        odd, plain = ToolContext(user_id="caf\udce9"), ToolContext(user_id="cafe")
        assert (await runner.run("work", context=odd)).is_success
        assert (await runner.run("work", context=plain)).is_success
        assert (await runner.run("work", context=odd)).kind == "TOOL_RUNTIME_RATE_LIMITED"
        assert runner.stats().store == "shared"
    finally:
        await store.aclose()


# ---------------------------------------------------------------------- 4. unit tables

BAD_ARGUMENTS: dict[str, tuple[dict[str, Any], type[Exception], str]] = {
    "empty-prefix": ({"prefix": ""}, ValueError, "prefix"),
    "prefix-with-open-brace": ({"prefix": "a{b"}, ValueError, "prefix"),
    "prefix-with-close-brace": ({"prefix": "a}b"}, ValueError, "prefix"),
    "prefix-not-str": ({"prefix": 5}, TypeError, "prefix must be a str, not int"),
    "timeout-zero": ({"timeout": 0}, ValueError, "timeout"),
    "timeout-negative": ({"timeout": -0.5}, ValueError, "timeout"),
    "timeout-nan": ({"timeout": float("nan")}, ValueError, "timeout"),
    "timeout-inf": ({"timeout": float("inf")}, ValueError, "timeout"),
    "timeout-bool": ({"timeout": True}, TypeError, "timeout"),
    "timeout-str": ({"timeout": "1"}, TypeError, "timeout"),
    "timeout-none": ({"timeout": None}, TypeError, "timeout"),
    "retry-interval-zero": ({"retry_interval": 0.0}, ValueError, "retry_interval"),
    "retry-interval-inf": ({"retry_interval": float("inf")}, ValueError, "retry_interval"),
    "retry-interval-bool": ({"retry_interval": False}, TypeError, "retry_interval"),
    "retry-interval-list": ({"retry_interval": [1]}, TypeError, "retry_interval"),
}


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [pytest.param(*case, id=name) for name, case in BAD_ARGUMENTS.items()],
)
def test_bad_settings_are_refused(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Each invalid setting raises at construction, naming the setting."""
    with pytest.raises(error, match=match):
        RedisStore("redis://127.0.0.1:6379/0", **options)


@pytest.mark.parametrize(
    ("target", "error", "match"),
    [
        pytest.param(42, TypeError, "not int", id="int"),
        pytest.param(b"redis://127.0.0.1", TypeError, "not bytes", id="bytes"),
        pytest.param(None, TypeError, "not NoneType", id="none"),
        pytest.param("http://127.0.0.1:6379", ValueError, "scheme", id="not-a-redis-url"),
    ],
)
def test_bad_targets_are_refused(target: Any, error: type[Exception], match: str) -> None:
    """The store takes a ``redis://`` URL or a ``redis.asyncio`` client, nothing else."""
    with pytest.raises(error, match=match):
        RedisStore(target)


def test_a_sync_client_is_refused() -> None:
    """A synchronous ``redis.Redis`` client is no ``redis.asyncio`` one."""
    with redis.Redis() as sync_client, pytest.raises(TypeError, match="not Redis"):
        RedisStore(sync_client)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "prefix", [pytest.param("caf\udce9", id="surrogate"), pytest.param("a\nb", id="newline")]
)
def test_a_prefix_that_cannot_be_sent_is_refused(prefix: str) -> None:
    """A prefix Redis could not be sent (or that breaks a log line) is refused at once."""
    with pytest.raises(ValueError, match="prefix must be printable UTF-8 text"):
        RedisStore("redis://127.0.0.1:1/0", prefix=prefix)


@in_loop
async def test_good_settings_are_kept() -> None:
    """Numbers become floats; a given client is used as it is; a new store is shared."""
    client = aioredis.Redis()
    async with contextlib.aclosing(
        RedisStore(client, prefix="my-app", timeout=1, retry_interval=2)
    ) as store:
        assert store.client is client
        assert (store.prefix, store.timeout, store.retry_interval) == ("my-app", 1.0, 2.0)
        assert type(store.timeout) is float
        assert store.status == "shared"
    async with contextlib.aclosing(RedisStore("redis://127.0.0.1:1/0")) as defaults:
        assert (defaults.prefix, defaults.timeout, defaults.retry_interval) == ("tdk", 0.25, 1.0)
        assert isinstance(defaults.client, aioredis.Redis)


KEYS: dict[str, tuple[str, str, str]] = {
    "docstring-runner-example": ("tdk", "tdk:circuit:scope:github", "{tdk:scope:github}:circuit"),
    "docstring-custom-example": ("tdk", "jobs:1", "{tdk:custom:jobs:1}"),
    # (the old docstring's example: "limiter" is no policy of the runner's, so a custom key)
    "docstring-example": (
        "tdk",
        "tdk:limiter:scope:github",
        "{tdk:custom:tdk:limiter:scope:github}",
    ),
    "tool-limiter": ("tdk", "tdk:rate_limit:search", "{tdk:search}:rate_limit"),
    "scoped-limiter": (
        "tdk",
        "tdk:rate_limit:scope:shared-api/10/1.0",
        "{tdk:scope:shared-api/10/1.0}:rate_limit",
    ),
    "tool-circuit": ("tdk", "tdk:circuit:flaky", "{tdk:flaky}:circuit"),
    "per-user-circuit": (
        "tdk",
        "tdk:circuit:scope:gh:{user_id}:(('str', 'u1'),)",
        "{tdk:scope:gh:{user_id}:(('str', 'u1'),)}:circuit",
    ),
    "custom": ("tdk", "tdk:custom:thing", "{tdk:custom:tdk:custom:thing}"),
    "other-prefix": ("myapp", "tdk:circuit:flaky", "{myapp:flaky}:circuit"),
    "other-prefix-custom": ("myapp", "jobs:1", "{myapp:custom:jobs:1}"),
    "no-colon": ("tdk", "thing", "{tdk:custom:thing}"),
    "one-colon": ("tdk", "a:b", "{tdk:custom:a:b}"),
    "one-colon-x-y": ("tdk", "x:y", "{tdk:custom:x:y}"),
    "empty": ("tdk", "", "{tdk:custom:}"),
    "policy-without-rest": ("tdk", "tdk:circuit", "{tdk:custom:tdk:circuit}"),
    "policy-with-empty-rest": ("tdk", "tdk:circuit:", "{tdk:}:circuit"),
    "other-first-part": ("tdk", "app:circuit:flaky", "{tdk:custom:app:circuit:flaky}"),
    "first-part-is-the-prefix": (
        "myapp",
        "myapp:circuit:flaky",
        "{myapp:custom:myapp:circuit:flaky}",
    ),
    "policy-case-matters": ("tdk", "tdk:Circuit:flaky", "{tdk:custom:tdk:Circuit:flaky}"),
    "rest-with-colons": ("tdk", "tdk:rate_limit:a:b:c", "{tdk:a:b:c}:rate_limit"),
}


@pytest.mark.parametrize(
    ("prefix", "key", "expected"),
    [pytest.param(*case, id=name) for name, case in KEYS.items()],
)
def test_key_mapping(prefix: str, key: str, expected: str) -> None:
    """``store.key()``: ``tdk:<policy>:<rest>`` with a runner policy (``rate_limit``,
    ``circuit``) -> ``{<prefix>:<rest>}:<policy>``; any other key -> ``{<prefix>:custom:<key>}``
    (the whole key, no suffix)."""
    store = RedisStore(aioredis.Redis(), prefix=prefix)
    assert store.key(key) == expected


def test_distinct_keys_map_to_distinct_redis_keys() -> None:
    """Keys that differ map to Redis keys that differ, runner's and custom alike."""
    keys = [
        "tdk:circuit:a",
        "tdk:rate_limit:a",
        "tdk:custom:a",
        "custom:a",
        "a",
        "tdk:circuit:custom:a",
        "{tdk:custom:a}",
        "tdk:a}:circuit",
        "app:circuit:a",
        "tdk:circuit",
        "tdk:circuit:",
        "",
    ]
    store = RedisStore(aioredis.Redis())
    mapped = [store.key(key) for key in keys]
    assert len(set(mapped)) == len(keys), dict(zip(keys, mapped, strict=True))


class Plain:
    """A custom store that says nothing about its status."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        return await self.inner.update(key, change, *args)


class Odd(Plain):
    """A custom store whose status is no text."""

    status = 3


class Reporting(Plain):
    """A custom store that reports a status of its own."""

    status = "shared"


StoreFactory = Callable[[str, str], Any]
STATS_STORES: dict[str, tuple[StoreFactory, str]] = {
    "default": (lambda up, down: None, "local"),
    "in-memory": (lambda up, down: InMemoryStore(), "local"),
    "custom-without-status": (lambda up, down: Plain(), "custom"),
    "custom-status-not-text": (lambda up, down: Odd(), "custom"),
    "custom-status": (lambda up, down: Reporting(), "shared"),
    "redis-answering": (lambda up, down: RedisStore(up), "shared"),
    "redis-unreachable": (lambda up, down: RedisStore(down), "fallback"),
}


@pytest.mark.parametrize(
    ("make", "expected"), [pytest.param(*case, id=name) for name, case in STATS_STORES.items()]
)
@in_loop
async def test_runner_stats_store(
    redis_url: str, unused_url: str, make: StoreFactory, expected: str
) -> None:
    """``RunnerStats.store`` after one call: where the state lived (``make`` gets the URL of
    a server that answers and of a port where nothing does)."""
    store = make(redis_url, unused_url)
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=5, period=10.0), store=store)
    try:
        assert (await runner.run("ping")).is_success
        stats = runner.stats()
        assert isinstance(stats, RunnerStats)
        assert stats.store == expected
    finally:
        if isinstance(store, RedisStore):
            await store.aclose()


def test_runner_stats_store_defaults_to_local() -> None:
    """A snapshot built without a store says ``"local"``."""
    stats = RunnerStats(calls=0, attempts=0, retries=0, rejections={}, circuits={})
    assert stats.store == "local"


@in_loop
async def test_a_client_that_decodes_answers_works_too(redis_url: str) -> None:
    """A client made with ``decode_responses=True`` gives the scripts' state names as text:
    the answers are the same."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    async with contextlib.aclosing(RedisStore(client)) as store:
        verdict = await store.update("tdk:circuit:t", acquire, breaker, time.monotonic, None)
        assert verdict == (0, CLOSED, CLOSED, 0, None)
        moved = await store.update("tdk:circuit:t", record, breaker, time.monotonic, 0, FAILURE)
        assert moved == (CLOSED, OPEN, 1)
        assert await store.update("tdk:custom:n", increment, 4) == 4
        assert await client.get("{tdk:custom:tdk:custom:n}") == "4"


# ----------------------------------------------------------- 5. one event loop after another


def connected_clients(port: int) -> int:
    """How many clients the server on ``port`` has, counting the one asking."""
    return command(port, "CLIENT", "LIST").count(b"id=")


def test_a_store_made_from_a_url_serves_one_loop_after_another(
    redis_url: str, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``asyncio.run()`` per request with one store: every call of every loop is counted on
    Redis, nothing falls back and nothing is logged; the connections of each loop are closed
    when ``asyncio.run()`` ends it."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(redis_url)
    runner = ToolRunner(
        WORK_TOOLKIT, rate_limit=RateLimit(calls=100, period=60.0, scope="loops"), store=store
    )
    key = store.key("tdk:rate_limit:scope:loops/100/60.0")

    async def request() -> tuple[list[bool], str]:
        results = await asyncio.gather(*(runner.run("work") for _ in range(3)))
        return [result.is_success for result in results], store.status

    for _ in range(5):
        assert asyncio.run(request()) == ([True] * 3, "shared")
        for _ in range(200):  # (the server notices closed connections in its own time)
            if connected_clients(redis_server.port) == 1:
                break
            time.sleep(0.01)
        assert connected_clients(redis_server.port) == 1  # only the one asking
    assert command(redis_server.port, "ZCARD", key) == b":15\r\n"
    assert not warnings_logged(caplog)


def test_a_client_given_and_used_from_another_event_loop_falls_back(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client given to the store is used as it is: its connections belong to the loop
    that has ended, and calls from the next loop never raise (per-process state; one
    WARNING)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(aioredis.Redis.from_url(redis_url))
    runner = ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=50, period=1.0), store=store)

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
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Closed at the end of one loop (as it should be), the store serves the next one."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    store = RedisStore(redis_url)
    runner = ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=3, period=30.0), store=store)

    async def two_calls() -> list[bool]:
        try:
            return [(await runner.run("work")).is_success for _ in range(2)]
        finally:
            await store.aclose()

    assert asyncio.run(two_calls()) + asyncio.run(two_calls()) == [True, True, True, False]
    assert outages(caplog) == 0


# ----------------------------------------------------------------------- the fixture itself


def test_the_server_can_stop_and_start_on_its_port(redis_server: RedisServer) -> None:
    """The support server stops (its port refuses) and starts again on the same port."""
    redis_server.start()
    port = redis_server.port
    assert command(port, "PING").startswith(b"+PONG")
    redis_server.restart()
    assert redis_server.port == port
    assert command(port, "PING").startswith(b"+PONG")
    redis_server.stop()
    assert not redis_server.running
    with pytest.raises(OSError):
        command(port, "PING", timeout=0.5)
    redis_server.start()
    assert redis_server.running


def test_the_support_module_is_real(tmp_path: Path) -> None:
    """(The servers these tests use are real: a second one answers PING on its own port.)"""
    with running_redis(tmp_path) as second:
        assert command(second.port, "PING") == b"+PONG\r\n"
