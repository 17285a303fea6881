"""Shared scopes, a limiter that waits, and the tools a host may offer.

Tools that call one upstream share one quota and one circuit when their policies name the
same scope; a scope may name context fields, so that each user has their own. A limiter with
``max_wait`` waits for a slot instead of refusing a call a runner could simply delay.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import pytest
from _runner_support import FakeTime

from tdk import (
    CircuitBreaker,
    RateLimit,
    ToolContext,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import ErrorKind, UpstreamServerError
from tdk.runner import InMemoryStore

DOWN = {"github": False}


@tool(read_only=True)
async def list_repos(org: Annotated[str, "The organisation."] = "acme") -> str:
    """List repositories."""
    if DOWN["github"]:
        raise UpstreamServerError("GitHub is down", status_code=503)
    return org


@tool(read_only=True)
async def list_issues(repo: Annotated[str, "The repository."] = "tdk") -> str:
    """List issues."""
    if DOWN["github"]:
        raise UpstreamServerError("GitHub is down", status_code=503)
    return repo


@tool(read_only=True)
async def weather(city: Annotated[str, "The city."] = "Oslo") -> str:
    """Get the weather (another upstream)."""
    return city


TOOLKIT = Toolkit("apis", [list_repos, list_issues, weather])


@pytest.fixture(autouse=True)
def _github_up() -> None:
    DOWN["github"] = False


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run(runner: ToolRunner, name: str, context: ToolContext | None = None) -> ToolResult:
    return asyncio.run(runner.run(name, {}, context=context))


@pytest.mark.parametrize(
    "store", [pytest.param(None, id="in-process"), pytest.param("shared", id="via-update")]
)
def test_two_tools_with_one_scope_share_one_quota(store: str | None) -> None:
    runner = ToolRunner(
        TOOLKIT,
        rate_limit=RateLimit(calls=2, period=60.0, scope="github"),
        store=_Shared() if store else None,
        clock=FakeClock(),
    )
    runner.configure("weather", rate_limit=RateLimit(calls=2, period=60.0))  # its own
    kinds = [_run(runner, name).kind for name in ("list_repos", "list_issues", "list_repos")]
    assert kinds == [None, None, ErrorKind.TOOL_RUNTIME_RATE_LIMITED]
    assert _run(runner, "weather").is_success


class _Shared:
    """A store reached through ``update`` only, as a store shared by processes would be."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    async def update(self, key: str, change: Any, *args: Any) -> Any:
        return await self.inner.update(key, change, *args)


@pytest.mark.parametrize(
    "store", [pytest.param(None, id="in-process"), pytest.param("shared", id="via-update")]
)
def test_two_tools_with_one_scope_share_one_circuit(store: str | None) -> None:
    clock = FakeClock()
    runner = ToolRunner(
        TOOLKIT,
        circuit_breaker=CircuitBreaker(failure_threshold=2, reset_timeout=30.0, scope="github"),
        clock=clock,
        store=_Shared() if store else None,
    )
    runner.configure("weather", circuit_breaker=CircuitBreaker(failure_threshold=2))  # its own
    DOWN["github"] = True
    assert _run(runner, "list_repos").kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert _run(runner, "list_issues").kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    refused = _run(runner, "list_repos")  # opened by the two failures of two tools
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert _run(runner, "weather").is_success  # another circuit
    names = [d.name for d in asyncio.run(runner.available(TOOLKIT))]
    assert names == ["weather"]
    clock.now += 31  # half-open: a probe may go
    assert [d.name for d in asyncio.run(runner.available(TOOLKIT.definitions()))] == [
        "list_repos",
        "list_issues",
        "weather",
    ]


def test_per_user_scopes_are_separate() -> None:
    runner = ToolRunner(
        TOOLKIT, rate_limit=RateLimit(calls=1, period=60.0, scope="github:{user_id}")
    )
    ada, bob = ToolContext(user_id="ada"), ToolContext(user_id="bob")
    assert _run(runner, "list_repos", ada).is_success
    assert _run(runner, "list_issues", bob).is_success  # bob's own quota
    assert _run(runner, "list_issues", ada).kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED


def test_a_scope_may_name_metadata() -> None:
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=60.0, scope="gh:{org}"))
    acme, globex = ToolContext(metadata={"org": "acme"}), ToolContext(metadata={"org": "globex"})
    assert _run(runner, "list_repos", acme).is_success
    assert _run(runner, "list_repos", globex).is_success
    assert _run(runner, "list_issues", acme).kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED


