"""Cost of ``ToolRunner`` over a bare ``await tool.run(args)``, measured in one run.

1. The success path, per call: the bare ``tool.run()`` against the runner with no policy, with
   every policy (retry, rate limit, circuit breaker, bulkhead, max_concurrency), with time
   limits on top (each attempt then runs under ``asyncio.timeout``, inside ``tool.run``), and
   with a store reached through ``StateStore.update`` (as a shared store would be).
2. 1000 concurrent calls through a bulkhead of 50: ``run_many()`` against 1000 bare calls
   gathered in one ``TaskGroup``; the tool yields once, so calls do overlap.

Timings are the best of several interleaved rounds (this is a shared machine: the minimum is
the least disturbed). Target for the success path with every policy: under 1.25x.

Run: python bench/bench_runner.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from tdk import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    ToolContext,
    Toolkit,
    ToolRunner,
    tool,
)
from tdk.runner import InMemoryStore

ARGS = {"query": "python", "limit": 5, "exact": False}


@tool(read_only=True)
async def search(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> list[str]:
    """Search."""
    return [query] * limit


RUNNING = [0, 0]  # now, peak


@tool(read_only=True)
async def fetch(n: Annotated[int, "Which item."]) -> int:
    """Fetch an item (yields to the loop once, like any I/O)."""
    RUNNING[0] += 1
    RUNNING[1] = max(RUNNING[1], RUNNING[0])
    await asyncio.sleep(0)
    RUNNING[0] -= 1
    return n


class RemoteStore:
    """The in-process store reached only through ``update``: the path a shared store takes
    (without its network round trip)."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        return await self.inner.update(key, change, *args)


TOOLKIT = Toolkit("bench", [search, fetch])
EVERY_POLICY: dict[str, Any] = {
    "retry": RetryPolicy(),
    "rate_limit": RateLimit(calls=1_000_000_000, period=1.0),
    "circuit_breaker": CircuitBreaker(),
    "bulkhead": Bulkhead(max_concurrent=100),
    "max_concurrency": 1000,
}


SCOPED_POLICY: dict[str, Any] = {
    **EVERY_POLICY,
    "rate_limit": RateLimit(calls=1_000_000_000, period=1.0, scope="bench"),
    "circuit_breaker": CircuitBreaker(scope="bench"),
}
PER_USER = ToolRunner(
    TOOLKIT,
    **{
        **EVERY_POLICY,
        "rate_limit": RateLimit(calls=1_000_000_000, period=1.0, scope="bench:{user_id}"),
        "circuit_breaker": CircuitBreaker(scope="bench:{user_id}"),
    },
)
USER = ToolContext(user_id="u-1")


def runner_call(runner: ToolRunner) -> Callable[[], Awaitable[Any]]:
    return lambda: runner.run("search", ARGS)


async def per_call_us(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls * 1e6


async def success_path(calls: int, rounds: int) -> None:
    paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "bare tool.run()": lambda: search.run(ARGS),
        "runner, no policy": runner_call(ToolRunner(TOOLKIT)),
        "runner, every policy": runner_call(ToolRunner(TOOLKIT, **EVERY_POLICY)),
        "every policy + timeout, deadline": runner_call(
            ToolRunner(TOOLKIT, timeout=10.0, deadline=30.0, **EVERY_POLICY)
        ),
        "every policy, scoped": runner_call(ToolRunner(TOOLKIT, **SCOPED_POLICY)),
        "every policy, scoped per user": lambda: PER_USER.run("search", ARGS, context=USER),
        "every policy, store via update()": runner_call(
            ToolRunner(TOOLKIT, store=RemoteStore(), **EVERY_POLICY)
        ),
        "bare tool.run(timeout=10)": lambda: search.run(ARGS, timeout=10.0),
    }
    best = dict.fromkeys(paths, float("inf"))
    for call in paths.values():  # warm up
        await per_call_us(call, 500)
    for _ in range(rounds):
        for label, call in paths.items():
            best[label] = min(best[label], await per_call_us(call, calls // rounds))
    floor = best["bare tool.run()"]
    print(f"{'success path, per call':36} {'us':>7} {'ratio':>7}")
    for label, us in best.items():
        print(f"{label:36} {us:7.2f} {us / floor:6.2f}x")
    timed = best["every policy + timeout, deadline"] / best["bare tool.run(timeout=10)"]
    print(f"{'(every policy + time limits) / (bare with timeout)':52} {timed:6.2f}x")


async def concurrent(calls: int, rounds: int) -> None:
    runner = ToolRunner(TOOLKIT, bulkhead=Bulkhead(max_concurrent=50, max_wait=60.0))
    batch = [("fetch", {"n": n}) for n in range(calls)]

    async def bare() -> None:
        async with asyncio.TaskGroup() as group:
            for n in range(calls):
                group.create_task(fetch.run({"n": n}))

    async def by_hand() -> None:
        """The same queueing written by hand: a semaphore, acquired under a time limit."""
        semaphore = asyncio.Semaphore(50)

        async def one(n: int) -> Any:
            async with asyncio.timeout(60.0):
                await semaphore.acquire()
            try:
                return await fetch.run({"n": n})
            finally:
                semaphore.release()

        async with asyncio.TaskGroup() as group:
            for n in range(calls):
                group.create_task(one(n))

    failures = 0

    async def through_runner() -> None:
        nonlocal failures
        results = await runner.run_many(batch)
        failures += sum(not result.is_success for result in results)

    jobs = {
        "bare, 1000 tasks": bare,
        "by hand: Semaphore(50) + timeout": by_hand,
        "run_many, bulkhead of 50": through_runner,
    }
    timings = dict.fromkeys(jobs, float("inf"))
    for _ in range(rounds):
        for label, job in jobs.items():
            start = time.perf_counter()
            await job()
            timings[label] = min(timings[label], (time.perf_counter() - start) * 1e3)
    RUNNING[1] = 0
    await through_runner()
    peak = RUNNING[1]
    floor = timings["bare, 1000 tasks"]
    print(f"\n{calls} concurrent calls {'':15} {'ms':>7} {'us/call':>8} {'ratio':>7}")
    for label, ms in timings.items():
        print(f"{label:34} {ms:7.2f} {ms / calls * 1e3:8.2f} {ms / floor:6.2f}x")
    print(f"peak concurrency through the bulkhead: {peak} (limit 50); failed calls: {failures}")


async def main(calls: int) -> None:
    await success_path(calls, rounds=20)
    await concurrent(1000, rounds=7)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40_000)
    asyncio.run(main(parser.parse_args().calls))
