"""The sync API (``Tool.run_sync``, ``Toolkit.run_sync``, ``ToolRunner.run_sync`` and
``ToolRunner.run_many_sync``): every call runs on tdk's one long-lived event loop, so what a
tool binds to that loop (a module-level ``httpx.AsyncClient``, a runner's bulkhead) works
call after call, from any number of threads; and a call returns at its limit, whatever the body
leaves behind (a stuck thread, a task that ignores cancellation, a stopped loop)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import httpx
import pytest
from _bounded import run_bounded
from _http_server import serve

import tdk.http
from tdk import Bulkhead, Tool, ToolCall, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import ErrorKind

#: Created once at import, as every example does, and used by every call below.
CLIENT = tdk.http.install(httpx.AsyncClient(timeout=10))

#: The loops the calls of ``which_loop`` ran on (kept alive, so none is mistaken for another).
LOOPS: list[asyncio.AbstractEventLoop] = []


@tool
async def which_port(url: Annotated[str, "The URL to fetch."]) -> int:
    """Fetch the URL with the shared client; return the client port the server saw."""
    response = await CLIENT.get(url)
    return int(response.json()["port"])


@tool
async def close_client() -> None:
    """Close the shared client (on the loop its connections belong to)."""
    await CLIENT.aclose()


@tool
async def which_loop() -> int:
    """Record the loop this call runs on; return how many calls ran so far."""
    LOOPS.append(asyncio.get_running_loop())
    return len(LOOPS)


TOOLKIT = Toolkit("sync_calls", [which_port, which_loop])
RUNNER = ToolRunner(TOOLKIT)

ENTRIES: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
    "tool.run_sync": which_port.run_sync,
    "toolkit.run_sync": lambda arguments: TOOLKIT.run_sync("which_port", arguments),
    "runner.run_sync": lambda arguments: RUNNER.run_sync("which_port", arguments),
    "runner.run_many_sync": lambda arguments: RUNNER.run_many_sync([("which_port", arguments)])[0],
}


@pytest.fixture(scope="module")
def kept_url() -> Iterator[str]:
    """The URL of a route that keeps its connection open; the shared client is closed after."""
    with serve() as base:
        try:
            yield f"{base}/kept"
        finally:
            assert close_client.run_sync().is_success


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` in a thread of its own; fails the test if it has not returned in time."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result(seconds)


def _errors(results: list[ToolResult]) -> list[str]:
    return [r.error.developer_message or r.error.message for r in results if r.error is not None]


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_client_created_once_works_call_after_call(entry: str, kept_url: str) -> None:
    """Five sync calls in a row through a module-level ``AsyncClient`` all succeed, and share
    one pooled connection (a loop per call broke every other one: "Event loop is closed")."""
    results = [ENTRIES[entry]({"url": kept_url}) for _ in range(5)]
    assert _errors(results) == []
    assert len({result.value for result in results}) == 1


def test_two_threads_share_the_client_at_once(kept_url: str) -> None:
    """Two threads making five sync calls each at the same time, through the one client: all
    ten succeed."""
    both_ready = threading.Barrier(2, timeout=10)

    def five_calls() -> list[ToolResult]:
        both_ready.wait()
        return [which_port.run_sync({"url": kept_url}) for _ in range(5)]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outcomes = [pool.submit(five_calls) for _ in range(2)]
        results = [result for outcome in outcomes for result in outcome.result(60)]
    assert len(results) == 10
    assert _errors(results) == []


def test_run_many_sync_runs_a_batch_in_order(kept_url: str) -> None:
    """``run_many_sync`` runs a batch concurrently and returns its results in input order,
    batch after batch."""
    calls = [
        ToolCall(name="which_port", arguments={"url": kept_url}, call_id=str(n)) for n in range(5)
    ]
    for _ in range(2):
        results = RUNNER.run_many_sync([*calls, ("no_such_tool", {})])
        assert [result.call_id for result in results] == ["0", "1", "2", "3", "4", None]
        assert _errors(results[:5]) == []
        assert results[5].kind is ErrorKind.TOOL_NOT_FOUND


def test_every_sync_call_runs_on_one_loop() -> None:
    """Sync calls from several threads, through every entry point, all run on one loop."""
    LOOPS.clear()
    entries: list[Callable[[], ToolResult]] = [
        which_loop.run_sync,
        lambda: TOOLKIT.run_sync("which_loop"),
        lambda: RUNNER.run_sync("which_loop"),
        lambda: RUNNER.run_many_sync([("which_loop", {})])[0],
    ]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda call: call(), entries * 3))
    assert _errors(results) == []
    assert len(LOOPS) == 12
    assert all(loop is LOOPS[0] for loop in LOOPS)


def test_a_runner_bulkhead_holds_across_threads() -> None:
    """Threads calling ``runner.run_sync`` at once queue in one bulkhead: every call runs,
    one at a time (its waiters and its holder share tdk's loop)."""
    running: list[int] = []
    most: list[int] = [0]

    @tool
    async def hold() -> int:
        """Hold the bulkhead's one place for a moment."""
        running.append(1)
        most[0] = max(most[0], len(running))
        await asyncio.sleep(0.02)
        running.pop()
        return 1

    runner = ToolRunner(Toolkit("held", [hold]), bulkhead=Bulkhead(max_concurrent=1, max_wait=30))
    all_ready = threading.Barrier(4, timeout=10)

    def call() -> ToolResult:
        all_ready.wait()
        return runner.run_sync("hold")

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = [outcome.result(60) for outcome in [pool.submit(call) for _ in range(4)]]
    assert _errors(results) == []
    assert most == [1]


def test_a_thread_waiting_in_run_sync_lends_a_place_when_the_pool_is_full() -> None:
    """With every worker thread held by other calls, a sync tool called with ``run_sync()``
    still runs at once: the thread waiting for it lends a place of its own."""
    from tdk._execution.threads import _POOL

    release = threading.Event()
    holding = threading.Semaphore(0)

    @tool
    def occupy() -> int:
        """Hold a worker thread until released."""
        holding.release()
        release.wait(30)
        return 1

    @tool
    def quick() -> int:
        """Answer at once."""
        return 7

    holders = ToolRunner(Toolkit("holders", [occupy]))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(holders.run_many_sync, [("occupy", {})] * _POOL.max_workers)
        try:
            for _ in range(_POOL.max_workers):
                assert holding.acquire(timeout=30)
            assert _within(20, quick.run_sync).value == 7
        finally:
            release.set()
        assert _errors(held.result(60)) == []


REFUSED: dict[str, tuple[Callable[[], object], str]] = {
    "tool.run_sync": (which_loop.run_sync, "await run()"),
    "toolkit.run_sync": (lambda: TOOLKIT.run_sync("which_loop"), "await run()"),
    "runner.run_sync": (lambda: RUNNER.run_sync("which_loop"), "await run()"),
    "runner.run_many_sync": (
        lambda: RUNNER.run_many_sync([("which_loop", {})]),
        "await run_many()",
    ),
}


@pytest.mark.parametrize("entry", list(REFUSED))
def test_a_sync_call_inside_a_running_loop_is_refused(entry: str) -> None:
    """A sync call made inside a running event loop raises ``RuntimeError`` saying what to
    await instead (it would block that loop), and leaves no coroutine unawaited."""
    call, instead = REFUSED[entry]

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match=instead.replace("(", r"\(").replace(")", r"\)")):
            call()

    asyncio.run(scenario())


