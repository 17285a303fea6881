"""ToolRunner retries: which errors, how many attempts, how long to wait, when to stop.

Time is fake: the runner reads ``FakeTime.clock`` and waits with ``FakeTime.sleep``, which
records each wait and moves the clock, so no test sleeps for real except the few that check
real time limits with waits of a few milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from _runner_support import FakeTime, in_loop

from tdk import (
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    Tool,
    ToolContext,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import (
    ContextRequiredToolError,
    ErrorCategory,
    ErrorKind,
    FatalToolError,
    NetworkTransportError,
    RetryableToolError,
    ToolBulkheadFullError,
    ToolCancelledError,
    ToolCircuitOpenError,
    ToolRateLimitedError,
    ToolTimeoutError,
    UpstreamAuthError,
    UpstreamBadRequestError,
    UpstreamNotFoundError,
    UpstreamRateLimitError,
    UpstreamServerError,
    UpstreamValidationError,
)
from tdk.runner import InMemoryStore
from tdk.testing import FakeClock

NO_JITTER = RetryPolicy(max_attempts=5, initial_delay=0.1, multiplier=2.0, jitter=False)


class Script:
    """A tool that raises the given errors in turn (None: succeed), counting its calls."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes: Iterator[BaseException | None] = iter(outcomes)
        self.calls = 0

        @tool(idempotent=True)  # (section 6 retries)
        async def flaky(n: Annotated[int, "A number."] = 1) -> int:
            """Fail as scripted, then succeed."""
            self.calls += 1
            outcome = next(self.outcomes, None)
            if outcome is not None:
                raise outcome
            return n

        self.tool: Tool[..., Any] = flaky


def runner_for(script: Script, time: FakeTime, **options: Any) -> ToolRunner:
    return ToolRunner(Toolkit("test", [script.tool]), clock=time.clock, sleep=time.sleep, **options)


def server_error(
    retry_after_ms: int | None = None, max_retry_attempts: int | None = None
) -> UpstreamServerError:
    return UpstreamServerError(
        "down",
        status_code=503,
        retry_after_ms=retry_after_ms,
        max_retry_attempts=max_retry_attempts,
    )


RETRIED = {
    "server_error": server_error,
    "upstream_rate_limit": lambda: UpstreamRateLimitError("slow down", status_code=429),
    "connection": lambda: NetworkTransportError(
        "no route", kind=ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE
    ),
    "transport_timeout": lambda: NetworkTransportError(
        "slow", kind=ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT
    ),
    "tool_timeout": lambda: ToolTimeoutError("too slow", timeout=1.0),
    "builtin_timeout": lambda: TimeoutError("socket"),
}


@pytest.mark.parametrize("make", RETRIED.values(), ids=RETRIED.keys())
@in_loop
async def test_transient_errors_are_retried_until_success(make: Any) -> None:
    """A retryable error of a retried category is retried with the same arguments."""
    script = Script(make(), make())
    time = FakeTime()
    result = await runner_for(script, time, retry=NO_JITTER).run("flaky", {"n": 7})
    assert result.is_success
    assert result.value == 7
    assert result.attempts == script.calls == 3
    assert time.sleeps == [0.1, 0.2]


NOT_RETRIED = {
    "model_retry": (lambda: RetryableToolError("other args", additional_prompt_content="x")),
    "context_required": lambda: ContextRequiredToolError("which?"),
    "fatal": lambda: FatalToolError("broken"),
    "unknown_exception": lambda: KeyError("x"),
    "cancelled_inside": lambda: ToolCancelledError("stopped"),
    "upstream_bad_request": lambda: UpstreamBadRequestError("bad", status_code=400),
    "upstream_408_validation": lambda: UpstreamBadRequestError("slow client", status_code=408),
    "upstream_validation": lambda: UpstreamValidationError("bad field", status_code=422),
    "upstream_not_found": lambda: UpstreamNotFoundError("gone", status_code=404),
    "upstream_auth": lambda: UpstreamAuthError("denied", status_code=401),
    "server_says_no_retry": lambda: UpstreamServerError("no", status_code=500, retryable=False),
    "quota_not_retryable": lambda: UpstreamRateLimitError("billing", retryable=False),
    "nested_rate_limited": lambda: ToolRateLimitedError("inner limiter", retry_after_ms=5),
    "nested_circuit_open": lambda: ToolCircuitOpenError("inner circuit", retry_after_ms=5),
    "nested_bulkhead_full": lambda: ToolBulkheadFullError("inner bulkhead"),
}


