"""``RedisStore``'s state on a real redis-server: custom changes through ``WATCH``/``MULTI``
(bounded retries: contention raises, it is no outage), the Lua scripts answering exactly as the
Python changes they stand for, and state planted on the server (admission times in the future,
nonsense in a circuit's hash, keys of the wrong type, custom keys without JSON): read as sane
state or replaced, that key's problem and never an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from _redis_support import RedisServer, command
from _redis_tools import WORK_TOOLKIT, FakeClock, increment, outage_warnings, outages, replacements
from _runner_support import in_loop

from tdk import CircuitBreaker, RateLimit, ToolRunner
from tdk.errors import ErrorKind
from tdk.runner import CircuitState, InMemoryStore, RedisStore
from tdk.runner._breaker import FAILURE, NEUTRAL, SUCCESS, acquire, peek, record
from tdk.runner._limiter import admit

CLOSED, OPEN, HALF_OPEN = CircuitState.CLOSED, CircuitState.OPEN, CircuitState.HALF_OPEN


# ---------------------------------------------------------------------------- custom changes


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


# ------------------------------------------------- the Lua scripts answer as the Python does


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


# --------------------------------------------------------------- state planted on the server


@in_loop
async def test_future_entries_count_as_now(redis_url: str) -> None:
    """Admission times planted in the future (a failover to a replica whose clock is
    behind) count as made now: the wait is at most the period, and the window frees."""
    store = RedisStore(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    try:
        key = store.key("tdk:rate_limit:work/1/0.3")
        far = (time.time() + 3600) * 1_000_000
        await client.zadd(key, {"planted": far})
        runner = ToolRunner(WORK_TOOLKIT, rate_limit=RateLimit(calls=1, period=0.3), store=store)
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
    redis_url: str, fields: dict[str, str], admitted: bool
) -> None:
    """Nonsense in a circuit's hash reads as zero; an opening in the future counts from now
    (so it half-opens after one reset timeout, not in an hour)."""
    store = RedisStore(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.hset(store.key("tdk:circuit:work"), mapping=fields)
        breaker = CircuitBreaker(failure_threshold=2, reset_timeout=0.3)
        runner = ToolRunner(WORK_TOOLKIT, circuit_breaker=breaker, store=store)
        assert (await runner.run("work")).is_success is admitted
        if not admitted:
            await asyncio.sleep(0.35)
            assert (await runner.run("work")).is_success  # the probe
    finally:
        await client.aclose()
        await store.aclose()


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
    redis_url: str,
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    state_key: str,
    plant: Callable[[int, str], None],
    held: str,
) -> None:
    """A key holding something else than its state is replaced by the script, atomically:
    the limit stays shared on Redis, nothing falls back, and one WARNING names the key, once
    however often it is planted again."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        runner = ToolRunner(
            WORK_TOOLKIT,
            rate_limit=RateLimit(calls=2, period=30.0),
            circuit_breaker=CircuitBreaker(failure_threshold=2),
            store=store,
        )
        redis_key = store.key(state_key)
        for _ in range(2):  # planted, then planted again
            await store.client.delete(store.key(LIMITER_KEY))
            plant(redis_server.port, redis_key)
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
    redis_url: str,
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    plant: Callable[[int, str], None],
    held: str,
) -> None:
    """A custom change's key that holds no JSON state reads as no state and is written
    afresh (one WARNING): no outage, no exception."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    async with contextlib.aclosing(RedisStore(redis_url)) as store:
        redis_key = store.key("jobs:1")
        plant(redis_server.port, redis_key)
        assert await store.update("jobs:1", increment, 1) == 1
        assert await store.update("jobs:1", increment, 1) == 2
        assert await store.client.get(redis_key) == b"2"
        assert store.status == "shared"
        assert outages(caplog) == 0
        assert replacements(caplog) == [
            f"Redis key {redis_key} held no state of this store ({held}): replaced; the other "
            "keys stay shared"
        ]
