"""``RedisStore``: limiter and circuit state shared between processes, on a real redis-server.

Every test talks to a ``redis-server`` this module starts on a free port of 127.0.0.1 (see
``tests/runner/_redis_support.py``); nothing is faked and nothing skips: without a server that
answers, the tests fail. Covered: one quota for four worker processes, one circuit for two
runners (and the generations that keep stale reports out, the quiet successes that are not
reported), hash-tagged keys that expire when idle, the per-process fallback during an outage
(one WARNING, ``stats().store``) and the way back, custom changes through ``WATCH``/``MULTI``
(bounded retries: contention raises, it is no outage), the constructor's checks, and the
Lua scripts answering exactly as the Python changes they stand for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from _redis_support import RedisServer, command, free_port, running_redis
from _runner_support import in_loop

import tdk
from tdk import CircuitBreaker, RateLimit, Toolkit, ToolRunner, tool
from tdk.errors import ErrorKind, UpstreamServerError
from tdk.runner import CircuitState, InMemoryStore, RedisStore, RunnerStats
from tdk.runner._breaker import FAILURE, NEUTRAL, SUCCESS, acquire, peek, record
from tdk.runner._limiter import admit
from tdk.runner._redis_scripts import ADMIT

ROOT = Path(tdk.__file__).resolve().parents[1]
CLOSED, OPEN, HALF_OPEN = CircuitState.CLOSED, CircuitState.OPEN, CircuitState.HALF_OPEN
OUTAGE = "Redis failed ("
ANSWERS_AGAIN = "Redis answers again: runner state is shared again"
ADMIT_SHA = hashlib.sha1(ADMIT.encode()).hexdigest()
#: A key in the form the store writes: ``{<prefix>:<scope or tool>}:<policy>``.
KEY_FORM = re.compile(r"^\{(?P<prefix>[^{}:]+):[^{}]+\}:(?P<policy>rate_limit|circuit)$")

# ------------------------------------------------------------------------------ the server


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the module (started once: the suite stays fast)."""
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the module's server, running (a test may have stopped it) and empty."""
    redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def unused_url() -> str:
    """A ``redis://`` URL of a port of 127.0.0.1 nothing listens on."""
    return f"redis://127.0.0.1:{free_port()}/0"


# ---------------------------------------------------------------------------- the toolkit

UPSTREAM = {"down": False, "calls": 0}


@pytest.fixture(autouse=True)
def _upstream_up() -> None:
    UPSTREAM.update(down=False, calls=0)


@tool(read_only=True)
async def ping() -> str:
    """Answer pong."""
    UPSTREAM["calls"] += 1
    return "pong"


@tool(read_only=True)
async def flaky() -> str:
    """Call an upstream that fails with a 503 while it is down."""
    UPSTREAM["calls"] += 1
    if UPSTREAM["down"]:
        raise UpstreamServerError("the upstream is down", status_code=503)
    return "ok"


GATE: dict[str, asyncio.Event] = {}


@tool(read_only=True)
async def slow() -> str:
    """Succeed once the test opens the gate."""
    await GATE["open"].wait()
    return "late"


TOOLKIT = Toolkit("redis_tests", [ping, flaky, slow])


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The WARNING records of an outage that ``caplog`` holds."""
    return [
        r
        for r in caplog.records
        if r.name == "tdk.runner"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith(OUTAGE)
    ]


def returns(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The INFO records of Redis answering again."""
    return [
        r
        for r in caplog.records
        if r.name == "tdk.runner" and r.levelno == logging.INFO and r.getMessage() == ANSWERS_AGAIN
    ]


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


# ----------------------------------------------------------------------- 4. Redis outages


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


# -------------------------------------------------------------------- 5. custom changes


def increment(state: int | None, by: int) -> tuple[int, int]:
    """A custom change: add ``by`` to a counter (JSON: a number)."""
    total = (state or 0) + by
    return total, total


@in_loop
async def test_a_custom_change_runs_on_json_state(redis_url: str) -> None:
    """A plain function's state is stored as JSON under the mapped key."""
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        assert await store.update("tdk:custom:thing", increment, 2) == 2
        assert await store.update("tdk:custom:thing", increment, 3) == 5
        assert await store.client.get("{tdk:custom:tdk:custom:thing}") == b"5"
        assert store.status == "shared"


