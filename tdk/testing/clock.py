"""``tdk_clock``: a fake clock and sleep for :class:`~tdk.ToolRunner`, so that rate limits,
circuit breakers and retries play out in no wall time.

``ToolRunner(toolkit, clock=..., sleep=...)`` is the runner's public seam: its limiter windows
and circuit reset times read ``clock``, and it waits between retries (and for a limiter's
slot) with ``sleep``. :class:`FakeClock` gives both: ``sleep`` moves the clock forward by the
time asked, at once, and records it; :meth:`FakeClock.advance` moves it by hand (to let a
circuit's reset timeout pass). A deadline given to the runner counts the fake waits too.

What it does not reach: a tool's own time limit (``@tool(timeout=...)``, the runner's
``timeout=``) runs on the event loop's real clock, as it must to interrupt a real call.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import asyncio
from typing import Any

from tdk._define.toolkit import Toolkit
from tdk.runner import ToolRunner

__all__ = ["FakeClock"]


class FakeClock:
    """A monotonic clock that moves only when told to or slept on.

    - ``now``: the current reading, in seconds (starts at ``start``);
    - ``clock()``: ``now``, as ``ToolRunner(clock=...)`` reads it;
    - ``await sleep(seconds)``: ``now += seconds`` at once (after letting other tasks run
      once), recorded in ``sleeps``;
    - ``advance(seconds)``: move ``now`` by hand;
    - ``runner(toolkit, **policies)``: a ``ToolRunner`` on this clock.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = float(start)
        """The current reading, in seconds."""
        self.sleeps: list[float] = []
        """Every wait asked of :meth:`sleep`, in order: the steps the runner took."""

    def clock(self) -> float:
        """The current reading (``ToolRunner(clock=...)``)."""
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of fake time: recorded, and the clock moved, at once."""
        if seconds < 0:
            raise ValueError(f"cannot sleep a negative time: {seconds!r}")
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # other tasks run, as they would during a real wait

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (a circuit's reset timeout passing...)."""
        if seconds < 0:
            raise ValueError(f"a monotonic clock does not go back: {seconds!r}")
        self.now += seconds

    @property
    def slept(self) -> float:
        """All the fake time slept, in seconds."""
        return sum(self.sleeps)

    def runner(self, toolkit: Toolkit, **policies: Any) -> ToolRunner:
        """A :class:`~tdk.ToolRunner` of ``toolkit`` with ``policies`` (``retry=``,
        ``rate_limit=``...), reading this clock and sleeping on it."""
        return ToolRunner(toolkit, clock=self.clock, sleep=self.sleep, **policies)

    def __repr__(self) -> str:
        return f"<FakeClock now={self.now:g} sleeps={len(self.sleeps)}>"
