"""tdk's worker threads for sync tools: outcomes always arrive, lingering bodies are replaced
(they never starve other sync tools, nor deadlock tools calling tools), and the surplus they
leave goes away."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Annotated, Any

import pytest
from _bounded import run_bounded

from tdk import ToolResult, tool
from tdk._execution.threads import DROPPED, FINISHED, RUNNING, WorkerThreads
from tdk.errors import ErrorKind


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
    _wait_until(lambda: pool.stats() == {"threads": 1, "lent": 0, "lingering": 0})


@pytest.mark.parametrize("depth", [1, 3], ids=["one-level", "three-levels"])
def test_bodies_waiting_for_the_jobs_they_submit_never_fill_the_pool(depth: int) -> None:
    """Bodies that submit jobs and wait for them (a sync tool calling ``run_sync()``) lend a
    place for them: with every thread of the pool taken by such a body, the jobs they wait
    for still run, however deep the calls go."""
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
    _wait_until(lambda: pool.stats() == {"threads": 2, "lent": 0, "lingering": 0})


def test_many_nested_calls_add_one_thread_per_waiting_body() -> None:
    """Fifty calls of a sync body that calls another, on a pool of two: the queued calls wait
    for the pool's own threads, and each running body adds one thread for its own call (the
    pool never grows with the queue)."""
    pool = WorkerThreads(max_workers=2)
    seen: list[int] = []

    def inner() -> int:
        stats = pool.stats()
        seen.append(stats["threads"] + stats["lent"])
        time.sleep(0.002)
        return 1

    def outer() -> int:
        async def nested() -> int:
            job = pool.submit(inner)
            await asyncio.wait_for(job.future, 20)
            return int(job.outcome())

        return asyncio.run(nested())

    async def scenario() -> int:
        jobs = [pool.submit(outer) for _ in range(50)]
        await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), 30)
        return sum(job.outcome() for job in jobs)

    assert asyncio.run(scenario()) == 50
    assert max(seen) <= 4
    _wait_until(lambda: pool.stats() == {"threads": 2, "lent": 0, "lingering": 0})


def test_a_nested_job_given_up_frees_its_place() -> None:
    """A body that stops waiting for a job on its lent place (a time limit) gets the place
    back for its next job, while the first one runs on without a caller."""
    pool = WorkerThreads(max_workers=1)
    release = threading.Event()

    def outer() -> tuple[dict[str, int], int]:
        async def nested() -> int:
            stuck = pool.submit(lambda: release.wait(30))
            after = pool.submit(lambda: 7)  # waits for the place the stuck one holds
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stuck.future, 0.05)
            await asyncio.wait_for(after.future, 10)
            return int(after.outcome())

        value = asyncio.run(nested())
        return pool.stats(), value

    async def scenario() -> Any:
        job = pool.submit(outer)
        await asyncio.wait_for(job.future, 20)
        return job.outcome()

    try:
        stats, value = asyncio.run(scenario())
    finally:
        release.set()
    assert value == 7
    assert stats["lingering"] == 1
    _wait_until(lambda: pool.stats() == {"threads": 1, "lent": 0, "lingering": 0})


def test_a_body_waiting_for_several_jobs_at_once_gets_them_all() -> None:
    """A body gathering several jobs of its own, the pool full, gets them run one after the
    other on the place it lends."""
    pool = WorkerThreads(max_workers=1)

    def outer() -> list[int]:
        async def nested() -> list[int]:
            jobs = [pool.submit(lambda n=n: n) for n in range(3)]
            jobs[1].abandon()  # given up before it ran: skipped
            await asyncio.wait_for(asyncio.gather(jobs[0].future, jobs[2].future), 20)
            return [jobs[0].outcome(), jobs[2].outcome()]

        return asyncio.run(nested())

    async def scenario() -> Any:
        job = pool.submit(outer)
        await asyncio.wait_for(job.future, 20)
        return job.outcome()

    assert asyncio.run(scenario()) == [0, 2]
    _wait_until(lambda: pool.stats() == {"threads": 1, "lent": 0, "lingering": 0})


def test_sibling_calls_that_wait_for_each_other_both_run() -> None:
    """A body whose two calls wait for each other (a consumer and its producer), the pool
    full when it makes them: the one that waits behind the other on the lent place is taken
    by the pool's own thread once that one is free."""
    pool = WorkerThreads(max_workers=2)
    produced = threading.Event()
    filler_started = threading.Event()

    def filler() -> None:
        filler_started.set()
        time.sleep(0.2)

    def outer() -> list[bool]:
        async def nested() -> list[bool]:
            consumer = pool.submit(lambda: produced.wait(20))
            producer = pool.submit(produced.set)
            await asyncio.wait_for(asyncio.gather(consumer.future, producer.future), 30)
            return [consumer.outcome(), producer.outcome() is None]

        filler_started.wait(10)  # the pool is full when the calls are made
        return asyncio.run(nested())

    async def scenario() -> Any:
        jobs = [pool.submit(outer), pool.submit(filler)]
        await asyncio.wait_for(asyncio.gather(*(job.future for job in jobs)), 30)
        return jobs[0].outcome()

    assert asyncio.run(scenario()) == [True, True]
    _wait_until(lambda: pool.stats() == {"threads": 2, "lent": 0, "lingering": 0})


