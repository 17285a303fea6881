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
- a thread blocked on sync calls it made (a worker thread whose body calls another sync
  tool, a thread in ``run_sync()``) lends a place of its own, for its own calls only: a body
  never waits for a place that its own wait holds, so sync tools calling sync tools never
  deadlock, and the pool grows by one thread per such waiting body at most. A thread that
  runs its calls' event loop itself says so with :func:`blocking`; a thread whose call runs
  on tdk's own loop (:mod:`tdk._execution.loop`) hands that loop a :func:`waiting_context`, so the
  jobs its call submits there lend the place of the thread that waits for them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import enum
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["Job", "WorkerThreads", "blocking", "call_ended", "run_in_worker", "waiting_context"]

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
        "_lent",
        "_on_end",
        "_pool",
        "_value",
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
        self._lent: _Waits | None = None
        """The record whose lent place runs this job (None: a thread of the pool's own)."""

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
    """The place a waiting thread lends a pool for its own jobs."""

    __slots__ = ("backlog", "lent", "pool", "waiting")

    def __init__(self, pool: WorkerThreads | None = None) -> None:
        self.lent = False
        """Whether a thread runs its jobs on the place it lends."""
        self.backlog: collections.deque[Job] = collections.deque()
        """Its jobs waiting for that place."""
        self.pool = pool
        """The pool it lends to (a thread's own record: None, kept per pool)."""
        self.waiting = True
        """Whether its thread still waits (a call's record: False once the call returned,
        so the tasks it left behind lend nothing)."""


class _Here(threading.local):
    """Whether this thread blocks while it waits for the jobs it submits."""

    blocks = 0


_HERE: Final = _Here()


_WAITER: Final[contextvars.ContextVar[_Waits | None]] = contextvars.ContextVar(
    "tdk_waiter", default=None
)
"""In a :func:`waiting_context`: the place the thread waiting for the call lends."""


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """While inside, this thread blocks on the sync calls it makes (it runs their event loop
    itself: ``tdk run``): when the pool is full, it lends a place for them."""
    _HERE.blocks += 1
    try:
        yield
    finally:
        _HERE.blocks -= 1


def waiting_context() -> contextvars.Context:
    """A copy of this thread's context for a call that this thread waits for while another
    thread runs it (``run_sync()`` on tdk's loop): the sync calls made in it, by the call or
    by tasks it starts, lend a place of this thread's when the pool is full."""
    context = contextvars.copy_context()
    context.run(_WAITER.set, _Waits(_POOL))
    return context


def call_ended(context: contextvars.Context) -> None:
    """The thread has stopped waiting for the call of ``context`` (a :func:`waiting_context`):
    what the call left running lends no place any more."""
    waits = context.get(_WAITER)
    if waits is not None:  # pragma: no branch (a waiting_context() holds one)
        waits.waiting = False


