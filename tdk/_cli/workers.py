"""``tdk serve --http --workers N``: N worker processes on one port, and their supervisor.

The supervisor binds the listening socket itself (a port in use is said once, status 1,
before any worker starts) and starts each worker as ``python -m tdk`` with the command line
it was given, plus a hidden ``--worker`` option naming the inherited listening socket, the
worker's end of a control socket, and its number. Each worker is a whole ``tdk serve
--http``: it loads the target itself (a factory, ``tools.py:make``, runs in each), drains its
own stderr, holds its own deadline, and serves stateless streamable HTTP on the shared socket
(see ``tdk.hosts._mcp_http``). The kernel hands each connection to one worker that accepts
it, so any request may land on any worker; a runner with a ``RedisStore`` shares its limits
and circuits across them.

**One socket, inherited; not SO_REUSEPORT.** With ``SO_REUSEPORT`` each worker would bind a
socket of its own and the kernel would spread connections by a hash of their addresses:
connections waiting in a worker that dies are reset with it, any process of the same user may
bind the port too and take a share of the traffic, and other systems (macOS) do not spread
at all. One listening socket has one queue that every worker takes from: a worker that dies
leaves the waiting connections to the others, the port is this server's alone, and it works
wherever ``fork``/``exec`` do. Workers are new processes (not forks of the supervisor), so no
thread, connection or event loop of the supervisor is copied into them.

**Start.** The first worker starts alone; the others once it serves. A target that cannot be
loaded is so reported once, by that worker, and the command ends with its status (1, or 2
for a usage error), as one process would; the URL is said once the first worker serves, and
the workers' pids once every worker serves (one that ended instead is said as below).

**Stop.** SIGINT and SIGTERM are passed on to every worker, once, as SIGTERM: workers run in
process groups of their own, so a Ctrl-C in a terminal reaches them through the supervisor
only.
Each ends as one server does (its calls cancelled, its sessions closed); one still running
after :data:`STOP_GRACE` seconds is killed. Status 130. A worker whose supervisor is gone
(killed, so that it could pass nothing on) sees its control socket close and stops as on
SIGTERM: no worker outlives its supervisor holding the port.

**A worker that dies is not replaced.** The supervisor says on stderr which worker ended, how
(its status, or the signal), and how many still serve. What ended one worker (a crash in C
code, the kernel's OOM killer, a bug a request triggers) would likely end its replacement
too, and a supervisor that restarts workers in a loop hides that; the workers left go on
serving. When none is left the supervisor ends with status 1, for whatever runs it
(systemd's ``Restart=``, a container's restart policy) to restart the whole server, visibly
and with its own backoff.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tdk._cli.addresses import bound, listening_address, reach_of, unbracketed
from tdk._cli.drain import Drain
from tdk._cli.streams import on_descriptor, open_stderr
from tdk._execution.loop import run_in_new_loop

__all__ = [
    "READY",
    "STOP_GRACE",
    "WORKER_OPTION",
    "Seat",
    "say_ready",
    "seat",
    "serve_workers",
    "watch_lifeline",
]

#: The hidden option of a worker's command line: its seat (see :class:`Seat`).
WORKER_OPTION: Final = "--tdk-worker"

#: Seconds workers get to end once the signal is passed on, before they are killed.
STOP_GRACE: Final = 15.0

#: What a worker writes on its control socket once it serves.
READY: Final = b"ready\n"

#: The signals passed on to the workers.
_PASSED_ON: Final = (signal.SIGINT, signal.SIGTERM)

#: Connections the shared socket queues before a worker accepts them (uvicorn's default).
_BACKLOG: Final = 2048


@dataclass(frozen=True, slots=True)
class Seat:
    """A worker's place, from its hidden ``--tdk-worker`` option: the listening socket it
    shares, its end of the control socket, and its number (0 for the first)."""

    listener: int
    control: int
    index: int

    def __str__(self) -> str:
        return f"{self.listener}:{self.control}:{self.index}"

    def sockets(self) -> tuple[socket.socket, socket.socket]:
        """The listening socket and the control socket, from the descriptors inherited."""
        return socket.socket(fileno=self.listener), socket.socket(fileno=self.control)


def say_ready(control: socket.socket) -> None:
    """The worker's side: tell the supervisor, through ``control``, that it serves (a
    supervisor already gone hears nothing)."""
    with contextlib.suppress(OSError):
        control.sendall(READY)


def watch_lifeline(
    loop: asyncio.AbstractEventLoop, control: socket.socket, stop: Callable[[], None]
) -> None:
    """The worker's side: call ``stop()`` once when the supervisor's end of ``control``
    closes (the supervisor never writes on it: readable means closed)."""

    def orphaned() -> None:
        loop.remove_reader(control)
        stop()

    loop.add_reader(control, orphaned)


def seat(text: str) -> Seat:
    """The hidden ``--tdk-worker LISTENER:CONTROL:INDEX`` (for argparse: its ``ValueError``
    is a usage error)."""
    listener, control, index = (int(part) for part in text.split(":"))
    if min(listener, control, index) < 0:
        raise ValueError(text)
    return Seat(listener, control, index)


def serve_workers(options: argparse.Namespace, argv: Sequence[str]) -> int:
    """Supervise ``options.workers`` workers of ``tdk serve`` (``argv``: its command line,
    without the program) until a signal or the last worker's end; the exit status."""
    open_stderr()
    stream = sys.stderr  # (a test's capture, an embedding program's file: written as it is)
    target = stream if stream is not None and not on_descriptor(stream, 2) else 2
    errors = Drain(target, "stderr")  # (never blocks: nobody may read it)

    def say(line: str) -> None:
        errors.put(f"{line}\n".encode(errors="backslashreplace"))

    host = unbracketed(options.host)
    try:
        with contextlib.ExitStack() as stack:
            try:
                where = listening_address(host, options.port)
                listener = stack.enter_context(bound(where))
                listener.listen(_BACKLOG)
            except OSError as cannot:  # a port in use, an address not of this machine
                reason = cannot.strerror or type(cannot).__name__
                say(f"tdk serve: cannot serve on {options.host}:{options.port}: {reason}")
                return 1
            plan = _Plan(list(argv), listener, options.workers, say)
            if options.allow_unauthenticated and reach_of(host) != "loopback":
                plan.notes.append(
                    f"tdk serve: WARNING: serving on {host} without authentication "
                    "(--allow-unauthenticated): whoever reaches it can call every tool"
                )
            plan.notes.append(f"tdk serve: {where.url}")
            return run_in_new_loop(_supervise(plan))
    finally:
        errors.settle(1.0)