@pytest.mark.parametrize(
    ("context", "missing_metadata", "missing_user_id"),
    [
        pytest.param(None, ["org"], True, id="no-context"),
        pytest.param(ToolContext(user_id="ada"), ["org"], False, id="no-metadata"),
        pytest.param(ToolContext(metadata={"org": "acme"}), None, True, id="no-user-id"),
    ],
)
def test_a_scope_field_missing_from_the_context_is_a_missing_requirement(
    context: ToolContext | None, missing_metadata: list[str] | None, missing_user_id: bool
) -> None:
    runner = ToolRunner(
        TOOLKIT,
        circuit_breaker=CircuitBreaker(scope="{org}"),
        rate_limit=RateLimit(calls=5, period=1.0, scope="gh:{user_id}"),
    )
    result = _run(runner, "list_repos", context)
    assert result.kind == ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert result.attempts == 0
    assert result.error is not None
    assert result.error.details.get("missing_metadata") == missing_metadata
    assert result.error.details["missing_user_id"] is missing_user_id
    # Judged for a context that lacks the field, the circuit does not hide the tool.
    assert len(asyncio.run(runner.available(TOOLKIT, context=context))) == 3


@pytest.mark.parametrize(
    "scope",
    ["", "  ", "{user.id}", "{0}", "{}", "{org!r}", "{org:>10}", "gh:{", 42],
)
def test_a_scope_that_is_not_a_template_of_context_fields_is_refused(scope: Any) -> None:
    with pytest.raises(ValueError, match="scope"):
        RateLimit(calls=1, period=1.0, scope=scope)
    with pytest.raises(ValueError, match="scope"):
        CircuitBreaker(scope=scope)


def test_a_burst_waits_within_max_wait() -> None:
    """Five calls at once against two per 0.3 s, waiting up to 1 s: all succeed, the last
    after two more windows."""
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=2, period=0.3, max_wait=1.0))

    async def burst() -> tuple[list[ToolResult], float]:
        start = time.monotonic()
        results = await runner.run_many([("weather", {}) for _ in range(5)])
        return results, time.monotonic() - start

    results, took = asyncio.run(burst())
    assert all(r.is_success for r in results)
    assert took >= 0.6
    assert [r.attempts for r in results] == [1] * 5
    assert max(r.duration_ms for r in results) >= 600  # a waited call counts its wait