@pytest.mark.parametrize(
    "tasks", [pytest.param(10, id="10-tasks"), pytest.param(50, id="50-tasks")]
)
@in_loop
async def test_concurrent_custom_changes_are_all_counted(
    redis_url: str, tasks: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Many tasks increment one counter at once: WATCH/MULTI retries the losers, and the
    count in Redis is exact (no increment lands in per-process state, no WARNING)."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        answers = await asyncio.gather(
            *(store.update("tdk:custom:counter", increment, 1) for _ in range(tasks))
        )
        assert await store.client.get("{tdk:custom:tdk:custom:counter}") == str(tasks).encode()
        assert sorted(answers) == list(range(1, tasks + 1))
        assert store.status == "shared"
        assert not outage_warnings(caplog)


@dataclasses.dataclass
class Pair:
    """A dataclass state."""

    left: int
    right: str


@pytest.mark.parametrize(
    ("state", "read_back"),
    [
        pytest.param({"n": 1, "tags": ["a"]}, {"n": 1, "tags": ["a"]}, id="dict"),
        pytest.param(deque([1.5, 2.5]), [1.5, 2.5], id="deque-as-list"),
        pytest.param((1, 2), [1, 2], id="tuple-as-list"),
        pytest.param(frozenset({7}), [7], id="frozenset-as-list"),
        pytest.param(Pair(1, "x"), {"left": 1, "right": "x"}, id="dataclass-as-dict"),
        pytest.param({1: "a"}, {"1": "a"}, id="int-keys-as-text"),
        pytest.param(None, None, id="none"),
    ],
)
@in_loop
async def test_custom_state_goes_through_json(redis_url: str, state: Any, read_back: Any) -> None:
    """What a change stores is what JSON makes of it: the next change sees that."""
    seen: list[Any] = []

    def put(_: Any, value: Any) -> tuple[Any, str]:
        return value, "put"

    def look(current: Any) -> tuple[Any, None]:
        seen.append(current)
        return current, None

    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        assert await store.update("tdk:custom:json", put, state) == "put"
        await store.update("tdk:custom:json", look)
        assert seen == [read_back]


