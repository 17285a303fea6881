"""The four policy records: frozen, hashable, and checked when they are built.

A policy says *what* to enforce; the state it needs (a circuit's failures, a limiter's recent
calls) lives in a :class:`~tdk.runner.StateStore`, and the runner applies both. Durations are
seconds as floats. Any invalid setting (a value out of range, or of the wrong type) raises
``ValueError`` in the constructor, so a bad configuration fails at start-up, never on the first
call.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Final

from tdk._execution.seconds import finite, shown
from tdk.errors import ErrorCategory
from tdk.runner._scopes import check_scope

__all__ = ["Bulkhead", "CircuitBreaker", "RateLimit", "RetryPolicy"]

#: Categories a :class:`RetryPolicy` retries unless ``retry_on=`` says otherwise.
DEFAULT_RETRY_ON: Final = frozenset(
    {
        ErrorCategory.RATE_LIMIT,
        ErrorCategory.TIMEOUT,
        ErrorCategory.CONNECTION,
        ErrorCategory.SERVER_ERROR,
    }
)
#: Categories that only the runner's own refusals have; they are never retried.
_REFUSAL_CATEGORIES: Final = frozenset({ErrorCategory.CIRCUIT_OPEN, ErrorCategory.BULKHEAD_FULL})


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Retry transient failures with the same arguments, with exponential backoff.

    - ``max_attempts``: attempts in all, the first one included (>= 1). An error that allows
      fewer retries (its ``max_retry_attempts``) lowers the limit for that call.
    - ``initial_delay``: backoff before the first retry, in seconds (>= 0).
    - ``multiplier``: growth of the backoff per retry (>= 1).
    - ``max_delay``: cap of the computed backoff (>= ``initial_delay``). It never shortens an
      error's ``retry_after_ms``, which is waited in full.
    - ``jitter``: when true, each backoff is drawn uniformly between half and all of itself,
      so that clients failing together do not retry together.
    - ``retry_on``: the error categories to retry (default: rate_limit, timeout, connection,
      server_error). Only errors that are also ``retryable`` are retried, and never
      ``TOOL_RUNTIME_RETRY`` (the model retries that one, with new arguments) nor the runner's
      own refusals.

    .. versionadded:: 0.1.0
    """

    max_attempts: int = 3
    initial_delay: float = 0.1
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: bool = True
    retry_on: Set[ErrorCategory | str] = DEFAULT_RETRY_ON

    def __post_init__(self) -> None:
        _check_count("max_attempts", self.max_attempts)
        _check_seconds("initial_delay", self.initial_delay, zero_ok=True)
        _check_seconds("max_delay", self.max_delay, zero_ok=True)
        if isinstance(self.multiplier, bool) or not isinstance(self.multiplier, int | float):
            raise ValueError(f"multiplier must be a number, got {shown(self.multiplier)}")
        multiplier = finite(self.multiplier)
        if multiplier is None or multiplier < 1:
            raise ValueError(
                f"multiplier must be a finite number >= 1, got {shown(self.multiplier)}"
            )
        if self.max_delay < self.initial_delay:
            raise ValueError(
                f"max_delay ({self.max_delay!r}) must not be shorter than "
                f"initial_delay ({self.initial_delay!r})"
            )
        if not isinstance(self.jitter, bool):
            raise ValueError(f"jitter must be True or False, got {self.jitter!r}")
        object.__setattr__(self, "retry_on", _categories(self.retry_on))

    def backoff(self, retry: int, *, draw: Callable[[], float] = random.random) -> float:
        """The backoff in seconds before retry number ``retry`` (1 for the first retry):
        ``initial_delay * multiplier ** (retry - 1)``, capped at ``max_delay``; with jitter,
        that times a factor between 0.5 and 1 (``draw()`` returns a float in [0, 1))."""
        try:
            delay = min(self.max_delay, self.initial_delay * self.multiplier ** (retry - 1))
        except OverflowError:
            delay = self.max_delay
        return delay * (0.5 + draw() / 2) if self.jitter else delay


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """At most ``calls`` attempts in any window of ``period`` seconds.

    A call beyond the limit waits when the limiter would admit it within ``max_wait`` seconds
    (and within the call's deadline); otherwise it is refused at once with
    ``TOOL_RUNTIME_RATE_LIMITED``, whose ``retry_after_ms`` is the time until the limiter
    would admit it (rounded up to whole ms). ``scope`` shares one quota between the tools
    that name it, and may name context fields (``"github:{user_id}"``); without it, each tool
    has its own (see ``docs/runner.md``).

    .. versionadded:: 0.1.0
    """

    calls: int
    period: float
    max_wait: float = 0.0
    scope: str | None = None

    def __post_init__(self) -> None:
        _check_count("calls", self.calls)
        _check_seconds("period", self.period)
        _check_seconds("max_wait", self.max_wait, zero_ok=True)
        if self.scope is not None:
            check_scope(self.scope)


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitBreaker:
    """Stop calling a tool that keeps failing, and probe it again later.

    After ``failure_threshold`` consecutive failed attempts of the categories server_error,
    timeout and connection, the circuit opens: calls fail at once with
    ``TOOL_RUNTIME_CIRCUIT_OPEN`` for ``reset_timeout`` seconds. Then it is half-open: up to
    ``half_open_max_calls`` calls run as probes; a probe's success closes the circuit, its
    failure opens it again. ``scope`` shares one circuit between the tools that name it (one
    upstream), and may name context fields; without it, each tool has its own.

    .. versionadded:: 0.1.0
    """

    failure_threshold: int = 5
    reset_timeout: float = 30.0
    half_open_max_calls: int = 1
    scope: str | None = None

    def __post_init__(self) -> None:
        _check_count("failure_threshold", self.failure_threshold)
        _check_seconds("reset_timeout", self.reset_timeout)
        _check_count("half_open_max_calls", self.half_open_max_calls)
        if self.scope is not None:
            check_scope(self.scope)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bulkhead:
    """At most ``max_concurrent`` calls of a tool at once; a call beyond that waits up to
    ``max_wait`` seconds for a slot (0: not at all), then fails with
    ``TOOL_RUNTIME_BULKHEAD_FULL``.

    A call holds its slot from its first attempt to its last, waits between retries included.

    .. versionadded:: 0.1.0
    """

    max_concurrent: int = 10
    max_wait: float = 0.0

    def __post_init__(self) -> None:
        _check_count("max_concurrent", self.max_concurrent)
        _check_seconds("max_wait", self.max_wait, zero_ok=True)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value!r}")


