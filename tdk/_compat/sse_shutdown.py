"""sse-starlette's process-wide "shutting down" flag, put back once a server has ended.

The MCP SDK streams its HTTP answers with sse-starlette, which wraps uvicorn's signal handler:
Ctrl-C or SIGTERM sets ``sse_starlette.sse.AppStatus.should_exit`` for the whole process (so
that streams end and the server can stop), and nothing ever clears it. In a process that goes
on after its server (``tdk.__main__.main(["serve", ..., "--http"])`` called by a program, a
test suite), every SSE stream of every later server would end at once, before its answer. tdk
puts the flag back as it found it once its server has ended (checked on sse-starlette 3.7;
``tests/test_compat.py`` fails when the flag moves). Without sse-starlette this does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["shutdown_flag_restored"]


@contextlib.contextmanager
def shutdown_flag_restored() -> Iterator[None]:
    """Run a server in the block; afterwards, a shutdown flag that was clear is clear again."""
    status = app_status()
    clear = status is not None and getattr(status, "should_exit", None) is False
    try:
        yield
    finally:
        if clear:
            with contextlib.suppress(Exception):
                status.should_exit = False


def app_status() -> Any:
    """sse-starlette's ``AppStatus`` (None when it cannot be imported)."""
    try:
        from sse_starlette.sse import AppStatus
    except Exception:  # (not installed, or broken: nothing to put back)
        return None
    return AppStatus
