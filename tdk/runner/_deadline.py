"""The deadline of one call, on the monotonic clock whatever clock the runner's state reads.

A runner's ``clock=`` is what the limiter's windows and the circuits' reset times read; runners
sharing a store across processes pass ``time.time``, which an NTP correction can step back
(or forward). A deadline read on it would stretch by every step back. So a call's deadline
runs on :func:`time.monotonic`, and counts the waits the runner asked of its ``sleep=`` too:
time spent is the longer of the two, so a fake sleep in a test stands for the time it says
it waited, and a real one is counted once.
"""

from __future__ import annotations

import time
from typing import Final

__all__ = ["Deadline"]

_monotonic: Final = time.monotonic


class Deadline:
    """The time left to one call, out of ``seconds`` from its start."""

    __slots__ = ("_started", "_waited", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds: Final = seconds
        """The whole call's budget (the policy's ``deadline``)."""
        self._started = _monotonic()
        self._waited = 0.0

    def waited(self, seconds: float) -> None:
        """The runner asked its ``sleep`` to wait ``seconds``."""
        self._waited += seconds

    def remaining(self) -> float:
        """Seconds left; zero or less once the deadline has passed."""
        return self.seconds - max(_monotonic() - self._started, self._waited)

    def leaves(self, wait: float) -> bool:
        """Whether a wait of ``wait`` seconds ends before the deadline (with time left for
        the attempt after it)."""
        return wait < self.remaining()