@pytest.mark.parametrize("make", NOT_RETRIED.values(), ids=NOT_RETRIED.keys())
@in_loop
async def test_other_errors_return_after_one_attempt(make: Any) -> None:
    """Non-retryable errors, other categories, TOOL_RUNTIME_RETRY and refusals are returned
    at once: the same call would fail the same way, or someone else owns the retry."""
    script = Script(make(), make())
    time = FakeTime()
    result = await runner_for(script, time, retry=NO_JITTER).run("flaky", {"n": 1})
    assert not result.is_success
    assert result.attempts == script.calls == 1
    assert result.error is not None
    assert result.error.details["attempts"] == 1
    assert "retry_stopped" not in result.error.details
    assert time.sleeps == []


@in_loop
async def test_bad_arguments_go_back_to_the_model_without_an_attempt() -> None:
    """Invalid arguments are a validation error: never retried, and the body never runs."""
    script = Script()
    time = FakeTime()
    result = await runner_for(script, time, retry=NO_JITTER).run("flaky", {"n": "many"})
    assert result.kind == ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.attempts == script.calls == 0
    assert result.error is not None
    assert result.error.details["attempts"] == 0
    assert time.sleeps == []


@pytest.mark.parametrize(
    ("retry_on", "error", "attempts"),
    [
        ({"timeout"}, server_error, 1),
        ({ErrorCategory.SERVER_ERROR}, server_error, 2),
        ({"validation"}, lambda: UpstreamBadRequestError("slow client", status_code=408), 2),
        ({"validation"}, lambda: UpstreamBadRequestError("bad", status_code=400), 1),
        ({"execution"}, lambda: RetryableToolError("other args"), 1),
        ("server_error", server_error, 2),
    ],
    ids=[
        "server_error_not_in_set",
        "server_error_in_set",
        "retryable_408_when_validation_is_retried",
        "non_retryable_400_even_so",
        "model_retry_never",
        "single_category_as_text",
    ],
)
@in_loop
async def test_retry_on_chooses_the_categories(retry_on: Any, error: Any, attempts: int) -> None:
    """``retry_on`` replaces the retried categories; retryability still decides."""
    script = Script(error())
    policy = RetryPolicy(max_attempts=2, initial_delay=0, jitter=False, retry_on=retry_on)
    result = await runner_for(script, FakeTime(), retry=policy).run("flaky")
    assert result.attempts == attempts


@pytest.mark.parametrize(
    ("max_attempts", "max_retry_attempts", "expected"),
    [
        (5, None, 4),
        (2, None, 2),
        (5, 1, 2),
        (5, 0, 1),
        (1, 3, 1),
        (3, 10, 3),
    ],
    ids=[
        "error_default_3_retries",
        "policy_lower",
        "error_allows_one_retry",
        "error_allows_none",
        "policy_allows_one_attempt",
        "policy_lower_than_error",
    ],
)
@in_loop
async def test_attempts_are_bounded_by_policy_and_error(
    max_attempts: int, max_retry_attempts: int | None, expected: int
) -> None:
    """At most ``min(policy.max_attempts, 1 + error.max_retry_attempts)`` attempts; the last
    error says that the limit stopped it."""
    errors = [
        UpstreamServerError("down", status_code=503, max_retry_attempts=max_retry_attempts)
        for _ in range(10)
    ]
    script = Script(*errors)
    time = FakeTime()
    policy = RetryPolicy(max_attempts=max_attempts, initial_delay=0.1, jitter=False)
    result = await runner_for(script, time, retry=policy).run("flaky")
    assert result.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert result.attempts == script.calls == expected
    assert result.error is not None
    details = result.error.details
    assert details["attempts"] == expected
    assert details["retry_stopped"] == "max_attempts"
    assert details["max_attempts"] == expected
    assert len(time.sleeps) == expected - 1


