"""Serving over streamable HTTP: ``tdk serve --http`` against the SDK's ``MCPServer`` and FastMCP.

Each server serves the same async tool (``bench/serve_apps.py``) on loopback, in processes of
its own: ``tdk serve serve_apps.py:toolkit --http [--workers N]``, and the SDK's
``MCPServer`` and FastMCP under uvicorn (``--workers N``; stateless apps with more than one
worker, as ``tdk serve --workers`` is). FastMCP is optional (``pip install -e '.[bench]'``):
without it the script says so and measures the others.

1. Load: 1, 10 and 50 concurrent clients (the ``mcp`` SDK's own ``mcp.Client``, in this
   process, each connected before the clock starts) calling the tool for a fixed time, with
   1 and 2 server processes: calls per second (all clients), the p50 and p99 of a call's
   latency as a client sees it, and the server's CPU time per call (all its processes, from
   ``/proc``: what the server costs, whatever else runs on the machine).
2. Cold start: from the process's start to the first ``tools/list`` answered, with 1 and 2
   server processes (best of a few starts).

The clients share the machine with the servers (two cores here): figures are for the pair,
and the comparison is what to read.

Run: python bench/bench_serve.py [--seconds S] [--clients 1 10 50] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mcp

BENCH = Path(__file__).resolve().parent
ARGS = {"query": "python", "limit": 5}
HOST = "127.0.0.1"
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Server:
    """One of the servers compared: its name, and its command line for a port and workers."""

    name: str
    kind: str  # "tdk", or the uvicorn factory of serve_apps.py

    def argv(self, port: int, workers: int) -> list[str]:
        if self.kind == "tdk":
            extra = ["--workers", str(workers)] if workers > 1 else []
            target = f"{BENCH / 'serve_apps.py'}:toolkit"
            return [
                sys.executable,
                "-m",
                "tdk",
                "serve",
                target,
                "--http",
                "--port",
                str(port),
                *extra,
            ]
        return [
            sys.executable,
            "-m",
            "uvicorn",
            f"serve_apps:{self.kind}",
            "--factory",
            "--app-dir",
            str(BENCH),
            "--host",
            HOST,
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ]


SERVERS = [
    Server("tdk serve", "tdk"),
    Server("SDK MCPServer", "sdk_app"),
    Server("FastMCP", "fastmcp_app"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def tree_cpu(pid: int) -> float | None:
    """CPU seconds (user and system) of process ``pid`` and its descendants, from ``/proc``;
    None where there is no ``/proc``."""
    parents: dict[int, int] = {}
    used: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # (ended meanwhile)
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = int(fields[11]) + int(fields[12])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        tree.update(children)
        frontier.extend(children)
    return sum(used.get(each, 0) for each in tree) / os.sysconf("SC_CLK_TCK")


def settle(pid: int) -> None:
    """Wait until the server ``pid`` is idle (its other workers may still be starting after
    the first answered): under a tenth of a core for three tenths of a second in a row, at
    most ``START_TIMEOUT`` seconds."""
    quiet, ends = 0, time.monotonic() + START_TIMEOUT
    last = tree_cpu(pid)
    while last is not None and quiet < 3 and time.monotonic() < ends:
        time.sleep(0.1)
        now = tree_cpu(pid)
        quiet = quiet + 1 if now is not None and now - last < 0.01 else 0
        last = now


@contextlib.contextmanager
def running(server: Server, workers: int) -> Iterator[tuple[str, float, int]]:
    """``server`` started with ``workers`` processes: its URL, its cold start (seconds from
    the process's start to the first ``tools/list`` answered) and its pid. Stopped at the
    end."""
    port = free_port()
    env = {**os.environ, "BENCH_STATELESS": "1" if workers > 1 else "0"}
    started = time.perf_counter()
    process = subprocess.Popen(
        server.argv(port, workers),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=BENCH,
    )
    url = f"http://{HOST}:{port}/mcp"
    try:
        cold = asyncio.run(first_answer(url, process, started))
        settle(process.pid)
        yield url, cold, process.pid
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


async def first_answer(url: str, process: subprocess.Popen[bytes], started: float) -> float:
    """Seconds from ``started`` to the first ``tools/list`` answered at ``url``."""
    port = int(url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    while True:
        if process.poll() is not None:
            error = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"the server ended ({process.returncode}): {error}")
        if time.perf_counter() - started > START_TIMEOUT:
            raise RuntimeError(f"the server did not answer in {START_TIMEOUT} s")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
        except OSError:
            await asyncio.sleep(0.005)
            continue
        async with mcp.Client(url) as client:
            tools = await client.list_tools()
        assert [each.name for each in tools.tools] == ["search"]
        return time.perf_counter() - started


@dataclass(frozen=True)
class Load:
    """What :func:`load` measured."""

    rate: float
    """Calls per second, all clients."""
    p50: float
    p99: float
    """Latencies in ms."""
    cpu: float | None
    """The server's CPU time per call, in us (None without ``/proc``)."""


async def load(url: str, pid: int, clients: int, seconds: float) -> Load:
    """``clients`` clients calling the tool for ``seconds`` at the server ``pid``."""
    latencies: list[float] = []
    connected = 0
    go = asyncio.Event()
    cpu: list[float | None] = []

    async def client() -> None:
        nonlocal connected
        async with mcp.Client(url) as session:
            answer = await session.call_tool("search", ARGS)  # (warm: not measured)
            assert answer.structured_content == {"result": ["python"] * 5}, answer
            connected += 1
            if connected == clients:
                cpu.append(tree_cpu(pid))
                go.set()
            await go.wait()
            ends = time.perf_counter() + seconds
            while (now := time.perf_counter()) < ends:
                await session.call_tool("search", ARGS)
                latencies.append(time.perf_counter() - now)

    await asyncio.gather(*(client() for _ in range(clients)))
    before, after = cpu[0], tree_cpu(pid)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    spent = None if before is None or after is None else (after - before) / len(ordered) * 1e6
    return Load(len(ordered) / seconds, statistics.median(ordered) * 1000, p99 * 1000, spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 10, 50])
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--starts", type=int, default=3, help="cold starts per server (best)")
    options = parser.parse_args()
    servers = SERVERS
    if importlib.util.find_spec("fastmcp") is None:
        print("FastMCP: not installed (pip install -e '.[bench]'): measured without it\n")
        servers = [each for each in SERVERS if each.kind != "fastmcp_app"]
    row = "{:<16} {:>7} {:>7} {:>9} {:>8} {:>8} {:>14}"
    print(
        row.format("server", "workers", "clients", "calls/s", "p50 ms", "p99 ms", "server CPU us")
    )
    colds: dict[tuple[str, int], list[float]] = {}
    for workers in options.workers:
        for clients in options.clients:
            for server in servers:
                with running(server, workers) as (url, cold, pid):
                    colds.setdefault((server.name, workers), []).append(cold)
                    got = asyncio.run(load(url, pid, clients, options.seconds))
                cpu = "-" if got.cpu is None else f"{got.cpu:.0f}"
                numbers = (f"{got.rate:.0f}", f"{got.p50:.2f}", f"{got.p99:.2f}", cpu)
                print(row.format(server.name, workers, clients, *numbers), flush=True)
    print(f"\n{'cold start: process start to the first tools/list answered':<60} {'ms':>8}")
    for workers in options.workers:
        for server in servers:
            times = colds[(server.name, workers)]
            for _ in range(max(0, options.starts - len(times))):
                with running(server, workers) as (_, cold, _):
                    times.append(cold)
            label = f"{server.name}, {workers} worker{'s' if workers > 1 else ''}"
            print(f"{label:<60} {min(times) * 1000:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