def _check_seconds(name: str, value: object, *, zero_ok: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, got {shown(value)}")
    seconds = finite(value)
    if seconds is None or seconds < 0 or (seconds == 0 and not zero_ok):
        bound = "a finite number >= 0" if zero_ok else "a finite number > 0"
        raise ValueError(f"{name} must be {bound} (seconds), got {shown(value)}")


def check_optional_seconds(name: str, value: object) -> float | None:
    """``value`` as positive seconds, or None; raise as the policies do otherwise."""
    if value is None:
        return None
    _check_seconds(name, value)
    return float(value)  # type: ignore[arg-type]


def _categories(given: object) -> frozenset[ErrorCategory]:
    items = (given,) if isinstance(given, str) else given
    if not isinstance(items, Set | list | tuple):
        raise ValueError(f"retry_on must be a set of error categories, got {given!r}")
    try:
        categories = frozenset(ErrorCategory(item) for item in items)
    except ValueError:
        known = ", ".join(category.value for category in ErrorCategory)
        raise ValueError(f"retry_on must name error categories ({known}), got {given!r}") from None
    refusals = categories & _REFUSAL_CATEGORIES
    if refusals:
        named = ", ".join(sorted(refusals))
        raise ValueError(
            f"retry_on cannot include {named}: the runner never retries its own refusals"
        )
    return categories