@in_loop
async def test_a_state_json_cannot_hold_raises_and_writes_nothing(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A state with an object JSON has no rule for: ``TypeError`` from ``update`` (a bug of
    the change, not an outage: no fallback, no WARNING), and the key stays as it was."""
    caplog.set_level(logging.INFO, logger="tdk.runner")

    def hold_object(_: Any) -> tuple[Any, str]:
        return {"handle": object()}, "never"

    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        await store.update("tdk:custom:odd", increment, 1)
        with pytest.raises(TypeError, match="a object cannot be stored as JSON"):
            await store.update("tdk:custom:odd", hold_object)
        assert await store.client.get("{tdk:custom:tdk:custom:odd}") == b"1"
        assert store.status == "shared"
        assert not outage_warnings(caplog)
        assert await store.update("tdk:custom:odd", increment, 1) == 2  # still usable


@in_loop
async def test_a_key_that_keeps_changing_raises_after_bounded_retries(
    redis_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another client writes the key every time the change runs: after 32 conflicts in a row
    ``update`` raises ``RuntimeError``. Contention is no outage: no fallback, no WARNING, the
    store stays shared (and usable). Between tries, a jittered pause that doubles from 1 ms
    up to 0.1 s."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    calls = []
    pauses: list[tuple[float, float]] = []
    uniform = random.uniform

    def spy(low: float, high: float) -> float:
        pauses.append((low, high))
        return uniform(low, high)

    monkeypatch.setattr(random, "uniform", spy)
    with redis.Redis.from_url(redis_url) as rival:

        def contested(state: int | None) -> tuple[int, int]:
            calls.append(state)
            rival.incr("{tdk:custom:tdk:custom:contested}")
            return increment(state, 1)

        async with contextlib.aclosing(RedisStore(redis_url)) as store:
            with pytest.raises(RuntimeError, match="changed 32 times while this change was"):
                await store.update("tdk:custom:contested", contested)
            assert len(calls) == 32  # 32 tries on Redis, none in process
            assert calls == [None, *range(1, 32)]  # each try read the rival's last write
            assert rival.get("{tdk:custom:tdk:custom:contested}") == b"32"
            assert pauses == [(0, min(0.001 * 2**n, 0.1)) for n in range(32)]
            assert store.status == "shared"
            assert not outage_warnings(caplog)
            assert await store.update("tdk:custom:contested", increment, 1) == 33


@in_loop
async def test_distinct_state_keys_hold_distinct_states(redis_url: str) -> None:
    """``update`` keys that differ only before their first ``:`` are different keys, as in
    ``InMemoryStore``: their states must not be shared."""
    keys = ["tdk:custom:thing", "app:custom:thing", "x:y", "tdk:state:x:y"]
    in_memory = InMemoryStore()
    expected = [await in_memory.update(key, increment, 1) for key in keys]
    assert expected == [1, 1, 1, 1]
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        answers = [await store.update(key, increment, 1) for key in keys]
        assert answers == expected, {key: store.key(key) for key in keys}


# ---------------------------------------------------------------------- 6. unit tables

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


# ---------------------------------------------- 7. the Lua scripts answer as the Python does


class FakeClock:
    """The in-memory side's clock: moved by the sequences' sleeps only."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Op = tuple[Any, ...]
LONG = (RateLimit(calls=2, period=60.0), CircuitBreaker(failure_threshold=2, reset_timeout=60.0))
SHORT = (RateLimit(calls=2, period=0.3), CircuitBreaker(failure_threshold=1, reset_timeout=0.3))
TWO_PROBES = (
    RateLimit(calls=2, period=0.3),
    CircuitBreaker(failure_threshold=1, reset_timeout=0.3, half_open_max_calls=2),
)
#: Waits answered by the two stores may differ by the real time the operations take.
WAIT_TOLERANCE = 0.1

SEQUENCES: dict[str, tuple[tuple[RateLimit, CircuitBreaker], list[Op]]] = {
    "limiter-admits-then-waits": (LONG, [("admit",)] * 3),
    "limiter-window-slides": (
        SHORT,
        [("admit",), ("admit",), ("admit",), ("sleep", 0.35), ("admit",), ("admit",), ("admit",)],
    ),
    "closed-success-changes-nothing": (
        LONG,
        [("acquire",), ("record", 0, SUCCESS), ("peek",), ("acquire",)],
    ),
    "closed-neutral-changes-nothing": (LONG, [("acquire",), ("record", 0, NEUTRAL), ("acquire",)]),
    "failures-open": (
        LONG,
        [
            ("acquire",),
            ("record", 0, FAILURE),
            ("acquire",),
            ("record", 0, FAILURE),
            ("acquire",),
            ("acquire-default",),
            ("peek",),
        ],
    ),
    "success-resets-failures": (
        LONG,
        [("record", 0, FAILURE), ("record", 0, SUCCESS), ("record", 0, SUCCESS), ("peek",)],
    ),
    "stale-reports-into-an-open-circuit": (
        LONG,
        [
            ("record", 0, FAILURE),
            ("record", 0, FAILURE),
            ("record", 0, SUCCESS),
            ("record", 1, SUCCESS),
            ("record", 1, FAILURE),
            ("acquire",),
        ],
    ),
    # The runner's own order: every report follows an acquire of the same store.
    "acquired-success-resets-failures": (
        LONG,
        [("acquire",), ("record", 0, FAILURE), ("record", 0, SUCCESS), ("record", 0, FAILURE)],
    ),
    "acquired-stale-success-into-an-open-circuit": (
        LONG,
        [
            ("acquire",),
            ("record", 0, FAILURE),
            ("record", 0, FAILURE),
            ("record", 0, SUCCESS),
            ("peek",),
        ],
    ),
    "probe-success-closes": (
        SHORT,
        [
            ("record", 0, FAILURE),
            ("peek",),
            ("sleep", 0.35),
            ("peek",),
            ("acquire",),
            ("acquire",),
            ("peek",),
            ("record", 2, SUCCESS),
            ("acquire",),
            ("peek",),
        ],
    ),
    "probe-failure-reopens": (
        SHORT,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire-default",),
            ("record", 2, FAILURE),
            ("record", 2, SUCCESS),
            ("acquire",),
        ],
    ),
    "earlier-generations-cannot-close": (
        SHORT,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire",),
            ("record", 0, SUCCESS),
            ("record", 1, SUCCESS),
            ("peek",),
            ("record", 2, SUCCESS),
        ],
    ),
    "neutral-probe-lets-another-in": (
        SHORT,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire",),
            ("record", 2, NEUTRAL),
            ("acquire",),
        ],
    ),
    "lost-probe-expires": (
        SHORT,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire", 0.2),
            ("acquire", 0.2),
            ("sleep", 0.25),
            ("peek",),
            ("acquire", 0.2),
            ("record", 2, SUCCESS),
            ("record", 3, SUCCESS),
        ],
    ),
    "two-probes": (
        TWO_PROBES,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire",),
            ("acquire",),
            ("acquire",),
            ("record", 2, NEUTRAL),
            ("acquire",),
            ("record", 2, SUCCESS),
            ("record", 2, SUCCESS),
        ],
    ),
    # A probe's neutral report while another probe (lifetime 5 s) is out: the key must live
    # past 2 x 0.3 s + 1 s, as long as the probe that is still out (2 x 5 s + 1 s).
    "neutral-report-keeps-a-long-probe": (
        TWO_PROBES,
        [
            ("record", 0, FAILURE),
            ("sleep", 0.35),
            ("acquire", 5.0),
            ("acquire", 5.0),
            ("record", 2, NEUTRAL),
            ("sleep", 1.75),
            ("acquire", 5.0),
            ("acquire", 5.0),
        ],
    ),
}


