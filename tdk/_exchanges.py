"""Whether an upstream answered during the current attempt of a call.

The runner retries a tool that may write only where the upstream certainly did not act: a
connection that failed before its request was sent. That is only certain when no earlier
request of the same attempt was answered (a redirect followed, a first request to another
service): tdk's HTTP hook notes every answer it sees here, and the runner asks.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

__all__ = ["ANSWERED", "note_answer"]

#: While a tracked attempt runs: a one-item list, set to True by the first answer.
ANSWERED: Final[ContextVar[list[bool] | None]] = ContextVar("tdk_answered", default=None)


def note_answer() -> None:
    """An upstream answered a request of the current attempt (if one is tracked)."""
    cell = ANSWERED.get()
    if cell is not None:
        cell[0] = True
