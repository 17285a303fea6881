"""Worker threads for sync tools, and the bodies that outlive their callers.

A sync tool runs in a worker thread so that it never blocks the event loop. A thread cannot
be stopped: a body that overruns its time limit (or whose caller is cancelled) keeps running
after its call has returned. tdk therefore keeps its own small pool instead of the event
loop's default executor:

- a body that has lost its caller stops counting against the pool's size (up to a bound), so
  it cannot starve unrelated sync tools of threads: a replacement thread takes new work;
- the threads are daemon threads, so a body that never returns cannot keep ``asyncio.run()``
  (or the interpreter) from finishing;
- every outcome reaches the event loop through :class:`Job`, whatever the body raised
  (asyncio cannot put ``StopIteration`` into a future: with ``run_in_executor`` such a call
  never returned);
- a :class:`Job` says whether its body is still running, and calls back when it ends, so the
  runner can hold a bulkhead slot until the body has really finished;
- a thread that waits for sync calls it made lends the pool one place while it waits: a sync
  tool calling another (``run_sync()``, ``asyncio.run()`` of a call, from its own thread or
  from threads it starts) never waits for a place that its own wait holds, however many such
  calls run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["Job", "WorkerThreads", "run_in_worker"]

_LOG: Final = logging.getLogger("tdk")


class JobState(enum.Enum):
    """Where a job is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    DROPPED = "dropped"
    """Its caller gave up before a thread took it: the body never ran."""


QUEUED: Final = JobState.QUEUED
RUNNING: Final = JobState.RUNNING
FINISHED: Final = JobState.FINISHED
DROPPED: Final = JobState.DROPPED


