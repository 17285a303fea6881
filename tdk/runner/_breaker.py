"""The circuit breaker: per-tool state and the two changes that drive it.

:func:`acquire` asks whether an attempt may run; :func:`record` reports how it ended; :func:`peek`
asks without changing anything. Each is a state change a :class:`~tdk.runner.StateStore` applies
atomically, and the rule of its named operation of the same name.

The circuit counts consecutive failed attempts of the categories server_error, timeout and
connection. A success resets the count; other failures (bad arguments, a 404) say nothing
about the upstream's health and neither count nor reset. Every transition starts a new
*generation*: an attempt admitted in an earlier one (a slow call that began before the circuit
opened) reports into the void, so only the probes of a half-open circuit decide its fate.

Probes expire. A probe whose report never comes (its caller was cancelled while a shared
store admitted it; a worker process died mid-probe) would otherwise hold its slot forever and
keep the circuit refusing every call. Past the probe's lifetime (the attempt's time limit, or
the reset timeout) the half-open circuit starts a new generation and admits a new probe.

A clock that steps back (``time.time`` after an NTP correction) never lengthens a wait: a
reading earlier than the circuit's own times counts from now.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple

from tdk._execution.result import ToolResult
from tdk.errors import ErrorCategory
from tdk.runner._policies import CircuitBreaker

__all__ = [
    "Circuit",
    "CircuitState",
    "Outcome",
    "Transition",
    "Verdict",
    "acquire",
    "outcome_of",
    "record",
]

#: Failures that count against a circuit: the upstream is unwell or unreachable.
COUNTED_CATEGORIES: Final = frozenset(
    {ErrorCategory.SERVER_ERROR, ErrorCategory.TIMEOUT, ErrorCategory.CONNECTION}
)


class CircuitState(enum.StrEnum):
    """The state of a tool's circuit breaker.

    .. versionadded:: 0.1.0
    """

    CLOSED = "closed"
    """Calls run; counted failures accumulate."""
    OPEN = "open"
    """Calls fail at once until the reset timeout has passed."""
    HALF_OPEN = "half_open"
    """A few probe calls run; the first to end decides."""


class Outcome(enum.Enum):
    """How an attempt ended, as far as the circuit cares."""

    SUCCESS = "success"
    FAILURE = "failure"
    """A failure of a counted category."""
    NEUTRAL = "neutral"
    """Any other failure, a cancellation, or an attempt that did not run after all."""


# Enum members are slow to look up on their class (a descriptor call each on Python 3.11);
# the changes below run on every call, so they use these module constants.
_CLOSED: Final = CircuitState.CLOSED
_OPEN: Final = CircuitState.OPEN
_HALF_OPEN: Final = CircuitState.HALF_OPEN
SUCCESS: Final = Outcome.SUCCESS
FAILURE: Final = Outcome.FAILURE
NEUTRAL: Final = Outcome.NEUTRAL


def outcome_of(result: ToolResult | None) -> Outcome:
    """The outcome of an attempt that returned ``result`` (None: it did not run)."""
    if result is None:
        return NEUTRAL
    error = result.error
    if error is None:
        return SUCCESS
    return FAILURE if error.category in COUNTED_CATEGORIES else NEUTRAL


@dataclass(slots=True)
class Circuit:
    """The stored state of one tool's circuit."""

    state: CircuitState = CircuitState.CLOSED
    failures: int = 0
    """Consecutive counted failures."""
    opened_at: float = 0.0
    """Clock reading when the circuit last opened."""
    probes: int = 0
    """Probes running in the current half-open generation."""
    probes_expire: float = 0.0
    """Clock reading after which the running probes count as lost."""
    generation: int = 0
    """Bumped by every transition."""


class Verdict(NamedTuple):
    """The answer of :func:`acquire`: whether an attempt may run, and the circuit around it."""

    ticket: int | None
    """The generation an admitted attempt hands back to :func:`record` (None: refused)."""
    before: CircuitState
    """The state before the change."""
    after: CircuitState
    """The state after it."""
    failures: int
    """Consecutive counted failures."""
    retry_after: float | None
    """Seconds until a refused call could be admitted: until an open circuit half-opens, or
    until a half-open circuit's probes expire (None otherwise)."""


class Transition(NamedTuple):
    """The answer of :func:`record`: the circuit's state around the report."""

    before: CircuitState
    after: CircuitState
    failures: int
    """Consecutive counted failures after the report."""