@dataclass(slots=True)
class _Plan:
    """What the supervisor starts its workers with, and how it speaks."""

    argv: list[str]
    listener: socket.socket
    count: int
    say: Callable[[str], None]
    notes: list[str] = field(default_factory=list)
    """Lines said once the first worker serves (the URL last)."""


class _Worker:
    """A worker process: its number, the process, the supervisor's end of its control
    socket (closed: the worker stops), and the task that reaps it."""

    def __init__(self, index: int, process: asyncio.subprocess.Process, control: socket.socket):
        self.index = index
        self.process = process
        self.control = control
        self.ended: asyncio.Task[int] = asyncio.ensure_future(process.wait())

    def __str__(self) -> str:
        return f"worker {self.index + 1} (pid {self.process.pid})"


async def _start(plan: _Plan, index: int) -> _Worker:
    """Start worker number ``index``: ``python -m tdk`` with the supervisor's command line
    and its seat, in a process group of its own, its stdin closed."""
    mine, theirs = socket.socketpair()
    try:
        place = Seat(plan.listener.fileno(), theirs.fileno(), index)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tdk",
            *plan.argv,
            f"{WORKER_OPTION}={place}",
            stdin=subprocess.DEVNULL,
            pass_fds=(place.listener, place.control),
            process_group=0,
        )
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
    mine.setblocking(False)
    return _Worker(index, process, mine)