@pytest.mark.parametrize(
    ("policy", "retry_after_ms", "sleeps"),
    [
        (RetryPolicy(max_attempts=5, initial_delay=0.1, jitter=False), None, [0.1, 0.2, 0.4, 0.8]),
        (
            RetryPolicy(max_attempts=5, initial_delay=0.5, multiplier=3, max_delay=2, jitter=False),
            None,
            [0.5, 1.5, 2.0, 2.0],
        ),
        (
            RetryPolicy(max_attempts=3, initial_delay=0.1, max_delay=1.0, jitter=False),
            5000,
            [5.0, 5.0],
        ),
        (RetryPolicy(max_attempts=4, initial_delay=1.0, jitter=False), 1500, [1.5, 2.0, 4.0]),
        (RetryPolicy(max_attempts=3, initial_delay=0, jitter=False), None, [0.0, 0.0]),
        (RetryPolicy(max_attempts=3, initial_delay=0, jitter=False), 0, [0.0, 0.0]),
    ],
    ids=[
        "exponential",
        "capped_by_max_delay",
        "retry_after_beyond_max_delay_is_waited_in_full",
        "larger_of_backoff_and_retry_after",
        "no_delay",
        "retry_after_zero",
    ],
)
@in_loop
async def test_wait_is_the_larger_of_backoff_and_retry_after(
    policy: RetryPolicy, retry_after_ms: int | None, sleeps: list[float], tdk_clock: FakeClock
) -> None:
    """Each wait is ``max(backoff capped at max_delay, retry_after_ms)`` (steps of the kit's
    fake clock)."""
    script = Script(*(server_error(retry_after_ms, max_retry_attempts=9) for _ in range(10)))
    await tdk_clock.runner(Toolkit("test", [script.tool]), retry=policy).run("flaky")
    assert tdk_clock.sleeps == pytest.approx(sleeps)


@in_loop
async def test_jitter_draws_between_half_and_all_of_the_backoff() -> None:
    """With jitter, each wait lies in [backoff / 2, backoff]; a retry_after still wins."""
    script = Script(*(server_error(max_retry_attempts=9) for _ in range(4)), server_error(5000, 9))
    time = FakeTime()
    policy = RetryPolicy(max_attempts=6, initial_delay=0.2, multiplier=2.0, jitter=True)
    result = await runner_for(script, time, retry=policy).run("flaky")
    assert result.attempts == 6
    for wait, backoff in zip(time.sleeps[:4], [0.2, 0.4, 0.8, 1.6], strict=True):
        assert backoff / 2 <= wait <= backoff
    assert time.sleeps[4] == 5.0


@in_loop
async def test_a_wait_past_the_deadline_returns_the_last_error_at_once(
    tdk_clock: FakeClock,
) -> None:
    """When the wait would reach the deadline, the runner stops and says why."""
    script = Script(server_error(retry_after_ms=2000))
    time = tdk_clock
    runner = tdk_clock.runner(Toolkit("test", [script.tool]), retry=NO_JITTER, deadline=1.0)
    result = await runner.run("flaky")
    assert result.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert result.attempts == 1
    assert time.sleeps == []
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "deadline"
    assert result.error.details["retry_wait_ms"] == 2000
    assert result.error.details["deadline"] == 1.0
    assert result.error.retry_after_ms == 2000


@in_loop
async def test_the_deadline_counts_earlier_waits() -> None:
    """Waits already spent count against the deadline: 0.4 s fits in 1 s, 0.4 + 0.8 does not."""
    script = Script(*(server_error() for _ in range(5)))
    time = FakeTime()
    policy = RetryPolicy(max_attempts=5, initial_delay=0.4, jitter=False)
    result = await runner_for(script, time, retry=policy, deadline=1.0).run("flaky")
    assert time.sleeps == [0.4]
    assert result.attempts == 2
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "deadline"
    assert result.error.details["retry_wait_ms"] == 800


