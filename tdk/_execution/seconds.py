"""Durations and factors given by users: a finite real number, or a clear refusal.

``math.isfinite(10**400)`` raises ``OverflowError`` and ``repr(10**5000)`` raises
``ValueError``: the checks of every duration option (a tool's ``timeout``, ``run(timeout=)``,
the runner's policies) go through :func:`finite` and name the value with :func:`shown`, so that
a wrong value is always the documented ``TypeError``/``ValueError``, never another exception.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["finite", "shown"]

#: Longest text of a value a message repeats.
_MAX_SHOWN: Final = 40


def finite(value: object) -> float | None:
    """``value`` as a float when it is an int or float (not a bool) that is finite as a
    float; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def shown(value: object) -> str:
    """``repr(value)`` for a message, cut, or its type when it has none to give."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__}"
    return text if len(text) <= _MAX_SHOWN else f"{text[:_MAX_SHOWN]}..."
