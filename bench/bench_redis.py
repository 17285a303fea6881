"""Cost of ``RedisStore`` on loopback: per call, against the in-memory store and a round trip.

1. Per call: the runner with a rate limit and a circuit breaker on ``RedisStore`` against the
   same runner on the in-memory store, and against one bare ``EVALSHA`` round trip (a script
   returning 1, on a client with redis-py's defaults). A call with a limiter and a breaker
   makes one round trip (``ENTER``: the circuit's ticket and the limiter's admission in one
   script); the report of the outcome is a second only when it can change the circuit (a
   success reported to a closed circuit that had no failures is not sent). The guard: at
   most 1.5x the bare round trip.
2. Throughput: calls per second with 1, 4 and 16 worker processes sharing one scope (a limit
   far above what they reach, so every call is admitted and every call is a round trip).

Starts its own ``redis-server`` on a free port of 127.0.0.1 (the Debian package).

Run: python bench/bench_redis.py [--calls N] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import redis.asyncio as aioredis

from tdk import CircuitBreaker, RateLimit, Toolkit, ToolRunner, tool
from tdk.runner import RedisStore


@tool(read_only=True, inline=True)
def lookup(key: Annotated[str, "What to look up."]) -> str:
    """Look a key up."""
    return key


#: A call on RedisStore against one bare EVALSHA round trip, at most (MISSION section 14).
GUARD = 1.5

LIMIT = RateLimit(calls=1_000_000, period=1.0, scope="bench")
BREAKER = CircuitBreaker(failure_threshold=5, reset_timeout=30.0, scope="bench")


def runner_on(store: Any) -> ToolRunner:
    return ToolRunner(
        Toolkit("bench", [lookup]), rate_limit=LIMIT, circuit_breaker=BREAKER, store=store
    )


async def per_call_us(calls: int, *paths: Callable[[], Awaitable[Any]]) -> list[float]:
    best = [float("inf")] * len(paths)
    for _ in range(5):
        for index, path in enumerate(paths):
            started = time.perf_counter()
            for _ in range(calls):
                await path()
            best[index] = min(best[index], (time.perf_counter() - started) / calls * 1e6)
    return best


async def per_call(url: str, calls: int) -> None:
    store = RedisStore(url, prefix="bench-per-call")
    shared, local = runner_on(store), runner_on(None)
    client = aioredis.Redis.from_url(url)
    one = client.register_script("return 1")
    await client.flushdb()

    async def on_redis() -> object:
        return await shared.run("lookup", {"key": "k"})

    async def in_memory() -> object:
        return await local.run("lookup", {"key": "k"})

    async def round_trip() -> object:
        return await one()

    assert (await on_redis()).is_success  # type: ignore[attr-defined]
    redis_us, memory_us, trip_us = await per_call_us(calls, on_redis, in_memory, round_trip)
    await store.aclose()
    await client.aclose()
    print(f"{'per call':<48} {'us':>8}")
    print(f"{'runner, in-memory store':<48} {memory_us:8.1f}")
    print(f"{'runner, RedisStore (limiter + breaker)':<48} {redis_us:8.1f}")
    print(f"{'one bare EVALSHA round trip':<48} {trip_us:8.1f}")
    ratio = redis_us / trip_us
    verdict = "within" if ratio <= GUARD else "OVER"
    print(
        f"runner on RedisStore / bare EVALSHA: {ratio:.2f}x (guard {GUARD:g}x: {verdict}); "
        f"over in-memory, in round trips: {(redis_us - memory_us) / trip_us:.2f}"
    )


def worker(url: str, seconds: float, ready: Any, counts: Any) -> None:
    async def hammer() -> tuple[int, bool]:
        # A generous timeout: on a busy machine a worker whose command took longer would go
        # on with per-process state (in memory, much faster), which is no shared throughput.
        store = RedisStore(url, prefix="bench-workers", timeout=2.0)
        runner = runner_on(store)
        await runner.run("lookup", {"key": "warm-up"})
        ready.wait()  # every worker imported and connected (a busy machine takes a while)
        ends = time.monotonic() + seconds
        done = 0
        while time.monotonic() < ends:
            done += (await runner.run("lookup", {"key": "k"})).is_success
        shared = runner.stats().store == "shared" and store.fallback_states == 0
        await store.aclose()
        return done, shared

    counts.put(asyncio.run(hammer()))


def throughput(url: str, workers: int, seconds: float) -> float:
    context = multiprocessing.get_context("spawn")
    counts = context.Queue()
    ready = context.Barrier(workers)
    processes = [
        context.Process(target=worker, args=(url, seconds, ready, counts)) for _ in range(workers)
    ]
    for process in processes:
        process.start()
    answers = [counts.get(timeout=120 + seconds) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    fell_back = sum(not shared for _, shared in answers)
    if fell_back:
        print(f"  ({fell_back} of {workers} fell back to per-process state: not all shared)")
    return sum(done for done, _ in answers) / seconds


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 4, 16])
    options = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("bench_redis.py needs redis-server (the Debian package redis-server)")
    port, folder = free_port(), tempfile.mkdtemp()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder,
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        asyncio.run(per_call(url, options.calls))
        print(f"\n{'workers on one scope':<48} {'calls/s':>8}")
        for workers in options.workers:
            rate = throughput(url, workers, options.seconds)
            print(f"{workers:>3} worker process(es){'':<27} {rate:8.0f}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