class SlowStore:
    """A shared store whose every answer takes ``delay`` real seconds (a slow network)."""

    def __init__(self, delay: float) -> None:
        self.inner = InMemoryStore()
        self.delay = delay

    async def update(self, key: str, change: Any, *args: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await self.inner.update(key, change, *args)


@in_loop
async def test_a_deadline_that_passed_before_the_first_attempt_is_a_timeout() -> None:
    """If admission used up the deadline (a store that answers late), the call times out
    without running the tool."""
    script = Script()
    runner = ToolRunner(
        Toolkit("test", [script.tool]),
        deadline=0.05,
        circuit_breaker=CircuitBreaker(),
        store=SlowStore(0.2),
    )
    result = await runner.run("flaky")
    assert result.kind == ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.attempts == script.calls == 0
    assert result.error is not None
    assert result.error.details == {"timeout": 0.05, "attempts": 0, "deadline": 0.05}


@in_loop
async def test_a_retry_after_the_deadline_passed_is_not_made() -> None:
    """A sleep that overran the deadline (on the monotonic clock) ends the call with the
    last error."""
    script = Script(server_error(), server_error())
    time = FakeTime()

    async def oversleep(seconds: float) -> None:
        await asyncio.sleep(seconds + 0.3)

    runner = ToolRunner(
        Toolkit("test", [script.tool]),
        retry=NO_JITTER,
        deadline=0.2,
        clock=time.clock,
        sleep=oversleep,
    )
    result = await runner.run("flaky")
    assert result.attempts == script.calls == 1
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "deadline"
    assert "retry_wait_ms" not in result.error.details


@in_loop
async def test_success_after_retries_reports_every_attempt() -> None:
    """A success after failures carries the number of attempts and the whole duration."""
    script = Script(server_error(), server_error())
    result = await runner_for(script, FakeTime(), retry=NO_JITTER).run(
        "flaky", '{"n": 3}', call_id="c-1"
    )
    assert (result.value, result.attempts, result.call_id) == (3, 3, "c-1")
    assert result.error is None


@in_loop
async def test_without_a_retry_policy_nothing_is_retried() -> None:
    """Every policy is off by default: one attempt, the error as the tool gave it."""
    script = Script(server_error(), None)
    result = await runner_for(script, FakeTime()).run("flaky")
    assert result.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert result.attempts == 1
    assert result.error is not None
    assert result.error.details["attempts"] == 1
    assert "retry_stopped" not in result.error.details


@in_loop
async def test_the_per_attempt_timeout_limits_each_attempt() -> None:
    """``timeout`` cuts each attempt; a timeout is retried like any transient failure."""
    calls = 0

    @tool(read_only=True)
    async def slow() -> str:
        """Never answers in time."""
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)
        return "late"

    time = FakeTime()
    runner = ToolRunner(
        Toolkit("test", [slow]),
        timeout=0.01,
        retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=False),
        clock=time.clock,
        sleep=time.sleep,
    )
    result = await runner.run("slow")
    assert result.kind == ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.attempts == calls == 2
    assert result.error is not None
    assert result.error.details["timeout"] == 0.01


@in_loop
async def test_the_runner_timeout_replaces_the_tools_own() -> None:
    """Like ``run(timeout=...)``, the runner's per-attempt limit overrides ``@tool(timeout=)``."""

    @tool(timeout=0.001)
    async def nap() -> str:
        """Takes a little longer than its own limit."""
        await asyncio.sleep(0.02)
        return "done"

    toolkit = Toolkit("test", [nap])
    assert (await ToolRunner(toolkit).run("nap")).kind == ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert (await ToolRunner(toolkit, timeout=5.0).run("nap")).value == "done"