def test_a_wait_beyond_max_wait_is_still_refused() -> None:
    """A call the limiter would admit only after ``max_wait`` is refused at once: no wait
    that could not end in admission (counted on a clock the test keeps, not timed)."""
    fake = FakeTime()
    runner = ToolRunner(
        TOOLKIT,
        rate_limit=RateLimit(calls=1, period=60.0, max_wait=0.5),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert _run(runner, "weather").is_success
    refused = _run(runner, "weather")
    assert fake.sleeps == []
    assert refused.kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    assert refused.retry_after_ms == 60_000


def test_no_wait_past_the_deadline() -> None:
    runner = ToolRunner(
        TOOLKIT, deadline=0.1, rate_limit=RateLimit(calls=1, period=0.5, max_wait=1.0)
    )
    assert _run(runner, "weather").is_success
    refused = _run(runner, "weather")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED


def test_max_wait_must_be_seconds() -> None:
    with pytest.raises(ValueError, match="max_wait"):
        RateLimit(calls=1, period=1.0, max_wait=-1)


def test_available_keeps_what_has_no_circuit_here() -> None:
    """A tool the runner does not run, or runs without a circuit, is always offered."""
    other = Toolkit("other", [weather]).definitions()
    runner = ToolRunner(Toolkit("apis", [list_repos]))
    foreign = [*TOOLKIT.definitions(), *other]
    assert asyncio.run(runner.available(foreign)) == foreign


def test_available_judges_a_per_user_circuit_for_the_user() -> None:
    runner = ToolRunner(
        TOOLKIT, circuit_breaker=CircuitBreaker(failure_threshold=1, scope="gh:{user_id}")
    )
    ada, bob = ToolContext(user_id="ada"), ToolContext(user_id="bob")
    DOWN["github"] = True
    assert not _run(runner, "list_repos", ada).is_success  # opens ada's circuit
    offered = {
        who: [d.name for d in asyncio.run(runner.available(TOOLKIT, context=ctx))]
        for who, ctx in (("ada", ada), ("bob", bob))
    }
    # The runner's one breaker applies to every tool: ada's circuit is open for all of them.
    assert offered == {"ada": [], "bob": ["list_repos", "list_issues", "weather"]}


def test_a_half_open_circuit_with_its_probe_out_is_not_offered() -> None:
    """After the reset timeout one probe may go; while it is out, the tool is not offered."""
    clock = FakeClock()
    state = {"fail": True}

    async def scenario() -> list[list[str]]:
        gate = asyncio.Event()

        @tool(read_only=True)
        async def gated() -> str:
            """Fail while told to; else wait for the gate."""
            if state["fail"]:
                raise UpstreamServerError("down", status_code=503)
            await gate.wait()
            return "ok"

        toolkit = Toolkit("g", [gated, weather])
        runner = ToolRunner(
            toolkit,
            circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=10.0),
            clock=clock,
        )
        await runner.run("gated", {})  # opens the circuit
        seen = [[d.name for d in await runner.available(toolkit)]]
        clock.now += 11  # due to half-open: offered again
        seen.append([d.name for d in await runner.available(toolkit)])
        state["fail"] = False
        probe = asyncio.create_task(runner.run("gated", {}))
        await asyncio.sleep(0.01)  # the probe is out, waiting at the gate
        seen.append([d.name for d in await runner.available(toolkit)])
        gate.set()
        assert (await probe).value == "ok"  # and its success closes the circuit
        seen.append([d.name for d in await runner.available(toolkit)])
        return seen

    assert asyncio.run(scenario()) == [
        ["weather"],
        ["gated", "weather"],
        ["weather"],
        ["gated", "weather"],
    ]


def test_per_user_state_is_kept_for_many_users() -> None:
    """Thousands of users each get their own quota (the plans of formatted scopes are made
    again when there are too many to keep)."""
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=60.0, scope="gh:{user_id}"))

    async def many() -> list[ToolResult]:
        users = [ToolContext(user_id=f"u{n}") for n in range(4_200)]
        return [await runner.run("weather", {}, context=user) for user in users]

    assert all(result.is_success for result in asyncio.run(many()))


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_metadata_value_without_text_is_a_missing_field() -> None:
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=1.0, scope="{org}"))
    result = _run(runner, "weather", ToolContext(metadata={"org": _Unprintable()}))
    assert result.kind == ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT


def test_a_wait_that_ends_past_the_deadline_runs_no_attempt() -> None:
    """The runner never starts a wait that would end past the deadline; a wait that lasts
    longer than asked (a slow machine) still stops the call at the deadline, which runs on
    the monotonic clock."""
    clock = FakeClock()

    async def slow_sleep(seconds: float) -> None:
        clock.now += seconds
        await asyncio.sleep(seconds + 0.5)  # the machine stalled during the wait

    runner = ToolRunner(
        TOOLKIT,
        deadline=0.5,
        rate_limit=RateLimit(calls=1, period=0.2, max_wait=0.4),
        clock=clock,
        sleep=slow_sleep,
    )

    async def twice() -> ToolResult:
        await runner.run("weather", {})
        return await runner.run("weather", {})

    late = asyncio.run(twice())
    assert (
        late.kind == ErrorKind.TOOL_RUNTIME_TIMEOUT
        or late.kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(("c", "a:b"), ("b:c", "a"), id="a-separator-in-a-value"),
        pytest.param(("u" * 200 + "1", "o"), ("u" * 200 + "2", "o"), id="long-values"),
        pytest.param(("v", 1), ("v", "1"), id="a-number-and-its-text"),
    ],
)
def test_different_values_never_share_a_scope(
    first: tuple[str, Any], second: tuple[str, Any]
) -> None:
    runner = ToolRunner(
        TOOLKIT, rate_limit=RateLimit(calls=1, period=60.0, scope="gh:{org}:{user_id}")
    )

    def context(user: str, org: Any) -> ToolContext:
        return ToolContext(user_id=user, metadata={"org": org})

    assert _run(runner, "weather", context(*first)).is_success
    assert _run(runner, "weather", context(*second)).is_success


