"""The runner's counters, and the snapshot users read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tdk.errors import ErrorKind
from tdk.runner._breaker import CircuitState

__all__ = ["Counters", "RunnerStats"]

#: The runner's own refusals, the keys of :attr:`RunnerStats.rejections`.
REFUSAL_KINDS = (
    ErrorKind.TOOL_RUNTIME_RATE_LIMITED,
    ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN,
    ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerStats:
    """A snapshot of a runner's counters, from :meth:`ToolRunner.stats
    <tdk.ToolRunner.stats>`.

    .. versionadded:: 0.1.0
    """

    calls: int
    """Calls of ``run()`` (``run_many()`` counts each of its calls)."""
    attempts: int
    """Invocations of tool bodies, retries included."""
    retries: int
    """Attempts after the first of their call."""
    rejections: Mapping[ErrorKind, int]
    """Refusals by the runner's own policies, per kind (``TOOL_RUNTIME_RATE_LIMITED``,
    ``TOOL_RUNTIME_CIRCUIT_OPEN``, ``TOOL_RUNTIME_BULKHEAD_FULL``), including those that
    stopped a retry."""
    circuits: Mapping[str, CircuitState]
    """The state of each tool's circuit breaker, as this runner last saw it."""
    store: str = "local"
    """Where the limiter and circuit state lives: ``"local"`` (the in-process store),
    ``"shared"`` (a shared store that answers, such as :class:`~tdk.runner.RedisStore`),
    ``"fallback"`` (a shared store out of reach: per-process state until it answers), or
    ``"custom"`` (a store that does not say)."""


class Counters:
    """The mutable counters behind :class:`RunnerStats`."""

    __slots__ = ("attempts", "calls", "circuits", "rejections", "retries")

    def __init__(self) -> None:
        self.calls = 0
        self.attempts = 0
        self.retries = 0
        self.rejections = dict.fromkeys(REFUSAL_KINDS, 0)
        self.circuits: dict[str, CircuitState] = {}

    def snapshot(self, live: Mapping[str, CircuitState], store: str) -> RunnerStats:
        """The counters now, as an immutable record; ``live`` states (read from an
        in-process store) win over the last-seen ones."""
        return RunnerStats(
            calls=self.calls,
            attempts=self.attempts,
            retries=self.retries,
            rejections=dict(self.rejections),
            circuits={**self.circuits, **live},
            store=store,
        )
