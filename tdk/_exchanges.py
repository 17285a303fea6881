"""Whether an upstream answered during the current attempt of a call.

The runner retries a tool that may write only where the upstream certainly did not act: a
connection that failed before its request was sent. That is only certain when no earlier
request of the same attempt was answered (a redirect followed, a first request to another
service): tdk's HTTP hook notes every answer it sees here, and the runner asks.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

__all__ = ["ANSWERED", "note_answer", "pass_answers_on"]

#: While a tracked attempt runs: a one-item list, the number of answers seen.
ANSWERED: Final[ContextVar[list[int] | None]] = ContextVar("tdk_answered", default=None)


def note_answer() -> None:
    """An upstream answered a request of the current attempt (if one is tracked)."""
    cell = ANSWERED.get()
    if cell is not None:
        cell[0] += 1


def pass_answers_on(cell: list[int] | None) -> None:
    """Count the answers of a call that ended (``cell``) in the call around it, if any: a
    tool that calls another through a runner acted when the inner one did."""
    outer = ANSWERED.get()
    if outer is not None and cell is not None:
        outer[0] += cell[0]