def test_a_user_named_like_a_fixed_scope_does_not_share_it() -> None:
    runner = ToolRunner(TOOLKIT)
    runner.configure("weather", rate_limit=RateLimit(calls=1, period=60.0, scope="github"))
    runner.configure("list_repos", rate_limit=RateLimit(calls=1, period=60.0, scope="{user_id}"))
    assert _run(runner, "list_repos", ToolContext(user_id="github")).is_success
    assert _run(runner, "weather").is_success


def test_a_metadata_value_of_none_is_missing() -> None:
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=1.0, scope="{org}"))
    result = _run(runner, "weather", ToolContext(metadata={"org": None}))
    assert result.kind == ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT


class _HostileText(str):
    def __format__(self, spec: str) -> str:
        raise RuntimeError("no format")


class _GivesHostileText:
    def __str__(self) -> str:
        return _HostileText("x")


def test_a_metadata_value_with_hostile_text_is_used_as_plain_text() -> None:
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=1.0, scope="{org}"))
    context = ToolContext(metadata={"org": _GivesHostileText()})
    assert _run(runner, "weather", context).is_success
    assert asyncio.run(runner.available(TOOLKIT, context=context)) == TOOLKIT.definitions()


def test_tools_sharing_a_scope_with_different_limits_keep_their_own() -> None:
    """One quota is shared by the tools whose limits are equal; a looser limit on the same
    scope never erases a stricter one's window."""
    runner = ToolRunner(TOOLKIT)
    runner.configure("list_repos", rate_limit=RateLimit(calls=2, period=60.0, scope="s"))
    runner.configure("weather", rate_limit=RateLimit(calls=100, period=0.01, scope="s"))
    kinds = []
    for _ in range(3):
        kinds.append(_run(runner, "list_repos").kind)
        _run(runner, "weather")
    assert kinds == [None, None, ErrorKind.TOOL_RUNTIME_RATE_LIMITED]


def test_idle_per_user_state_does_not_grow_without_bound() -> None:
    store = InMemoryStore()
    runner = ToolRunner(
        TOOLKIT,
        rate_limit=RateLimit(calls=5, period=0.001, scope="gh:{user_id}"),
        circuit_breaker=CircuitBreaker(scope="gh:{user_id}"),
        store=store,
    )

    async def many() -> None:
        for n in range(10_000):
            await runner.run("weather", {}, context=ToolContext(user_id=f"u{n}"))
            await runner.available(TOOLKIT, context=ToolContext(user_id=f"other{n}"))

    asyncio.run(many())
    assert len(store._states) < 10_000  # idle users' state is dropped, questions make none


def test_a_call_waiting_for_the_limiter_does_not_run_once_the_circuit_opened() -> None:
    """Calls admitted by a closed circuit and queued behind the limiter: once failures open
    the circuit, the ones still waiting are refused instead of run."""
    bodies: list[int] = []

    @tool(read_only=True)
    async def failing(n: Annotated[int, "A number."]) -> int:
        """Always fails."""
        bodies.append(n)
        raise UpstreamServerError("down", status_code=503)

    runner = ToolRunner(
        Toolkit("f", [failing]),
        rate_limit=RateLimit(calls=1, period=0.02, max_wait=5.0),
        circuit_breaker=CircuitBreaker(failure_threshold=2, reset_timeout=60.0),
    )
    results = asyncio.run(runner.run_many([("failing", {"n": n}) for n in range(8)]))
    assert len(bodies) == 2
    assert sum(r.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN for r in results) == 6


def test_forgetting_idle_users_never_splits_a_shared_quota() -> None:
    """Tools sharing a fixed scope keep one quota, however many users come and go through a
    per-user circuit of one of them."""
    clock = FakeClock()
    runner = ToolRunner(TOOLKIT, clock=clock)
    quota = RateLimit(calls=2, period=1.0, scope="github")
    runner.configure(
        "list_repos", rate_limit=quota, circuit_breaker=CircuitBreaker(scope="u:{user_id}")
    )
    runner.configure("list_issues", rate_limit=quota)

    async def scenario() -> int:
        assert (await runner.run("list_issues", {})).is_success
        for n in range(4_100):  # more users than the runner keeps plans for
            clock.now += 2.0
            assert (
                await runner.run("list_repos", {}, context=ToolContext(user_id=f"u{n}"))
            ).is_success
        clock.now += 2.0
        admitted = 0
        for name in ("list_repos", "list_issues", "list_repos", "list_issues"):
            result = await runner.run(name, {}, context=ToolContext(user_id="x"))
            admitted += result.is_success
        return admitted

    assert asyncio.run(scenario()) == 2


