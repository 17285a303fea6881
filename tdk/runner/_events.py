"""What the runner reports as it decides: typed events, and the instruments that hear them.

The runner does not log or trace itself: at each decision that is not a plain success (a
retry, a stop, a refusal, a circuit that changes, a wait for the limiter, a queue for a slot)
it emits one event to its instruments (as stamina's ``RetryHook`` and Trio's ``Instrument``
hear theirs). tdk's log records (:func:`~tdk.runner._instruments.log_lines`), OpenTelemetry
events and metrics (:func:`~tdk.runner._instruments.otel_events`) and the call's progress
(:func:`~tdk.runner._instruments.progress_reports`: a wait, said to the host) are three
instruments, subscribed by default.
Nothing is emitted on the way of a call that succeeds at once: its span and its result are
the call scope's (:mod:`tdk._execution.call_scope`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from tdk._execution.context import ToolContext
from tdk.errors import ErrorInfo, ErrorKind
from tdk.runner._breaker import CircuitState

__all__ = [
    "CircuitChanged",
    "Event",
    "Instrument",
    "Instruments",
    "Queued",
    "Refused",
    "RetryScheduled",
    "RetryStopped",
    "Waiting",
]


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    """Attempt ``attempt`` (of ``of``) of a call failed with ``error``; the next one runs
    after ``wait`` seconds (``reason``: ``backoff`` or ``retry_after``, whichever was longer)."""

    tool: str
    call_id: str | None
    context: ToolContext | None
    attempt: int
    of: int
    error: ErrorInfo
    wait: float
    reason: str


@dataclass(frozen=True, slots=True)
class RetryStopped:
    """Attempt ``attempt`` (of ``of``) failed with a retryable ``error`` and no retry follows:
    ``reason`` says why (``not_idempotent``, ``max_attempts``, ``deadline``, ``circuit_open``,
    ``rate_limited``, ``still_running``); ``wait``: the wait that would have been, if known."""

    tool: str
    call_id: str | None
    context: ToolContext | None
    attempt: int
    of: int
    error: ErrorInfo
    wait: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class Refused:
    """A policy of the runner refused a call of ``tool`` before its body ran (``kind``: the
    limiter's, the circuit's, the bulkhead's or the deadline's)."""

    tool: str
    kind: ErrorKind


@dataclass(frozen=True, slots=True)
class CircuitChanged:
    """The circuit of ``tool`` moved from ``before`` to ``after`` (after ``failures``
    consecutive failures, when it opened)."""

    tool: str
    before: CircuitState
    after: CircuitState
    failures: int


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call of ``tool`` waits ``wait`` seconds for the limiter to admit it."""

    tool: str
    wait: float


@dataclass(frozen=True, slots=True)
class Queued:
    """A call of ``tool`` found no free slot (its bulkhead's, or the runner's
    ``max_concurrency``) and queues for one, up to ``wait`` seconds."""

    tool: str
    wait: float


Event: TypeAlias = RetryScheduled | RetryStopped | Refused | CircuitChanged | Waiting | Queued


#: Hears the runner's events: called with each, in the order they happen, in the task of the
#: call. An instrument that raises loses its own record, never the call.
Instrument: TypeAlias = Callable[[Event], None]


class Instruments:
    """The instruments of one runner, each told every event."""

    __slots__ = ("_each",)

    def __init__(self, instruments: Iterable[Instrument]) -> None:
        self._each = tuple(instruments)

    def add(self, instrument: Instrument) -> Callable[[], None]:
        """Tell ``instrument`` every event from now on (after those already there); the
        function that stops it (idempotent)."""
        self._each = (*self._each, instrument)

        def remove() -> None:
            self._each = tuple(each for each in self._each if each is not instrument)

        return remove

    def emit(self, event: Event) -> None:
        """Tell every instrument ``event``; one that fails is skipped."""
        for instrument in self._each:
            try:
                instrument(event)
            except Exception:  # noqa: S112 (an instrument's failure is its own)
                continue