def test_a_job_a_body_left_behind_still_runs() -> None:
    """A body that submits a job and ends without waiting for it (its loop closes first):
    the job still runs, and the place it was lent goes away after."""
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
    _wait_until(lambda: pool.stats() == {"threads": 1, "lent": 0, "lingering": 0})


async def _submit(pool: WorkerThreads, call: Any) -> None:
    pool.submit(call)


def test_run_in_new_loop_raises_what_the_call_raises() -> None:
    """tdk's loop hands back the call's own RuntimeError (it is not a stopped loop)."""
    from tdk._execution.loop import run_in_new_loop

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


def test_calls_wait_for_the_threads_there_are_when_no_more_can_start() -> None:
    """When the system refuses new threads (here: a huge thread stack under an address-space
    limit), sync calls wait for the worker threads there are: none fails, and the pool's
    counts come back."""
    script = textwrap.dedent(
        '''
        import asyncio, resource, threading
        from typing import Annotated
        from tdk import tool
        from tdk._execution.threads import _POOL

        @tool
        def leaf(x: Annotated[int, "A number."]) -> int:
            """Return it."""
            return x

        def address_space() -> int:
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmSize:"):
                        return int(line.split()[1]) * 1024
            raise AssertionError("no VmSize")

        async def main() -> list[object]:
            await leaf.run({"x": 0})  # one worker thread exists
            threading.stack_size(512 * 1024 * 1024)
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (address_space() + 256 * 1024 * 1024, hard))
            try:
                results = await asyncio.gather(*(leaf.run({"x": n}) for n in range(10)))
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
                threading.stack_size(0)
            return [result.value for result in results]

        assert asyncio.run(main()) == list(range(10))
        assert _POOL.stats()["lent"] == 0 and _POOL._queued == 0, _POOL.stats()
        '''
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
    from tdk._execution.loop import run_in_new_loop

    def fails() -> None:
        raise LookupError("from the thread")

    async def scenario() -> int:
        with pytest.raises(LookupError):
            await asyncio.to_thread(fails)
        return await asyncio.to_thread(lambda: 7)

    assert run_in_new_loop(scenario()) == 7


def _in_a_new_loop_within(body: Any, seconds: float = 10.0) -> Any:
    """``run_in_new_loop(body.run({}))`` (as ``tdk run`` runs its call), in a thread that
    must return within ``seconds``."""
    from tdk._execution.loop import run_in_new_loop

    outcome: list[Any] = []
    thread = threading.Thread(
        target=lambda: outcome.append(run_in_new_loop(body.run({}))), daemon=True
    )
    thread.start()
    thread.join(seconds)
    assert outcome, f"run_in_new_loop() still running after {seconds} s"
    return outcome[0]


def test_run_in_new_loop_returns_while_a_task_left_behind_ignores_cancellation() -> None:
    """``tdk run``'s loop cancels the tasks a call left behind and gives them a second: one
    that ignores its cancellation does not keep it from returning (``asyncio.run`` would wait
    for it forever)."""
    from tdk import tool

    stop = threading.Event()

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue

    left: list[asyncio.Task[None]] = []

    @tool
    async def leaves_a_task() -> int:
        """Start two tasks and return: one ends when cancelled, the other does not."""
        left.extend([asyncio.create_task(stubborn()), asyncio.create_task(asyncio.sleep(30))])
        return 1

    try:
        assert _in_a_new_loop_within(leaves_a_task).value == 1
        assert left[1].cancelled()
    finally:
        stop.set()


def test_run_in_new_loop_runs_on_when_a_body_stops_it() -> None:
    """A body that stops ``tdk run``'s loop (``loop.stop()``) still gets its result."""
    from tdk import tool

    @tool(timeout=5)
    async def stopper() -> int:
        """Stop the loop it runs on."""
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.01)
        return 1

    assert _in_a_new_loop_within(stopper).value == 1


