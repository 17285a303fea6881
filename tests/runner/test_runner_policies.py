"""The policy records, the runner's settings, and how ``configure`` resolves them per tool."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable
from typing import Annotated, Any

import pytest

from tdk import Bulkhead, CircuitBreaker, RateLimit, RetryPolicy, Toolkit, ToolRunner, tool
from tdk.errors import ErrorCategory
from tdk.runner import Policies


@tool
def search_issues(q: Annotated[str, "The query."]) -> list[str]:
    """Search the issues."""
    return [q]


@tool
def search_pulls(q: Annotated[str, "The query."]) -> list[str]:
    """Search the pull requests."""
    return [q]


@tool
def get_issue(number: Annotated[int, "The number."]) -> str:
    """Get one issue."""
    return str(number)


TOOLKIT = Toolkit("github", [search_issues, search_pulls, get_issue])

INVALID: dict[str, tuple[Any, type[Exception], str]] = {
    "zero_attempts": (lambda: RetryPolicy(max_attempts=0), ValueError, "max_attempts"),
    "float_attempts": (lambda: RetryPolicy(max_attempts=2.5), ValueError, "max_attempts"),
    "bool_attempts": (lambda: RetryPolicy(max_attempts=True), ValueError, "max_attempts"),
    "negative_delay": (lambda: RetryPolicy(initial_delay=-0.1), ValueError, "initial_delay"),
    "nan_delay": (lambda: RetryPolicy(initial_delay=math.nan), ValueError, "initial_delay"),
    "text_delay": (lambda: RetryPolicy(initial_delay="1"), ValueError, "initial_delay"),
    "negative_max_delay": (lambda: RetryPolicy(max_delay=-1), ValueError, "max_delay"),
    "max_below_initial": (
        lambda: RetryPolicy(initial_delay=5, max_delay=1),
        ValueError,
        "max_delay",
    ),
    "shrinking_multiplier": (lambda: RetryPolicy(multiplier=0.5), ValueError, "multiplier"),
    "infinite_multiplier": (lambda: RetryPolicy(multiplier=math.inf), ValueError, "multiplier"),
    "text_multiplier": (lambda: RetryPolicy(multiplier="2"), ValueError, "multiplier"),
    "jitter_not_bool": (lambda: RetryPolicy(jitter=1), ValueError, "jitter"),
    "unknown_category": (lambda: RetryPolicy(retry_on={"weather"}), ValueError, "categories"),
    "refusal_category": (
        lambda: RetryPolicy(retry_on={"circuit_open"}),
        ValueError,
        "never retries its own refusals",
    ),
    "retry_on_number": (lambda: RetryPolicy(retry_on=3), ValueError, "retry_on"),
    "zero_calls": (lambda: RateLimit(calls=0, period=1.0), ValueError, "calls"),
    "zero_period": (lambda: RateLimit(calls=1, period=0), ValueError, "period"),
    "negative_period": (lambda: RateLimit(calls=1, period=-1.0), ValueError, "period"),
    "infinite_period": (lambda: RateLimit(calls=1, period=math.inf), ValueError, "period"),
    "zero_threshold": (lambda: CircuitBreaker(failure_threshold=0), ValueError, "threshold"),
    "zero_reset": (lambda: CircuitBreaker(reset_timeout=0), ValueError, "reset_timeout"),
    "zero_probes": (lambda: CircuitBreaker(half_open_max_calls=0), ValueError, "half_open"),
    "zero_capacity": (lambda: Bulkhead(max_concurrent=0), ValueError, "max_concurrent"),
    "negative_wait": (lambda: Bulkhead(max_wait=-0.5), ValueError, "max_wait"),
    "runner_timeout_zero": (lambda: ToolRunner(TOOLKIT, timeout=0), ValueError, "timeout"),
    "runner_deadline_negative": (
        lambda: ToolRunner(TOOLKIT, deadline=-1),
        ValueError,
        "deadline",
    ),
    "runner_concurrency_zero": (
        lambda: ToolRunner(TOOLKIT, max_concurrency=0),
        ValueError,
        "max_concurrency",
    ),
    "runner_concurrency_float": (
        lambda: ToolRunner(TOOLKIT, max_concurrency=2.0),
        ValueError,
        "max_concurrency",
    ),
    "runner_policy_type": (
        lambda: ToolRunner(TOOLKIT, retry=RateLimit(calls=1, period=1)),
        TypeError,
        "RetryPolicy",
    ),
    "runner_not_a_toolkit": (lambda: ToolRunner([search_issues]), TypeError, "Toolkit"),
    "configure_blank_pattern": (
        lambda: ToolRunner(TOOLKIT).configure(" ", retry=None),
        ValueError,
        "pattern",
    ),
    "configure_bad_seconds": (
        lambda: ToolRunner(TOOLKIT).configure("*", timeout=-2),
        ValueError,
        "timeout",
    ),
}


@pytest.mark.parametrize(("build", "error", "match"), INVALID.values(), ids=INVALID.keys())
def test_invalid_settings_fail_when_built(build: Any, error: type[Exception], match: str) -> None:
    """Bad values raise ValueError when the policy (or runner) is built, naming the setting;
    an object of the wrong kind where a policy or toolkit belongs is a TypeError."""
    with pytest.raises(error, match=match):
        build()


def test_defaults() -> None:
    """The defaults of MISSION section 6."""
    assert RetryPolicy() == RetryPolicy(
        max_attempts=3,
        initial_delay=0.1,
        multiplier=2.0,
        max_delay=30.0,
        jitter=True,
        retry_on={"rate_limit", "timeout", "connection", "server_error"},
    )
    assert CircuitBreaker() == CircuitBreaker(
        failure_threshold=5, reset_timeout=30.0, half_open_max_calls=1
    )
    assert Bulkhead() == Bulkhead(max_concurrent=10, max_wait=0.0)
    assert ToolRunner(TOOLKIT).policies("search_issues") == Policies()


def test_policies_are_frozen_hashable_and_keyword_only() -> None:
    """Policies are values: immutable, comparable, usable as keys."""
    policy = RetryPolicy(retry_on=["timeout", ErrorCategory.SERVER_ERROR])
    assert policy.retry_on == frozenset({ErrorCategory.TIMEOUT, ErrorCategory.SERVER_ERROR})
    assert all(isinstance(category, ErrorCategory) for category in policy.retry_on)
    assert {policy, RetryPolicy(retry_on={"server_error", "timeout"})} == {policy}
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        RateLimit(10, 1.0)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("policy", "retry", "draw", "expected"),
    [
        (RetryPolicy(initial_delay=0.1, jitter=False), 1, 0.0, 0.1),
        (RetryPolicy(initial_delay=0.1, jitter=False), 4, 0.0, 0.8),
        (RetryPolicy(initial_delay=1.0, max_delay=5.0, jitter=False), 10, 0.0, 5.0),
        (RetryPolicy(initial_delay=1.0, max_delay=5.0, jitter=False), 100_000, 0.0, 5.0),
        (RetryPolicy(initial_delay=0.4, jitter=True), 2, 0.0, 0.4),
        (RetryPolicy(initial_delay=0.4, jitter=True), 2, 0.5, 0.6),
        (RetryPolicy(initial_delay=0.4, multiplier=1.0, jitter=False), 7, 0.0, 0.4),
    ],
    ids=["first", "fourth", "capped", "huge_exponent", "jitter_low", "jitter_mid", "constant"],
)
def test_backoff(policy: RetryPolicy, retry: int, draw: float, expected: float) -> None:
    """``initial_delay * multiplier ** (retry - 1)`` capped at ``max_delay``; jitter scales
    it by a factor in [0.5, 1)."""
    assert policy.backoff(retry, draw=lambda: draw) == pytest.approx(expected)


def test_configure_overrides_by_name_and_glob() -> None:
    """A glob or a name selects tools, ignoring case; only the arguments given change."""
    retry = RetryPolicy(max_attempts=4)
    runner = ToolRunner(TOOLKIT, timeout=10.0, retry=retry, bulkhead=Bulkhead())
    limit = RateLimit(calls=2, period=1.0)
    runner.configure("search_*", retry=None, rate_limit=limit)
    runner.configure("GET_ISSUE", timeout=2.5)
    assert runner.policies("search_issues") == Policies(
        timeout=10.0, retry=None, rate_limit=limit, bulkhead=Bulkhead()
    )
    assert runner.policies("Search_Pulls").rate_limit == limit
    assert runner.policies("get_issue") == Policies(timeout=2.5, retry=retry, bulkhead=Bulkhead())


def test_later_configure_calls_win() -> None:
    """Where two layers set the same policy for a tool, the later one applies."""
    runner = ToolRunner(TOOLKIT)
    runner.configure("*", deadline=5.0, circuit_breaker=CircuitBreaker())
    runner.configure("search_issues", deadline=1.0)
    runner.configure("search_*", circuit_breaker=None)
    assert runner.policies("search_issues") == Policies(deadline=1.0)
    assert runner.policies("get_issue") == Policies(deadline=5.0, circuit_breaker=CircuitBreaker())


def succeeds(runner: ToolRunner, name: str) -> bool:
    return asyncio.run(runner.run(name, {"q": "x"})).is_success


def test_configure_applies_to_the_next_calls() -> None:
    """Changing a policy after calls were made takes effect on the next call."""
    runner = ToolRunner(TOOLKIT, rate_limit=RateLimit(calls=1, period=60))
    assert succeeds(runner, "search_issues") is True
    assert succeeds(runner, "search_issues") is False
    runner.configure("search_issues", rate_limit=None)
    assert succeeds(runner, "search_issues") is True


def test_configure_with_nothing_changes_nothing() -> None:
    """A ``configure`` call without policies leaves every tool as it was."""
    runner = ToolRunner(TOOLKIT, retry=RetryPolicy())
    runner.configure("*")
    assert runner.policies("get_issue") == Policies(retry=RetryPolicy())


@tool
def echo_number(n: Annotated[int, "A number."]) -> int:
    """Return the number."""
    return n


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: RetryPolicy(max_delay=10**400), id="retry-max-delay"),
        pytest.param(lambda: RetryPolicy(multiplier=10**5000), id="retry-multiplier"),
        pytest.param(lambda: RateLimit(calls=1, period=10**400), id="rate-limit-period"),
        pytest.param(lambda: Bulkhead(max_wait=10**400), id="bulkhead-max-wait"),
        pytest.param(lambda: CircuitBreaker(reset_timeout=10**400), id="breaker-reset"),
        pytest.param(
            lambda: ToolRunner(Toolkit("k", [echo_number]), deadline=10**400), id="deadline"
        ),
    ],
)
def test_settings_beyond_any_float_are_value_errors(make: Callable[[], Any]) -> None:
    """A duration or factor too big for a float is refused with ``ValueError``, as documented
    (``OverflowError`` escaped before)."""
    with pytest.raises(ValueError, match="finite"):
        make()