class WorkerThreads:
    """A pool of daemon threads for sync bodies.

    At most ``max_workers`` bodies with a caller run at once on the pool's own threads; more
    wait in a queue. A thread that blocks on the jobs it submits (a worker thread, whose body
    calls another sync tool; a thread in ``run_sync()``) and finds the pool full lends a place
    of its own: one more thread, for its own jobs only, one after the other. Bodies whose
    caller has gone (see :class:`Job`) do not count, up to ``max_lingering`` of them: past
    that, they count again, and new work waits for them. Threads start on demand and live as
    long as the process (as ``ThreadPoolExecutor``'s do), but for the surplus a lingering
    body leaves when it ends, and a lent place's thread, which go away.

    The hand-off is a ``queue.SimpleQueue`` of jobs, with exact counts (under a lock) of the
    jobs queued and the threads idle: a job starts a thread when there are more jobs than
    idle threads. (``ThreadPoolExecutor`` counts idle threads with a semaphore that may count
    a thread twice, and leave a job queued with every thread waiting.)
    """

    def __init__(self, max_workers: int | None = None, max_lingering: int | None = None) -> None:
        self.max_workers: Final = max_workers or min(32, (os.cpu_count() or 1) + 4)
        """Bodies with a caller running at once on the pool's own threads."""
        self.max_lingering: Final = self.max_workers if max_lingering is None else max_lingering
        """Bodies without a caller that do not count against ``max_workers``."""
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._local = threading.local()
        """``waits``: this thread's :class:`_Waits`."""
        self._queued = 0
        """Jobs in the queue (dropped ones too, until a thread takes them)."""
        self._idle = 0
        """The pool's own threads waiting for a job."""
        self._threads = 0
        """The pool's own threads."""
        self._lent = 0
        """Threads running jobs on lent places."""
        self._lingering = 0
        """Bodies running without a caller, on any thread."""
        self._lingering_own = 0
        """Of those, bodies on the pool's own threads."""
        self._started = 0

    def submit(self, call: Callable[[], Any]) -> Job:
        """Queue ``call`` (no arguments) for a worker thread; from the event loop's thread."""
        job = Job(self, call)
        job.future.add_done_callback(job._caller_gone)
        with self._lock:
            waits = None
            if not (self._idle > self._queued or self._room()):
                waits = self._waits_here()
            if waits is None:
                self._enqueue(job)
                return job
            job._lent = waits
            if waits.lent:
                # After the job on its place now, or on the pool's own threads once one is free,
                # whichever comes first (sibling calls may wait for each other).
                waits.backlog.append(job)
                self._enqueue(job)
                return job
            waits.lent = True
            try:
                self._start(self._work_lent, job, waits)
            except RuntimeError:  # pragma: no cover (a system out of threads: queue it)
                waits.lent = False
                job._lent = None
                self._enqueue(job)
            else:
                self._lent += 1
        return job

    def _waits_here(self) -> _Waits | None:
        """Who waits for a job submitted now, if anyone does: this thread, when it blocks on
        its own calls (it runs their loop); else the thread waiting for the call of this
        context (it runs on tdk's loop). None: nobody lends a place (lock held)."""
        if _HERE.blocks:
            waits: _Waits | None = getattr(self._local, "waits", None)
            if waits is None:
                waits = self._local.waits = _Waits()
            return waits
        waits = _WAITER.get()
        if waits is None or waits.pool is not self or not waits.waiting:
            return None
        return waits

    def abandon(self, job: Job) -> bool:
        """The caller of ``job`` stopped waiting: drop it if it has not started (True), else
        stop counting its thread, and start another if work is waiting (False)."""
        with self._lock:
            job.abandoned = True
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
            lent = job._lent
            if lent is None:
                self._lingering_own += 1
                if self._queued > self._idle and self._room():
                    self._start_own()
            elif self._lingering <= self.max_lingering:  # its place is free for the next job
                job._lent = None
                self._next_on_lent_place(lent)
            return False

    def stats(self) -> dict[str, int]:
        """Now: ``threads`` (the pool's own), ``lent`` (threads on lent places), and
        ``lingering`` (bodies running without a caller, on either)."""
        with self._lock:
            return {"threads": self._threads, "lent": self._lent, "lingering": self._lingering}

    def _counted(self) -> int:
        """The pool's own threads that count against ``max_workers`` (lock held)."""
        return self._threads - min(self._lingering_own, self.max_lingering)

    def _room(self) -> bool:
        """Whether the pool may start a thread of its own (lock held)."""
        return self._counted() < self.max_workers

    def _enqueue(self, job: Job) -> None:
        """Queue ``job`` for the pool's own threads, starting one if none is idle for it
        (lock held)."""
        self._queued += 1
        self._queue.put(job)
        if self._queued > self._idle and self._room():
            self._start_own()

    def _start_own(self) -> None:
        """Start a thread of the pool's own (lock held). If the system refuses one, the job
        waits for the threads there are; with none, the submitter hears of it."""
        try:
            self._start(self._work)
        except RuntimeError:  # pragma: no cover (covered in a subprocess: see the tests)
            if self._threads == 0:
                raise
            _LOG.warning("tdk could not start a worker thread; sync calls wait for the others")
            return
        self._threads += 1

    def _start(self, target: Callable[..., None], *args: object) -> None:
        self._started += 1
        threading.Thread(
            target=target, args=args, name=f"tdk-worker-{self._started}", daemon=True
        ).start()

    def _next_on_lent_place(self, waits: _Waits) -> None:
        """The place ``waits`` lends is free: start a thread for its next job, if any (lock
        held)."""
        waits.lent = False
        while waits.backlog:
            job = waits.backlog.popleft()
            if job.state is QUEUED:  # (not dropped, nor taken by a thread of the pool's own)
                waits.lent = True
                try:
                    self._start(self._work_lent, job, waits)
                except RuntimeError:  # pragma: no cover (a system out of threads)
                    waits.lent = False
                    job._lent = None
                    self._enqueue(job)
                else:
                    self._lent += 1
                return

    def _run(self, job: Job, lent: _Waits | None) -> bool:
        """Run ``job`` (on the place ``lent`` lends, or on a thread of the pool's own) unless
        it was dropped, or another thread took it; whether it ran."""
        with self._lock:
            if job.state is not QUEUED:
                return False
            job.state = RUNNING
            job._lent = lent
        job._run()
        return True

    def _work(self) -> None:
        """A thread of the pool's own: take jobs, until a lingering body it ran makes it
        surplus."""
        _HERE.blocks += 1  # a body here blocks on the calls it makes
        lock = self._lock
        while True:
            with lock:
                self._idle += 1
            job = self._queue.get()
            with lock:
                self._idle -= 1
                self._queued -= 1
            if not self._run(job, None):
                continue
            with lock:
                job.state = FINISHED
                if job.abandoned:
                    self._lingering -= 1
                    self._lingering_own -= 1
                surplus = self._counted() > self.max_workers
                if surplus:  # a replacement took its place
                    self._threads -= 1
            job._deliver()  # after FINISHED: when_ended() never misses the end
            if surplus:
                return

    def _work_lent(self, first: Job, waits: _Waits) -> None:
        """A thread on the place ``waits`` lends: run its lender's jobs one after the other,
        then go."""
        _HERE.blocks += 1
        job = first
        while True:
            ran = self._run(job, waits)
            with self._lock:
                if ran:
                    job.state = FINISHED
                    if job.abandoned:
                        self._lingering -= 1
                nxt = None
                if not ran or job._lent is waits:  # (else its place was given back meanwhile)
                    while waits.backlog and nxt is None:
                        candidate = waits.backlog.popleft()
                        if candidate.state is QUEUED:
                            nxt = candidate
                    if nxt is None:
                        waits.lent = False
                if nxt is None:
                    self._lent -= 1
            if ran:
                job._deliver()
            if nxt is None:
                return
            job = nxt

    def _after_fork(self) -> None:  # pragma: no cover (run in a forked child, see the tests)
        """In a forked child: the parent's threads do not exist here."""
        self._lock = threading.Lock()
        self._queue = queue.SimpleQueue()
        self._local = threading.local()
        self._queued = self._idle = self._threads = self._lent = 0
        self._lingering = self._lingering_own = 0


_POOL: Final = WorkerThreads()
if hasattr(os, "register_at_fork"):  # pragma: no branch (every POSIX system has it)
    os.register_at_fork(after_in_child=_POOL._after_fork)


def run_in_worker(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Job:
    """Run ``fn(**kwargs)`` in a worker thread, with the caller's context variables."""
    context = contextvars.copy_context()
    return _POOL.submit(lambda: context.run(fn, **kwargs))