# -- sync bodies that outlive their calls ---------------------------------------------------


#: The size of asyncio's default executor, which tdk used for sync tools before it kept its
#: own threads (docs/execution.md states the same default for tdk's pool).
DEFAULT_THREADS = min(32, (os.cpu_count() or 1) + 4)


def test_lingering_bodies_do_not_starve_other_sync_tools() -> None:
    """Sync bodies stuck past their limit do not keep an unrelated sync tool from running."""
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> int:
        """Block until released."""
        release.wait(30)
        return 1

    @tool(timeout=5.0)
    def quick(n: Annotated[int, "A number."]) -> int:
        """Return the number."""
        return n

    async def scenario() -> list[ToolResult]:
        stuck_results = await asyncio.gather(*(stuck.run({}) for _ in range(DEFAULT_THREADS + 2)))
        return [*stuck_results, await quick.run({"n": 7})]

    try:
        results = run_bounded(scenario())
    finally:
        release.set()
    assert {r.kind for r in results[:-1]} == {ErrorKind.TOOL_RUNTIME_TIMEOUT}
    assert results[-1].value == 7


@pytest.mark.parametrize("from_helpers", [False, True], ids=["own-thread", "helper-threads"])
def test_sync_tools_calling_sync_tools_never_deadlock(from_helpers: bool) -> None:
    """Sync tools taking every thread of tdk's pool at once, each calling another sync tool
    with ``run_sync()`` (from its own thread, or from threads it starts): every call returns
    (a thread blocked on the calls it made lends a place for them)."""
    from tdk._execution.threads import _POOL

    callers = _POOL.max_workers
    all_started = threading.Barrier(callers, timeout=10)

    @tool
    def inner(x: Annotated[int, "A number."]) -> int:
        """Add one."""
        return x + 1

    def add_one(x: int) -> int:
        return int(inner.run_sync({"x": x}).value)

    @tool
    def outer(x: Annotated[int, "A number."]) -> int:
        """Add two, through another tool."""
        all_started.wait()  # every place is taken before any inner call
        if not from_helpers:
            return add_one(add_one(x))
        with concurrent.futures.ThreadPoolExecutor(2) as helpers:
            return sum(helpers.map(add_one, (x, x))) - x

    async def scenario() -> list[Any]:
        results = await asyncio.gather(*(outer.run({"x": n}) for n in range(callers)))
        return [result.value for result in results]

    assert run_bounded(scenario(), within=30) == [n + 2 for n in range(callers)]


def test_a_body_that_never_started_counts_no_attempt() -> None:
    """A sync call whose time ran out while every thread was busy never runs its body, and
    its result says ``attempts == 0``."""
    release = threading.Event()
    busy = threading.Semaphore(0)
    started: list[str] = []

    @tool
    def occupy() -> int:
        """Hold a thread until released."""
        busy.release()
        release.wait(30)
        return 1

    @tool(timeout=0.05)
    def late() -> int:
        """Never get a thread."""
        started.append("late")
        return 1

    async def scenario() -> ToolResult:
        holders = [asyncio.create_task(occupy.run({})) for _ in range(DEFAULT_THREADS)]
        for _ in holders:
            await asyncio.to_thread(busy.acquire, True, 10)
        result = await late.run({})
        release.set()
        await asyncio.gather(*holders)
        return result

    try:
        result = run_bounded(scenario())
    finally:
        release.set()
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.attempts == 0
    assert started == []