async def _supervise(plan: _Plan) -> int:
    """Start the workers, the first alone; then watch them until a signal (passed on to
    them) or the last one's end. The exit status."""
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[int] = loop.create_future()

    def on_signal(number: int) -> None:
        if not signalled.done():
            signalled.set_result(number)

    for number in _PASSED_ON:
        loop.add_signal_handler(number, on_signal, number)
    workers: list[_Worker] = []
    try:
        return await _start_and_watch(plan, workers, signalled)
    except OSError as cannot:  # (no process to start: too many open files, say)
        plan.say(f"tdk serve: cannot start a worker: {cannot.strerror or type(cannot).__name__}")
        await _stop(workers, plan)
        return 1
    finally:
        for number in _PASSED_ON:
            loop.remove_signal_handler(number)
        for each in workers:  # (a worker whose control socket closes stops by itself)
            each.control.close()


async def _start_and_watch(
    plan: _Plan, workers: list[_Worker], signalled: asyncio.Future[int]
) -> int:
    """Start the workers into ``workers``, the first alone, and watch them (see
    :func:`_supervise`). The exit status."""
    workers.append(await _start(plan, 0))
    if not await _serves(workers[0], signalled):
        if signalled.done():
            return await _stop(workers, plan)
        status = await workers[0].ended  # (it said why, on the stderr it shares)
        return status if status > 0 else 1
    for note in plan.notes:
        plan.say(note)
    for index in range(1, plan.count):
        workers.append(await _start(plan, index))
    await asyncio.gather(*(_serves(each, signalled) for each in workers[1:]))
    if signalled.done():
        return await _stop(workers, plan)
    pids = ", ".join(str(each.process.pid) for each in workers)
    plan.say(f"tdk serve: {plan.count} worker processes (pids {pids})")
    return await _watch(workers, signalled, plan)


async def _serves(worker: _Worker, signalled: asyncio.Future[int]) -> bool:
    """Whether ``worker`` says it serves before it ends or a signal comes."""
    loop = asyncio.get_running_loop()
    said: asyncio.Future[Any] = asyncio.ensure_future(loop.sock_recv(worker.control, len(READY)))
    try:
        await asyncio.wait({said, signalled}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        said.cancel()
    return said.done() and not said.cancelled() and said.result() == READY


async def _watch(workers: list[_Worker], signalled: asyncio.Future[int], plan: _Plan) -> int:
    """Wait for a signal, saying each worker's end meanwhile (it is not replaced); 1 once
    none is left, else what :func:`_stop` gives."""
    live = {each.ended: each for each in workers}
    while live:
        waiting: set[asyncio.Future[int]] = {signalled, *live}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if signalled.done():
            return await _stop(list(live.values()), plan)
        for task in [task for task in live if task.done()]:
            ended = live.pop(task)
            plan.say(
                f"tdk serve: {ended} {_how(task.result())}: not replaced; "
                f"{len(live)} of {plan.count} workers serve"
            )
    plan.say("tdk serve: no worker left")
    return 1


async def _stop(workers: list[_Worker], plan: _Plan) -> int:
    """Pass the signal on to each worker still running, as SIGTERM (a worker serving takes it
    as it takes Ctrl-C; one still loading its target ends quietly, where a SIGINT would print
    Python's ``KeyboardInterrupt`` traceback); give them :data:`STOP_GRACE` seconds to end,
    kill those left (saying so); status 130."""
    for each in workers:
        if each.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                each.process.send_signal(signal.SIGTERM)
    ended = {each.ended for each in workers}
    if ended:
        await asyncio.wait(ended, timeout=STOP_GRACE)
    for each in workers:
        if not each.ended.done():
            plan.say(f"tdk serve: {each} did not end within {STOP_GRACE:g} s: killed")
            with contextlib.suppress(ProcessLookupError):
                each.process.kill()
    if ended:
        await asyncio.wait(ended)
    return 130


def _how(status: int) -> str:
    """How a worker ended, from its exit status (negative: the signal that ended it)."""
    if status >= 0:
        return f"ended with status {status}"
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    return f"was ended by {name}"
