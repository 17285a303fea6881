"""The rate limiter: a sliding window log of recent attempts, one per tool.

A window log admits at most ``calls`` attempts in ANY interval of ``period`` seconds (a token
bucket would allow a burst of twice that across a refill), and it knows exactly when it will
admit the next one: when the oldest attempt that keeps the window full leaves it. Its state is
at most ``calls`` timestamps.
"""

from __future__ import annotations

import math
from collections import deque

from tdk.runner._policies import RateLimit

__all__ = ["admit", "wait_ms"]


def admit(log: deque[float] | None, limit: RateLimit, now: float) -> tuple[deque[float], float]:
    """A state change for :meth:`StateStore.update <tdk.runner.StateStore.update>`: admit an
    attempt at ``now`` (answer 0.0) or answer the seconds until one would be admitted.

    An attempt at ``t`` leaves the window at ``t + period`` exactly. When the limit was
    lowered since the log was written, the wait is until enough attempts have left. Entries
    later than ``now`` (a clock stepped back, or another process's clock ahead of this one)
    count as made ``now``, so no wait is ever longer than ``period``.
    """
    if log is None:
        log = deque()
    elif log and log[-1] > now:
        stepped = [min(moment, now) for moment in log]
        log.clear()
        log.extend(stepped)
    horizon = now - limit.period
    while log and log[0] <= horizon:
        log.popleft()
    if len(log) < limit.calls:
        log.append(now)
        return log, 0.0
    return log, log[len(log) - limit.calls] + limit.period - now


def wait_ms(seconds: float) -> int:
    """Seconds as whole milliseconds, rounded up (at least 1 for any positive wait).

    A femtosecond is taken off first, so that float noise (``0.75 * 1000 ==
    750.0000000001``) does not add a millisecond, while any real fraction still rounds up.
    """
    return max(1, math.ceil(seconds * 1000 - 1e-9)) if seconds > 0 else 0
