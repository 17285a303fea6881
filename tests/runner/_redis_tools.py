"""What the ``RedisStore`` tests share: the tools their runners call, Redis paused under a call,
the runner's log records they read, a custom change and a clock moved by hand.

``TOOLKIT`` calls an upstream the test takes down (``UPSTREAM``) or holds (``GATE``);
``WORK_TOOLKIT`` counts the bodies that ran (``BODIES``), fails as a down upstream, or pauses
Redis under its first call. ``tests/runner/conftest.py`` resets their state before each test.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from _redis_support import command

from tdk import Toolkit, tool
from tdk.errors import UpstreamServerError

# -- the tools -------------------------------------------------------------------------------

UPSTREAM = {"down": False, "calls": 0}


@tool(read_only=True)
async def ping() -> str:
    """Answer pong."""
    UPSTREAM["calls"] += 1
    return "pong"


@tool(read_only=True)
async def flaky() -> str:
    """Call an upstream that fails with a 503 while it is down."""
    UPSTREAM["calls"] += 1
    if UPSTREAM["down"]:
        raise UpstreamServerError("the upstream is down", status_code=503)
    return "ok"


GATE: dict[str, asyncio.Event] = {}


@tool(read_only=True)
async def slow() -> str:
    """Succeed once the test opens the gate."""
    await GATE["open"].wait()
    return "late"


TOOLKIT = Toolkit("redis_tests", [ping, flaky, slow])


BODIES: list[float] = []
#: The port of the server a tool pauses (``pausing``).
PAUSED = {"port": 0, "calls": 0}


@tool(read_only=True)
async def work() -> str:
    """Count a body that ran."""
    BODIES.append(time.monotonic())
    await asyncio.sleep(0.01)
    return "done"


@tool(read_only=True)
async def broken() -> str:
    """Fail as an upstream that is down."""
    raise UpstreamServerError("down", status_code=503)


@tool(read_only=True)
async def pausing() -> str:
    """The first call pauses the server's writes (Redis freezes under the call) and fails as
    an upstream that is down; the next one succeeds."""
    PAUSED["calls"] += 1
    if PAUSED["calls"] == 1:
        pause(PAUSED["port"])
        raise UpstreamServerError("down", status_code=503)
    return "done"


WORK_TOOLKIT = Toolkit("redis_work", [work, broken, pausing])


# -- Redis paused under a call ---------------------------------------------------------------

#: How long the tests pause a server (milliseconds): past any store timeout they use.
PAUSE_MS = 20_000


def pause(port: int) -> None:
    """Hold every write (and every script) of the server on ``port`` until :func:`unpause`."""
    assert command(port, "CLIENT", "PAUSE", str(PAUSE_MS), "WRITE") == b"+OK\r\n"


def unpause(port: int) -> None:
    """Let the server on ``port`` run writes again."""
    assert command(port, "CLIENT", "UNPAUSE") == b"+OK\r\n"


# -- what the runner logged ------------------------------------------------------------------

OUTAGE = "Redis failed ("


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The WARNING records of an outage that ``caplog`` holds."""
    return [
        r
        for r in caplog.records
        if r.name == "tdk.runner"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith(OUTAGE)
    ]


def outages(caplog: pytest.LogCaptureFixture) -> int:
    """How many outages the runner logged (one WARNING each)."""
    return sum(
        r.name == "tdk.runner" and r.getMessage().startswith("Redis failed") for r in caplog.records
    )


def replacements(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNINGs of keys replaced, as logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tdk.runner"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("Redis key ")
    ]


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every WARNING (or worse) the runner logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tdk.runner" and r.levelno >= logging.WARNING
    ]


# -- a custom change, and a clock ------------------------------------------------------------


def increment(state: int | None, by: int) -> tuple[int, int]:
    """A custom change: add ``by`` to a counter (JSON: a number)."""
    total = (state or 0) + by
    return total, total


class FakeClock:
    """The in-memory side's clock: moved by the sequences' sleeps only."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
