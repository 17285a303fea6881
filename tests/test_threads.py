"""tdk's worker threads for sync tools: outcomes always arrive, lingering bodies are replaced,
and the surplus they leave goes away."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from tdk._threads import DROPPED, FINISHED, RUNNING, WorkerThreads


def _wait_until(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.005)


@pytest.mark.parametrize(
    "exc_type",
    [StopIteration, GeneratorExit, StopAsyncIteration, ValueError, KeyboardInterrupt],
    ids=lambda t: t.__name__,
)
def test_every_exception_reaches_the_caller(exc_type: type[BaseException]) -> None:
    """Whatever a body raises arrives in the event loop, StopIteration included (asyncio
    cannot put that one into a future)."""
    pool = WorkerThreads(max_workers=1)

    def body() -> None:
        raise exc_type

    async def scenario() -> None:
        job = pool.submit(body)
        await asyncio.wait_for(job.future, 10)
        with pytest.raises(exc_type):
            job.outcome()

    asyncio.run(scenario())


def test_a_lingering_body_is_replaced_then_its_thread_ends() -> None:
    """A body whose caller gave up stops counting: another thread takes new work, and when
    the lingering body ends its surplus thread goes away."""
    pool = WorkerThreads(max_workers=1)
    release = threading.Event()

    async def scenario() -> None:
        stuck = pool.submit(lambda: release.wait(30))
        _wait_until(lambda: stuck.state is RUNNING)
        stuck.future.cancel()  # the caller gives up
        await asyncio.sleep(0)  # (the pool hears of it through the future's callback)
        assert stuck.abandoned
        quick = pool.submit(lambda: 42)
        await asyncio.wait_for(quick.future, 10)
        assert quick.outcome() == 42
        assert pool.stats()["threads"] == 2
        ended = asyncio.Event()
        stuck.when_ended(ended.set)
        release.set()
        await asyncio.wait_for(ended.wait(), 10)
        assert stuck.state is FINISHED

    asyncio.run(scenario())
    _wait_until(lambda: pool.stats()["threads"] == 1)
    assert pool.stats()["lingering"] == 0


def test_past_the_lingering_bound_new_work_waits() -> None:
    """With ``max_lingering=0`` a lingering body keeps its place: new work waits for it."""
    pool = WorkerThreads(max_workers=1, max_lingering=0)
    release = threading.Event()

    async def scenario() -> None:
        # two: while it waits, this thread lends the pool a place
        stuck = [pool.submit(lambda: release.wait(30)) for _ in range(2)]
        _wait_until(lambda: all(job.state is RUNNING for job in stuck))
        for job in stuck:
            job.abandon()
        queued = pool.submit(lambda: 7)
        await asyncio.sleep(0.05)
        assert not queued.future.done()
        release.set()
        await asyncio.wait_for(queued.future, 10)
        assert queued.outcome() == 7

    asyncio.run(scenario())


def test_a_queued_job_given_up_never_runs() -> None:
    """A job whose caller gives up before a thread takes it is dropped, and has ended."""
    pool = WorkerThreads(max_workers=1)
    release = threading.Event()
    ran: list[bool] = []

    async def scenario() -> None:
        # two places: the pool's, and the one this thread lends while it waits
        busy = [pool.submit(lambda: release.wait(30)) for _ in range(2)]
        queued = pool.submit(lambda: ran.append(True))
        queued.abandon()
        assert queued.state is DROPPED
        assert not queued.running
        seen: list[bool] = []
        queued.when_ended(lambda: seen.append(True))
        assert seen == [True]
        release.set()
        await asyncio.wait_for(asyncio.gather(*(job.future for job in busy)), 10)

    asyncio.run(scenario())
    assert ran == []


def test_a_body_outliving_its_loop_is_harmless() -> None:
    """A body that ends after its event loop has closed ends quietly."""
    pool = WorkerThreads(max_workers=1)
    release = threading.Event()
    finished = threading.Event()

    def body() -> None:
        release.wait(30)
        finished.set()

    async def scenario() -> None:
        pool.submit(body)

    asyncio.run(scenario())
    release.set()
    assert finished.wait(10)
    _wait_until(lambda: pool.stats() == {"threads": 1, "lingering": 0, "waiting": 0})


@pytest.mark.parametrize("depth", [1, 3], ids=["one-level", "three-levels"])
def test_bodies_waiting_for_the_jobs_they_submit_never_fill_the_pool(depth: int) -> None:
    """Bodies that submit jobs and wait for them (a sync tool calling ``run_sync()``) do not
    count while they wait: with every thread of the pool taken by such a body, the jobs they
    wait for still run, however deep the calls go."""
    pool = WorkerThreads(max_workers=2)
    all_started = threading.Barrier(2, timeout=10)

    def call(level: int) -> int:
        if level == depth:
            return 1

        async def nested() -> int:
            job = pool.submit(lambda: call(level + 1))
            await asyncio.wait_for(job.future, 20)
            return int(job.outcome()) + 1

        if level == 0:
            all_started.wait()  # both threads are taken before either submits
        return asyncio.run(nested())

    async def scenario() -> list[int]:
        jobs = [pool.submit(lambda: call(0)) for _ in range(2)]
        await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), 20)
        return [job.outcome() for job in jobs]

    assert asyncio.run(scenario()) == [depth + 1, depth + 1]
    _wait_until(lambda: pool.stats() == {"threads": 2, "lingering": 0, "waiting": 0})


def test_a_nested_job_given_up_stops_its_body_waiting() -> None:
    """A body that stops waiting for the job it submitted (a time limit) counts again."""
    pool = WorkerThreads(max_workers=1)
    release = threading.Event()

    def outer() -> dict[str, int]:
        async def nested() -> None:
            job = pool.submit(lambda: release.wait(30))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.future, 0.05)

        asyncio.run(nested())
        return pool.stats()

    async def scenario() -> dict[str, int]:
        job = pool.submit(outer)
        await asyncio.wait_for(job.future, 20)
        return dict(job.outcome())

    try:
        # (the loop's thread still waits for the outer job)
        assert asyncio.run(scenario()) == {"threads": 2, "lingering": 1, "waiting": 1}
    finally:
        release.set()
    _wait_until(lambda: pool.stats() == {"threads": 1, "lingering": 0, "waiting": 0})


def test_a_body_waiting_for_several_jobs_at_once_counts_once() -> None:
    """A body gathering several jobs of its own does not count while it waits for any."""
    pool = WorkerThreads(max_workers=1)

    def outer() -> list[int]:
        async def nested() -> list[int]:
            jobs = [pool.submit(lambda n=n: n) for n in range(3)]
            await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), 20)
            return [job.outcome() for job in jobs]

        return asyncio.run(nested())

    async def scenario() -> Any:
        job = pool.submit(outer)
        await asyncio.wait_for(job.future, 20)
        return job.outcome()

    assert asyncio.run(scenario()) == [0, 1, 2]
    _wait_until(lambda: pool.stats() == {"threads": 1, "lingering": 0, "waiting": 0})


def test_a_body_leaving_a_job_it_submitted_behind_counts_again() -> None:
    """A body that submits a job and ends without waiting for it (its loop closes first)
    counts again once it has ended; the job still runs."""
    pool = WorkerThreads(max_workers=1)
    ran = threading.Event()

    def outer() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(_submit(pool, ran.set))
        finally:
            loop.close()

    async def scenario() -> None:
        job = pool.submit(outer)
        await asyncio.wait_for(job.future, 20)
        job.outcome()

    asyncio.run(scenario())
    assert ran.wait(10)
    _wait_until(lambda: pool.stats()["waiting"] == 0)


async def _submit(pool: WorkerThreads, call: Any) -> None:
    pool.submit(call)


def test_run_in_new_loop_raises_what_the_call_raises() -> None:
    """tdk's loop hands back the call's own RuntimeError (it is not a stopped loop)."""
    from tdk._loop import run_in_new_loop

    async def fails() -> None:
        raise RuntimeError("the call's own")

    with pytest.raises(RuntimeError, match="the call's own"):
        run_in_new_loop(fails())


def test_a_forked_child_runs_sync_tools() -> None:
    """After ``fork()``, the child starts threads of its own (the parent's are not there)."""
    script = textwrap.dedent(
        """
        import os, sys
        from tdk import tool

        @tool
        def double(n: int) -> int:
            '''Double it.

            Args:
                n: A number.
            '''
            return 2 * n

        assert double.run_sync({"n": 1}).value == 2
        pid = os.fork()
        if pid == 0:
            code = 0 if double.run_sync({"n": 2}).value == 4 else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_run_in_new_loop_hands_back_what_a_thread_raises() -> None:
    """In tdk's own loop, ``asyncio.to_thread`` returns and raises as usual."""
    from tdk._loop import run_in_new_loop

    def fails() -> None:
        raise LookupError("from the thread")

    async def scenario() -> int:
        with pytest.raises(LookupError):
            await asyncio.to_thread(fails)
        return await asyncio.to_thread(lambda: 7)

    assert run_in_new_loop(scenario()) == 7