class Job:
    """One call of a sync body in a worker thread.

    ``future`` (of the caller's event loop) is resolved when the body ends; :meth:`outcome`
    then returns its value or raises what it raised. The caller may stop waiting at any time
    (a time limit, a cancellation): the future is then cancelled, and a body still running
    goes on in its thread, no longer counted against the pool.
    """

    __slots__ = (
        "_call",
        "_error",
        "_on_end",
        "_pool",
        "_value",
        "_waiter",
        "abandoned",
        "future",
        "loop",
        "state",
    )

    def __init__(self, pool: WorkerThreads, call: Callable[[], Any]) -> None:
        self._pool = pool
        self._call = call
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()
        self.state = QUEUED
        self.abandoned = False
        """Whether the caller stopped waiting while the body was queued or running."""
        self._value: Any = None
        self._error: BaseException | None = None
        self._on_end: list[Callable[[], object]] | None = None
        self._waiter: _Waits | None = None
        """The submitting thread's count of the jobs it waits for, until this one ends."""

    @property
    def running(self) -> bool:
        """Whether the body is still running (or queued to run)."""
        return self.state is RUNNING or self.state is QUEUED

    def outcome(self) -> Any:
        """The body's return value; raises what the body raised."""
        error = self._error
        if error is None:
            return self._value
        self._error = None
        try:
            raise error
        finally:  # this frame joins the traceback: it must not hold the exception
            del error

    def when_ended(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` in the event loop once the body has ended (at once if it has,
        or if it never ran; in the worker thread if the loop has closed by then)."""
        if not self.running:
            callback()
            return
        if self._on_end is None:
            self._on_end = []
        self._on_end.append(callback)

    def _run(self) -> None:
        """In a worker thread: run the body and keep its outcome."""
        try:
            self._value = self._call()
        except BaseException as exc:  # everything, StopIteration and GeneratorExit included
            self._error = exc
        self._call = _done

    def _deliver(self) -> None:
        """In a worker thread, once the state says FINISHED: tell the event loop, or, when it
        has closed (nobody waits for the outcome any more), call the end callbacks here."""
        try:
            self.loop.call_soon_threadsafe(self._ended)
        except RuntimeError:
            self._value = self._error = None
            callbacks, self._on_end = self._on_end, None
            for callback in callbacks or ():
                with contextlib.suppress(Exception):  # no loop, no one to tell
                    callback()

    def _ended(self) -> None:
        """In the event loop: the body has ended (once: a job ends once)."""
        if self.future.cancelled():  # nobody will ask for the outcome: let it go now
            self._value = self._error = None
        else:
            self.future.set_result(None)
        callbacks, self._on_end = self._on_end, None
        for callback in callbacks or ():
            callback()

    def abandon(self) -> None:
        """The caller stops waiting (in the event loop): a queued body is dropped and never
        runs; a running one goes on without counting against the pool. Idempotent."""
        if self.abandoned or not self.running:
            return
        if self._pool.abandon(self):
            self._ended()  # dropped: it never runs, so it has ended

    def _caller_gone(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self.abandon()


def _done() -> None:
    """Stands in for a finished job's call (drops the body's arguments)."""


class _Waits:
    """How many jobs of a pool one thread waits for (it submitted them, and they have not
    ended, nor been given up)."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs = 0


class WorkerThreads:
    """A pool of daemon threads for sync bodies.

    At most ``max_workers`` bodies with a caller run at once, plus one for every thread that
    waits for jobs it submitted (the thread of an event loop, a sync body calling another
    sync tool, a thread such a body started): a body waiting on a job of its own always
    leaves room for it. More wait in a queue. Bodies whose caller has gone (see
    :class:`Job`) do not count, up to ``max_lingering`` of them: past that, they count
    again, and new work waits for them. Threads start on demand and
    live as long as the process (as ``ThreadPoolExecutor``'s do), but for the surplus a
    lingering body leaves when it ends, which goes away.

    The hand-off is a ``queue.SimpleQueue`` of jobs, with exact counts (under a lock) of the
    jobs queued and the threads idle: a job starts a thread when there are more jobs than
    idle threads. (``ThreadPoolExecutor`` counts idle threads with a semaphore that may count
    a thread twice: a pool whose threads all wait for work of its own could then wait for
    good.)
    """

    def __init__(self, max_workers: int | None = None, max_lingering: int | None = None) -> None:
        self.max_workers: Final = max_workers or min(32, (os.cpu_count() or 1) + 4)
        """Bodies with a caller running at once."""
        self.max_lingering: Final = self.max_workers if max_lingering is None else max_lingering
        """Bodies without a caller that do not count against ``max_workers``."""
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._queued = 0
        """Jobs in the queue (dropped ones too, until a thread takes them)."""
        self._idle = 0
        """Threads waiting for a job."""
        self._threads = 0
        """Live worker threads."""
        self._lingering = 0
        """Of those, threads running a body whose caller has gone."""
        self._waiting = 0
        """Threads (of the pool or not) waiting for jobs they submitted: each lends a place."""
        self._local = threading.local()
        """``waits``: this thread's :class:`_Waits`."""
        self._started = 0

    def submit(self, call: Callable[[], Any]) -> Job:
        """Queue ``call`` (no arguments) for a worker thread; from the event loop's thread."""
        job = Job(self, call)
        job.future.add_done_callback(job._caller_gone)
        waits = getattr(self._local, "waits", None)
        if waits is None:
            waits = self._local.waits = _Waits()
        job._waiter = waits
        with self._lock:
            waits.jobs += 1
            if waits.jobs == 1:  # this thread starts waiting: it lends a place
                self._waiting += 1
            self._queued += 1
            if self._queued > self._idle:  # no idle thread for it: start one
                self._start_if_room()
        self._queue.put(job)
        return job

    def abandon(self, job: Job) -> bool:
        """The caller of ``job`` stopped waiting: drop it if it has not started (True), else
        stop counting its thread, and start another if work is waiting (False)."""
        with self._lock:
            job.abandoned = True
            self._stop_waiting(job)
            if job.state is QUEUED:
                job.state = DROPPED  # its thread will skip it
                return True
            if job.state is not RUNNING:  # pragma: no cover (it ended as its caller gave up)
                return False
            self._lingering += 1
            if self._lingering > self.max_lingering:
                _LOG.warning(
                    "%d sync tool bodies are still running after their calls ended; "
                    "new sync calls wait for them",
                    self._lingering,
                )
            if self._queued > self._idle:
                self._start_if_room()
            return False

    def _stop_waiting(self, job: Job) -> None:
        """``job`` has ended, or its caller gave up: its submitter no longer waits for it
        (lock held)."""
        waits = job._waiter
        if waits is not None:
            job._waiter = None
            waits.jobs -= 1
            if waits.jobs == 0:
                self._waiting -= 1

    def stats(self) -> dict[str, int]:
        """Now: the pool's ``threads`` and, of them, ``lingering`` (bodies without a caller);
        ``waiting``: threads, of the pool or not, waiting for jobs they submitted."""
        with self._lock:
            return {
                "threads": self._threads,
                "lingering": self._lingering,
                "waiting": self._waiting,
            }

    def _counted(self) -> int:
        """Threads that count against ``max_workers`` (lock held)."""
        return self._threads - min(self._lingering, self.max_lingering) - self._waiting

    def _start_if_room(self) -> None:
        """Start a thread if the pool has room (lock held)."""
        if self._counted() >= self.max_workers:
            return
        self._started += 1
        thread = threading.Thread(
            target=self._work, name=f"tdk-worker-{self._started}", daemon=True
        )
        thread.start()
        self._threads += 1

    def _work(self) -> None:
        """A worker thread: take jobs, until a lingering body it ran makes it surplus."""
        lock = self._lock
        while True:
            with lock:
                self._idle += 1
            job = self._queue.get()
            with lock:
                self._idle -= 1
                self._queued -= 1
                dropped = job.state is DROPPED
                if not dropped:
                    job.state = RUNNING
            if not dropped:
                job._run()
                with lock:
                    job.state = FINISHED
                    self._stop_waiting(job)
                    if job.abandoned:
                        self._lingering -= 1
                    surplus = self._counted() > self.max_workers  # a replacement took its place
                    if surplus:
                        self._threads -= 1
                job._deliver()  # after FINISHED: when_ended() never misses the end
                if surplus:
                    return

    def _after_fork(self) -> None:  # pragma: no cover (run in a forked child, see the tests)
        """In a forked child: the parent's threads do not exist here."""
        self._lock = threading.Lock()
        self._queue = queue.SimpleQueue()
        self._threads = self._lingering = self._waiting = self._queued = self._idle = 0
        self._local = threading.local()


_POOL: Final = WorkerThreads()
if hasattr(os, "register_at_fork"):  # pragma: no branch (every POSIX system has it)
    os.register_at_fork(after_in_child=_POOL._after_fork)


def run_in_worker(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Job:
    """Run ``fn(**kwargs)`` in a worker thread, with the caller's context variables."""
    context = contextvars.copy_context()
    return _POOL.submit(lambda: context.run(fn, **kwargs))
