"""Linear time, tested without a bound on the clock.

A test of speed against seconds fails a good change on a busy machine (0.26 s against 0.25 s)
and passes a quadratic one on a fast machine. Instead, :func:`growth` times a call at a size
and at four times that size in the same run: linear work takes about four times as long,
quadratic work sixteen times. The runs of the two sizes take turns (a busy spell slows both
alike), the fastest run of each counts (the least disturbed), with the garbage collector off
while the clock runs, as ``timeit`` does; and :func:`assert_linear` measures again when the
growth looks too large (a quadratic call grows sixteen-fold every time, noise seldom twice).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Final

#: The most a call may slow down for four times the input: linear grows about four-fold,
#: quadratic sixteen-fold; the margin between is for the noise of a shared machine.
MOST_GROWTH: Final = 8.0
#: Each timed run lasts at least this long at the small size (a short run is mostly noise).
_LEAST_RUN_SECONDS: Final = 0.003


def assert_linear(
    call_at: Callable[[int], Callable[[], object]], size: int, *, attempts: int = 3
) -> None:
    """Fail unless one of up to ``attempts`` measures of :func:`growth` is below
    :data:`MOST_GROWTH`, naming every growth measured."""
    seen: list[float] = []
    for _ in range(attempts):
        seen.append(growth(call_at, size))
        if seen[-1] < MOST_GROWTH:
            return
    shown = ", ".join(f"{each:.1f}" for each in seen)
    raise AssertionError(
        f"four times the input took {shown} times as long (linear: about 4, quadratic: 16)"
    )


def growth(call_at: Callable[[int], Callable[[], object]], size: int, *, repeats: int = 5) -> float:
    """How many times longer a call takes at ``size`` than at ``size // 4``.

    ``call_at(n)`` builds the input of size ``n`` and returns the call to time (the building
    is not timed). Each timed run repeats the call enough times to last a few milliseconds at
    the small size, the same number of times at both sizes."""
    small, large = call_at(size // 4), call_at(size)
    large()  # (built once: whatever the call builds for its input, outside the clock)
    times = _loops(small)
    best = [float("inf"), float("inf")]
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            best[0] = min(best[0], _run(small, times))
            best[1] = min(best[1], _run(large, times))
    finally:
        if collecting:
            gc.enable()
    return best[1] / best[0]


def _loops(call: Callable[[], object]) -> int:
    """How many calls one timed run makes: enough for :data:`_LEAST_RUN_SECONDS`, judged by
    a second call (the first also builds what the call builds once)."""
    _run(call, 1)
    once = _run(call, 1)
    return max(1, min(1_000, int(_LEAST_RUN_SECONDS / max(once, 1e-7)) + 1))


def _run(call: Callable[[], object], times: int) -> float:
    start = time.perf_counter()
    for _ in range(times):
        call()
    return time.perf_counter() - start