async def apply(
    store: InMemoryStore | RedisStore,
    policies: tuple[RateLimit, CircuitBreaker],
    op: Op,
    clock: FakeClock,
) -> Any:
    """Run one operation of a sequence through ``store``, as the runner would."""
    limit, breaker = policies
    name, *rest = op
    if name == "admit":
        return await store.update("tdk:rate_limit:seq", admit, limit, clock())
    if name == "acquire":
        lifetime = rest[0] if rest else None
        return await store.update("tdk:circuit:seq", acquire, breaker, clock, lifetime)
    if name == "acquire-default":  # without the probe lifetime: the reset timeout
        return await store.update("tdk:circuit:seq", acquire, breaker, clock)
    if name == "record":
        generation, outcome = rest
        return await store.update("tdk:circuit:seq", record, breaker, clock, generation, outcome)
    assert name == "peek"
    return await store.update("tdk:circuit:seq", peek, breaker, clock)


def alike(python: Any, lua: Any) -> bool:
    """Equal answers; waits (floats) equal within ``WAIT_TOLERANCE`` and both zero or not."""
    if isinstance(python, tuple) and isinstance(lua, tuple):
        return len(python) == len(lua) and all(map(alike, python, lua))
    if isinstance(python, float) and isinstance(lua, float):
        return (python == 0) == (lua == 0) and abs(python - lua) <= WAIT_TOLERANCE
    return type(python) is type(lua) and python == lua


@pytest.mark.parametrize(
    ("policies", "ops"),
    [
        pytest.param(
            *case,
            id=name,
        )
        for name, case in SEQUENCES.items()
    ],
)
@in_loop
async def test_the_scripts_answer_as_the_python_changes(
    redis_url: str, policies: tuple[RateLimit, CircuitBreaker], ops: list[Op]
) -> None:
    """The same sequence of admit/acquire/record/peek through ``InMemoryStore`` and
    ``RedisStore`` gives the same answers, step by step (generations from 0 on both)."""
    clock = FakeClock()
    in_memory = InMemoryStore()
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        for step, op in enumerate(ops):
            if op[0] == "sleep":
                await asyncio.sleep(op[1])
                clock.now += op[1]
                continue
            python = await apply(in_memory, policies, op, clock)
            lua = await apply(store, policies, op, clock)
            assert alike(python, lua), (step, op, python, lua)
        assert store.status == "shared"


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