@in_loop
async def test_the_deadline_cuts_the_attempt_in_progress() -> None:
    """With a deadline, an attempt gets at most the time left; then no retry fits."""

    @tool(timeout=60.0, read_only=True)
    async def hang() -> str:
        """Hangs."""
        await asyncio.sleep(10)
        return "never"

    time = FakeTime()
    runner = ToolRunner(
        Toolkit("test", [hang]),
        deadline=0.2,  # (on the monotonic clock: ample for a slow machine to start the attempt)
        retry=RetryPolicy(initial_delay=0.05),
        clock=time.clock,
        sleep=time.sleep,
    )
    result = await runner.run("hang")
    assert result.kind == ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.attempts == 1
    assert result.error is not None
    assert 0 < result.error.details["timeout"] <= 0.2
    assert result.error.details["retry_stopped"] == "deadline"


class SteppingClock:
    """A wall clock that an NTP correction steps by ``step`` seconds at every reading (what
    ``clock=time.time`` may do, for runners that share a store)."""

    def __init__(self, step: float) -> None:
        self.now = 1_700_000_000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class CountedSleep:
    """A real sleep that records each wait the runner asks for."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(seconds)


@in_loop
async def test_a_clock_stepping_back_does_not_stretch_the_deadline() -> None:
    """The deadline runs on the monotonic clock, whatever ``clock=`` (the policies' state)
    reads: with a wall clock stepping back a second at every reading, a call of 0.3 s asks
    for at most 0.3 s of waits, however many attempts could still be made."""
    script = Script(*(server_error(max_retry_attempts=99) for _ in range(100)))
    sleep = CountedSleep()
    runner = ToolRunner(
        Toolkit("test", [script.tool]),
        deadline=0.3,
        retry=RetryPolicy(max_attempts=50, initial_delay=0.05, multiplier=1.0, jitter=False),
        clock=SteppingClock(-1.0),
        sleep=sleep,
    )
    result = await runner.run("flaky")
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "deadline"
    assert sum(sleep.asked) <= 0.3
    assert script.calls == len(sleep.asked) + 1 <= 7


@in_loop
async def test_a_clock_stepping_forward_does_not_cut_the_deadline() -> None:
    """A wall clock jumping an hour ahead at every reading does not end the call early: its
    three attempts run within the deadline."""
    script = Script(server_error(), server_error())
    sleep = CountedSleep()
    runner = ToolRunner(
        Toolkit("test", [script.tool]),
        deadline=30.0,
        retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False),
        clock=SteppingClock(3600.0),
        sleep=sleep,
    )
    result = await runner.run("flaky")
    assert (result.value, result.attempts) == (1, 3)
    assert sleep.asked == [0.01, 0.02]


@in_loop
async def test_a_limiter_wait_counts_against_the_deadline() -> None:
    """The waits of one call add up against its deadline, the limiter's (``max_wait``) and
    the retries' alike, as the runner asked for them (a fake sleep stands for the time it
    says it waited): 0.1 s of backoff leaves 0.55 s, too little for the limiter's 0.6 s."""
    script = Script(server_error())
    time = FakeTime()
    runner = ToolRunner(
        Toolkit("test", [script.tool]),
        deadline=0.65,
        retry=RetryPolicy(initial_delay=0.1, jitter=False),
        rate_limit=RateLimit(calls=1, period=0.7, max_wait=5.0),
        clock=time.clock,
        sleep=time.sleep,
    )
    result = await runner.run("flaky")
    assert time.sleeps == [0.1]
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "rate_limited"
    assert result.error.details["retry_wait_ms"] == 600


def retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tdk.runner" and hasattr(r, "tdk_retry")]