def test_an_async_tool_calling_run_sync_gets_a_result_not_a_deadlock() -> None:
    """An async tool (on tdk's loop) that calls ``run_sync()`` cannot block the loop it runs
    on: the call is refused, and the outer call returns a fatal result."""

    @tool
    async def nested() -> int:
        """Call another tool the sync way, from async code."""
        return int(which_loop.run_sync().value)

    result: ToolResult = _within(30, nested.run_sync)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL


def _raiser(exc_type: type[BaseException], flavour: str) -> Tool[..., Any]:
    if flavour == "async":

        async def body_async() -> int:
            """Raise."""
            raise exc_type

        return tool(name="raises_async")(body_async)
    if flavour == "async-task":

        async def raise_it() -> int:
            raise exc_type

        async def body_task() -> int:
            """Raise in a task of its own (out of which it reaches the loop itself)."""
            return await asyncio.create_task(raise_it())

        return tool(name="raises_in_a_task")(body_task)

    def body() -> int:
        """Raise."""
        raise exc_type

    return tool(name="raises")(body)


@pytest.mark.parametrize("flavour", ["sync", "async", "async-task"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit], ids=lambda t: t.__name__)
def test_keyboard_interrupt_of_a_body_reaches_the_caller_and_the_loop_runs_on(
    exc_type: type[BaseException], flavour: str
) -> None:
    """``KeyboardInterrupt`` and ``SystemExit`` raised by a body (in a task of its own too,
    out of which asyncio raises it in the loop itself) propagate out of ``run_sync()``; tdk's
    loop keeps running, and the next call runs on it."""
    LOOPS.clear()
    assert which_loop.run_sync().is_success
    body = _raiser(exc_type, flavour)

    def interrupted() -> None:
        with pytest.raises(exc_type):
            body.run_sync()

    _within(30, interrupted)
    assert _within(30, which_loop.run_sync).value == 2
    assert LOOPS[1] is LOOPS[0]


