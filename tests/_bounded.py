"""A run that fails instead of hanging: a coroutine run in a new event loop in a daemon thread,
joined with a timeout.

A test of a body that swallows its cancellation cannot bound itself with ``asyncio.wait_for``
(the wait would hang with the body), nor with ``asyncio.run`` (which waits for what the body
leaves behind): :func:`run_bounded` fails the test after ``within`` seconds and leaves the hung
loop behind in its thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def run_bounded(awaitable: Any, within: float = 60.0) -> Any:
    """Run a coroutine in a new loop in a thread; fail instead of hanging after ``within``
    seconds (the thread is a daemon: a hung loop is left behind)."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(awaitable)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within)
    assert outcome, f"still running after {within} s"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