@in_loop
async def test_each_retry_decision_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """One INFO record per decision, with the attempt, the wait and the reason."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    script = Script(server_error(), server_error(retry_after_ms=900), server_error())
    policy = RetryPolicy(max_attempts=3, initial_delay=0.1, jitter=False)
    await runner_for(script, FakeTime(), retry=policy).run("flaky")
    facts = [r.tdk_retry for r in retry_records(caplog)]  # type: ignore[attr-defined]
    assert [(f["attempt"], f["retrying"], f["wait"], f["reason"]) for f in facts] == [
        (1, True, 0.1, "backoff"),
        (2, True, 0.9, "retry_after"),
        (3, False, None, "max_attempts"),
    ]
    assert all(r.levelno == logging.INFO for r in retry_records(caplog))
    assert "retrying in 0.900 s (retry_after)" in retry_records(caplog)[1].getMessage()
    assert "not retrying (max_attempts)" in retry_records(caplog)[2].getMessage()


@in_loop
async def test_errors_not_to_retry_log_no_decision(caplog: pytest.LogCaptureFixture) -> None:
    """A validation error is not a retry decision: nothing on ``tdk.runner``."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    script = Script(UpstreamValidationError("bad", status_code=422))
    await runner_for(script, FakeTime(), retry=NO_JITTER).run("flaky")
    assert retry_records(caplog) == []


def test_results_are_plain_tool_results() -> None:
    """The runner's results serialise like any other (``to_dict``)."""
    script = Script(server_error())
    result: ToolResult = asyncio.run(runner_for(script, FakeTime()).run("flaky"))
    data = result.to_dict()
    assert data["attempts"] == 1
    assert data["error"]["details"]["attempts"] == 1


SECRET = "planted-secret-9f3a"
#: call id -> as log lines show it.
LOGGED_CALL_IDS = {
    "plain": ("c-7", "c-7"),
    "holding-a-secret": (f"call-{SECRET}", '"call-[REDACTED]"'),
    "with-a-newline": ("c\n7", '"c\\n7"'),
}


@pytest.mark.parametrize(("call_id", "shown"), LOGGED_CALL_IDS.values(), ids=LOGGED_CALL_IDS.keys())
@in_loop
async def test_each_failed_attempt_is_logged_with_its_call_and_number(
    caplog: pytest.LogCaptureFixture, call_id: str, shown: str
) -> None:
    """Three failed attempts of one call are three WARNING lines that say so (the call's id,
    redacted with its secrets, and "attempt N of M"), and so are the runner's decisions:
    they do not read as three calls."""
    caplog.set_level(logging.INFO)
    script = Script(server_error(), server_error(), server_error())
    policy = RetryPolicy(max_attempts=3, initial_delay=0.1, jitter=False)
    context = ToolContext(secrets={"KEY": SECRET})
    await runner_for(script, FakeTime(), retry=policy).run(
        "flaky", context=context, call_id=call_id
    )
    failures = [r for r in caplog.records if r.name == "tdk"]
    assert [r.levelno for r in failures] == [logging.WARNING] * 3
    assert [r.tdk_call for r in failures] == [  # type: ignore[attr-defined]
        {"call_id": shown, "attempt": n, "max_attempts": 3} for n in (1, 2, 3)
    ]
    for n, record in enumerate(failures, start=1):
        assert record.getMessage().endswith(f' call_id={shown} attempt="{n} of 3"')
    decisions = retry_records(caplog)
    assert [r.tdk_retry["call_id"] for r in decisions] == [shown] * 3  # type: ignore[attr-defined]
    for n, record in enumerate(decisions, start=1):
        assert record.getMessage().startswith(f"tool flaky (call {shown}): attempt {n} of 3 ")
    lines = [r.getMessage() for r in caplog.records]
    assert not any(SECRET in line or "\n" in line for line in lines)


@in_loop
async def test_a_call_outside_a_runner_logs_its_id_alone(caplog: pytest.LogCaptureFixture) -> None:
    """``tool.run()`` has no attempts to count: its line names the call only."""
    caplog.set_level(logging.WARNING, logger="tdk")
    script = Script(server_error())
    await script.tool.run({}, call_id="c-1")
    [record] = [r for r in caplog.records if r.name == "tdk"]
    assert record.getMessage().endswith(" call_id=c-1")
    assert record.tdk_call == {"call_id": "c-1", "attempt": None, "max_attempts": None}  # type: ignore[attr-defined]
