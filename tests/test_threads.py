"""tdk's worker threads for sync tools: outcomes always arrive, lingering bodies are replaced,
and the surplus they leave goes away."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

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
        stuck = pool.submit(lambda: release.wait(30))
        _wait_until(lambda: stuck.state is RUNNING)
        stuck.abandon()
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
        busy = pool.submit(lambda: release.wait(30))
        queued = pool.submit(lambda: ran.append(True))
        queued.abandon()
        assert queued.state is DROPPED
        assert not queued.running
        seen: list[bool] = []
        queued.when_ended(lambda: seen.append(True))
        assert seen == [True]
        release.set()
        await asyncio.wait_for(busy.future, 10)

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
    _wait_until(lambda: pool.stats() == {"threads": 1, "lingering": 0})


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