def acquire(
    circuit: Circuit | None,
    policy: CircuitBreaker,
    clock: Callable[[], float],
    probe_lifetime: float | None = None,
) -> tuple[Circuit, Verdict]:
    """Admit an attempt (a probe, when half-open) or refuse it. ``clock`` is read only when
    the answer depends on the time (an open or half-open circuit). A probe counts as lost
    ``probe_lifetime`` seconds after it was admitted (default: the reset timeout)."""
    if circuit is None:
        circuit = Circuit()
    elif type(circuit.state) is not CircuitState:
        circuit = _restored(circuit)
    before = circuit.state
    if before is _CLOSED:
        return circuit, Verdict(circuit.generation, before, before, circuit.failures, None)
    now = clock()
    lifetime = policy.reset_timeout if probe_lifetime is None else probe_lifetime
    if before is _OPEN:
        circuit.opened_at = min(circuit.opened_at, now)  # a clock stepped back counts from now
        reopens = circuit.opened_at + policy.reset_timeout
        if now < reopens:
            return circuit, Verdict(None, before, before, circuit.failures, reopens - now)
        circuit.state = _HALF_OPEN
        circuit.generation += 1
        circuit.probes = 0
    elif circuit.probes >= policy.half_open_max_calls:
        expire = circuit.probes_expire = min(circuit.probes_expire, now + lifetime)
        if now < expire:
            return circuit, Verdict(None, before, before, circuit.failures, expire - now)
        circuit.generation += 1  # the probes were lost: a late report goes into the void
        circuit.probes = 0
    circuit.probes += 1
    circuit.probes_expire = now + lifetime
    return circuit, Verdict(circuit.generation, before, circuit.state, circuit.failures, None)


def record(
    circuit: Circuit | None,
    policy: CircuitBreaker,
    clock: Callable[[], float],
    generation: int,
    outcome: Outcome,
) -> tuple[Circuit, Transition]:
    """Report how an attempt admitted in ``generation`` ended. ``clock`` is read only when
    the circuit opens."""
    if circuit is None:  # the store lost the state: start afresh
        circuit = Circuit()
    elif type(circuit.state) is not CircuitState:
        circuit = _restored(circuit)
    before = circuit.state
    if generation != circuit.generation or before is _OPEN:
        return circuit, Transition(before, before, circuit.failures)  # from an earlier generation
    if before is _HALF_OPEN:
        if outcome is NEUTRAL:
            circuit.probes -= 1  # the probe says nothing: let another one through
        elif outcome is SUCCESS:
            _close(circuit)
        else:
            circuit.failures += 1
            _open(circuit, clock())
    elif outcome is SUCCESS:
        circuit.failures = 0
    elif outcome is FAILURE:
        circuit.failures += 1
        if circuit.failures >= policy.failure_threshold:
            _open(circuit, clock())
    return circuit, Transition(before, circuit.state, circuit.failures)


def refuses(circuit: Circuit | None, policy: CircuitBreaker, now: float) -> bool:
    """Whether the circuit would refuse a call at ``now``: open and not yet due to half-open,
    or half-open with every probe out and none lost yet. Changes nothing."""
    if circuit is None or circuit.state == _CLOSED:  # (== : a shared store gives text back)
        return False
    if circuit.state == _OPEN:
        return now < min(circuit.opened_at, now) + policy.reset_timeout
    return circuit.probes >= policy.half_open_max_calls and now < circuit.probes_expire


def peek(
    circuit: Circuit | None, policy: CircuitBreaker, clock: Callable[[], float]
) -> tuple[Circuit | None, bool]:
    """A state "change" for :meth:`StateStore.update`: the state as it is, and whether the
    circuit would refuse a call now (:func:`refuses`)."""
    return circuit, refuses(circuit, policy, clock())


def _restored(circuit: Circuit) -> Circuit:
    """A circuit whose state a shared store gave back as its value (``"open"``: JSON has no
    enums), with its state an enum member again; a fresh circuit if the value is no state."""
    try:
        circuit.state = CircuitState(circuit.state)
    except ValueError:
        return Circuit()
    return circuit


def _open(circuit: Circuit, now: float) -> None:
    circuit.state = _OPEN
    circuit.opened_at = now
    circuit.probes = 0
    circuit.generation += 1


def _close(circuit: Circuit) -> None:
    circuit.state = _CLOSED
    circuit.failures = 0
    circuit.probes = 0
    circuit.generation += 1
