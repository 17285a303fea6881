"""Progress of a call: what ``ToolContext.progress()`` and the runner's waits report, and who
hears it.

A report goes to the listeners of the call running (a context variable, so a sync tool's
worker thread reports to its call too): a host that carries progress to its client (MCP,
for a client that gave a progress token: ``tdk.hosts._mcp_progress``) and, when the call is
traced, its span (an event). With no listener a report does nothing.

What a host sends is a :class:`Reporter`'s: at most one notification each
:data:`MIN_INTERVAL` seconds (4 a second) while the call runs; a report that comes sooner
waits, replaced by any later one, and goes out when its time comes, or when the call ends
(the call's last state is never dropped, and it reaches the client before the result).
``done`` never goes down: a report below the last one is raised to it, and one that would
not increase what was sent is sent a hair above it (MCP wants each notification's progress
to increase). The runner's own reports (a retry's wait, a queue) keep the tool's last
``done`` and ``total`` and say why in ``message``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextvars import ContextVar
from typing import Final, TypeAlias

from tdk._failures.redact import redact_text

__all__ = [
    "MAX_MESSAGE",
    "MIN_INTERVAL",
    "Listener",
    "Reporter",
    "listened",
    "listening",
    "report",
    "report_progress",
]

#: Seconds between two notifications of one call, at least: at most 4 a second.
MIN_INTERVAL: Final = 0.25
#: The longest message sent, in characters (a longer one is cut).
MAX_MESSAGE: Final = 1000

#: Hears a report: ``(done, total, message, secrets)``; ``done`` None for the runner's own
#: (the call's count does not move), ``secrets``: the exact values to keep out of what is sent.
Listener: TypeAlias = Callable[[float | None, float | None, str | None, tuple[str, ...]], None]

_LISTENERS: Final[ContextVar[tuple[Listener, ...]]] = ContextVar("tdk_progress", default=())


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """``listener`` hears the reports of the call run in the block (and of what it starts)."""
    token = _LISTENERS.set((*_LISTENERS.get(), listener))
    try:
        yield
    finally:
        _LISTENERS.reset(token)


def listened() -> bool:
    """Whether the call running has listeners (a report would reach someone)."""
    return bool(_LISTENERS.get())


def report(
    done: float | None,
    total: float | None = None,
    message: str | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    """Tell the listeners of the call running (none: nothing happens); one that fails is
    skipped."""
    for listener in _LISTENERS.get():
        with contextlib.suppress(Exception):
            listener(done, total, message, secrets)


class _Reported:
    """What ``ToolContext.progress()`` returns: already done (the report is handed over at
    once), awaitable so that an async tool writes ``await context.progress(...)``, and
    harmless when a sync tool does not await it."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # (a generator that ends at once)


_REPORTED: Final = _Reported()


def report_progress(
    done: float, total: float | None, message: str | None, secrets: tuple[str, ...]
) -> Awaitable[None]:
    """``ToolContext.progress()``: check the report, hand it to the listeners, and return an
    awaitable that is already done. ``TypeError``/``ValueError`` for a report that is not a
    finite ``done`` >= 0, a ``total`` (None or finite, >= 0) and a ``message`` (None or str)."""
    _check_number("done", done)
    if total is not None:
        _check_number("total", total)
    if message is not None and not isinstance(message, str):
        raise TypeError(f"progress message must be a str or None, not {type(message).__name__}")
    if _LISTENERS.get():
        report(float(done), None if total is None else float(total), message, secrets)
    return _REPORTED


def _check_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"progress {name} must be a number, not {type(value).__name__}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # (an int too large for a float)
        finite = False
    if not finite or value < 0:
        raise ValueError(f"progress {name} must be a finite number >= 0, not {value!r}")


#: Sends one notification: ``(progress, total, message)``.
Send: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]

_State: TypeAlias = tuple[float, float | None, str | None, tuple[str, ...]]


class Reporter:
    """The progress of one call, sent through ``send``, throttled and monotonic (see the
    module docstring). Its :meth:`hear` is a :data:`Listener`, safe to call from any
    thread; :meth:`close` sends what is left once the call has ended."""

    __slots__ = (
        "_closing",
        "_done",
        "_last_sent",
        "_loop",
        "_pending",
        "_pump",
        "_send",
        "_sent",
        "_thread",
        "_total",
        "_wake",
    )

    def __init__(self, send: Send) -> None:
        self._send = send
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._done = 0.0
        """The highest ``done`` reported (what a runner's report keeps)."""
        self._total: float | None = None
        self._sent = -math.inf
        """The progress of the last notification sent."""
        self._last_sent = -math.inf
        """When it was sent (the loop's clock)."""
        self._pending: _State | None = None
        self._pump: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False

    def hear(
        self,
        done: float | None,
        total: float | None,
        message: str | None,
        secrets: tuple[str, ...],
    ) -> None:
        """Take a report (from the loop's thread or a tool's worker thread)."""
        if threading.get_ident() == self._thread:
            self._take(done, total, message, secrets)
            return
        with contextlib.suppress(RuntimeError):  # (the loop has closed: the call is over)
            self._loop.call_soon_threadsafe(self._take, done, total, message, secrets)

    def _take(
        self,
        done: float | None,
        total: float | None,
        message: str | None,
        secrets: tuple[str, ...],
    ) -> None:
        if self._closing:
            return
        if done is not None and done > self._done:
            self._done = done
        if total is not None:
            self._total = total
        self._pending = (self._done, self._total, message, secrets)
        if self._pump is None or self._pump.done():
            self._pump = self._loop.create_task(self._pumping())

    async def _pumping(self) -> None:
        """Send what is pending, each at most every :data:`MIN_INTERVAL` seconds (at once
        once the call is closing), until nothing is."""
        while self._pending is not None:
            wait = self._last_sent + MIN_INTERVAL - self._loop.time()
            if wait > 0 and not self._closing:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
            state, self._pending = self._pending, None
            if state is not None:
                await self._sent_now(state)

    async def _sent_now(self, state: _State) -> None:
        done, total, message, secrets = state
        progress = done if done > self._sent else math.nextafter(self._sent, math.inf)
        if total is not None and total < progress:
            total = None  # (a total below the progress would say it is past the end)
        text = None if message is None else redact_text(message, secrets, limit=MAX_MESSAGE)
        self._sent, self._last_sent = progress, self._loop.time()
        with contextlib.suppress(Exception):  # a client gone: the call goes on regardless
            await self._send(progress, total, text)

    def cancel(self) -> None:
        """The call was cancelled (or failed outside its result): send nothing more."""
        self._closing = True
        self._pending = None
        if self._pump is not None:
            self._pump.cancel()

    async def close(self) -> None:
        """The call has ended: send the report still pending now, and take no more."""
        self._closing = True
        self._wake.set()
        pump = self._pump
        if pump is not None and not pump.done():
            await pump