def _python(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_while_waiting_cancels_the_call() -> None:
    """Ctrl-C in a thread waiting in ``run_sync()`` cancels the call (its cleanup runs) and
    raises ``KeyboardInterrupt`` there."""
    process = _python(
        '''
        import asyncio
        from tdk import tool

        @tool
        async def wait_long() -> int:
            """Wait for a minute."""
            print("started", flush=True)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                print("cancelled", flush=True)
                raise
            return 1

        try:
            wait_long.run_sync()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        '''
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "started\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert (out, process.returncode) == ("cancelled\ninterrupted\n", 0), err


def test_the_first_calls_from_many_threads_start_one_loop() -> None:
    """In a fresh process, eight threads making their first sync calls at once all run on
    one loop (it is started once, by whichever comes first)."""
    process = _python(
        '''
        import asyncio, concurrent.futures, threading
        from tdk import tool

        loops = []
        ready = threading.Barrier(8, timeout=10)

        @tool
        async def which() -> int:
            """Record the loop."""
            loops.append(asyncio.get_running_loop())
            return 1

        def first_call() -> bool:
            ready.wait()
            return which.run_sync().is_success

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert all(pool.map(lambda _: first_call(), range(8)))
        print(len(loops), len({id(loop) for loop in loops}))
        '''
    )
    out, err = process.communicate(timeout=60)
    assert (out, process.returncode) == ("8 1\n", 0), err


# -- run_sync returns at the limit, whatever the body leaves behind -------------------------


def test_run_sync_returns_while_a_body_lingers() -> None:
    """``run_sync`` returns at the limit: nothing waits for the body's thread to finish."""
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> int:
        """Block until released."""
        release.wait(30)
        return 1

    outcome: list[ToolResult] = []
    thread = threading.Thread(target=lambda: outcome.append(stuck.run_sync({})), daemon=True)
    thread.start()
    thread.join(10)
    release.set()
    assert not thread.is_alive(), "run_sync() waited for the lingering body"
    assert outcome[0].kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def _run_sync_within(body: Tool[..., Any], seconds: float = 10.0) -> ToolResult:
    outcome: list[ToolResult] = []
    thread = threading.Thread(target=lambda: outcome.append(body.run_sync({})), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"run_sync() still running after {seconds} s"
    return outcome[0]


def test_run_sync_returns_while_a_to_thread_call_is_stuck() -> None:
    """A body stuck in ``asyncio.to_thread`` past its limit: ``run_sync`` returns the timeout
    (``asyncio.run`` would wait for the default executor's thread)."""
    release = threading.Event()

    @tool(timeout=0.1)
    async def stuck() -> int:
        """Block in a thread of the loop's default executor."""
        await asyncio.to_thread(release.wait, 30)
        return 1

    try:
        assert _run_sync_within(stuck).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    finally:
        release.set()


def test_run_sync_returns_while_a_task_left_behind_ignores_cancellation() -> None:
    """A body that leaves a task ignoring cancellation behind: ``run_sync`` returns once the
    leftover has had its second to end (``asyncio.run`` would wait for it forever)."""
    stop = threading.Event()

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue

    @tool
    async def leaves_a_task() -> int:
        """Start two tasks and return: one ends when cancelled, the other does not."""
        leaves_a_task.left = [  # type: ignore[attr-defined]
            asyncio.create_task(stubborn()),
            asyncio.create_task(asyncio.sleep(30)),
        ]
        return 1

    try:
        assert _run_sync_within(leaves_a_task).value == 1
    finally:
        stop.set()


def test_a_body_stopping_the_loop_of_run_sync_still_gets_a_result() -> None:
    """A body that stops the loop ``run_sync()`` runs it in (``loop.stop()``): the call goes
    on to its end and returns a result (it does not raise)."""

    @tool(timeout=5)
    async def stopper() -> int:
        """Stop the loop it runs on."""
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.01)
        asyncio.get_running_loop().stop()
        return 1

    result = _run_sync_within(stopper)
    assert (result.is_success, result.value) == (True, 1)


@pytest.mark.parametrize("which", ["run_in_new_loop", "run_blocking"])
def test_tdks_own_loop_refuses_to_run_inside_another(which: str) -> None:
    """tdk's loops, asked to run a call from inside a running loop, raise at once (they never
    spin, nor wait for a loop that the wait would block)."""
    from tdk._execution import loop as _loop

    async def inner() -> int:
        return 1

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match="inside a running one"):
            getattr(_loop, which)(inner())

    run_bounded(scenario())