def test_a_long_value_and_its_digest_are_different_values() -> None:
    import hashlib

    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=60.0, scope="{user_id}"))
    victim = "v" * 300
    forged = "sha256:" + hashlib.sha256(victim.encode()).hexdigest()
    assert _run(runner, "weather", ToolContext(user_id=victim)).is_success
    assert _run(runner, "weather", ToolContext(user_id=forged)).is_success


def test_a_call_waiting_for_the_limiter_does_not_run_after_its_circuit_changed() -> None:
    """Admitted by a closed circuit, queued behind the limiter past the reset timeout: the
    circuit opened (and half-opened) meanwhile, so the call is refused, not run."""
    clock = FakeClock()
    ran: list[int] = []

    async def scenario() -> ToolResult:
        gate, woke = asyncio.Event(), asyncio.Event()

        @tool(read_only=True)
        async def flaky(n: Annotated[int, "A number."]) -> int:
            """The first call fails once released; the others succeed."""
            ran.append(n)
            if n == 0:
                await gate.wait()
                raise UpstreamServerError("down", status_code=503)
            return n

        async def sleep(seconds: float) -> None:
            await woke.wait()
            clock.now += seconds

        runner = ToolRunner(
            Toolkit("f", [flaky]),
            clock=clock,
            sleep=sleep,
            circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=0.5),
            rate_limit=RateLimit(calls=1, period=2.0, max_wait=5.0),
        )
        first = asyncio.create_task(runner.run("flaky", {"n": 0}))
        while not ran:
            await asyncio.sleep(0)
        second = asyncio.create_task(runner.run("flaky", {"n": 1}))
        for _ in range(5):
            await asyncio.sleep(0)
        gate.set()
        await first  # opens the circuit
        woke.set()  # the second call's wait ends, past the reset timeout
        return await second

    result = asyncio.run(scenario())
    assert ran == [0]
    assert result.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


def test_available_reads_the_breakers_own_scope() -> None:
    """A limiter kept per user and a breaker kept per tool: without a context,
    ``available()`` still sees the tool's open circuit."""

    @tool(idempotent=True)
    async def failing(x: Annotated[int, "A value."]) -> int:
        """Fail as a server does."""
        raise UpstreamServerError("down", status_code=503)

    toolkit = Toolkit("k", [failing])
    runner = ToolRunner(
        toolkit,
        rate_limit=RateLimit(calls=100, period=1.0, scope="u:{user_id}"),
        circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=60.0),
    )
    asyncio.run(runner.run("failing", {"x": 1}, context=ToolContext(user_id="a")))
    assert asyncio.run(runner.available(toolkit)) == []
    assert asyncio.run(runner.available(toolkit, context=ToolContext(user_id="a"))) == []


def test_a_shared_per_user_quota_survives_a_sweep_of_idle_users() -> None:
    """Two tools share ``RateLimit(1, 100 s, scope="u:{user_id}")``: after thousands of other
    users made one tool forget its idle state, a user still gets one call in the window
    across both tools, not one per tool."""

    @tool(read_only=True)
    async def first(x: Annotated[int, "A value."]) -> int:
        """Echo."""
        return x

    @tool(read_only=True)
    async def second(x: Annotated[int, "A value."]) -> int:
        """Echo."""
        return x

    now = [0.0]
    runner = ToolRunner(
        Toolkit("k", [first, second]),
        rate_limit=RateLimit(calls=1, period=100.0, scope="u:{user_id}"),
        clock=lambda: now[0],
    )
    user = ToolContext(user_id="X")

    async def scenario() -> list[bool]:
        assert (await runner.run("second", {"x": 1}, context=user)).is_success
        now[0] = 200.0  # X is idle, and the window has passed
        for n in range(4097):
            await runner.run("first", {"x": 1}, context=ToolContext(user_id=f"u{n}"))
        return [
            (await runner.run(name, {"x": 1}, context=user)).is_success
            for name in ("first", "second", "first", "second")
        ]

    assert asyncio.run(scenario()) == [True, False, False, False]
