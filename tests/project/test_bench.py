"""Every benchmark in bench/ still runs, on tiny sizes, and prints each of its rows.

Timings are not checked (MISSION: speed is measured, never asserted): these runs only keep the
benchmarks from rotting as the code they measure changes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(
    ("script", "arguments", "rows"),
    [
        pytest.param(
            "bench_execute.py",
            ["--calls", "400"],
            [
                "success, async tool",
                "success, sync tool (thread hop)",
                "success, sync tool inline",
                "error path (tool raises)",
                "invalid arguments",
            ],
            id="execute",
        ),
        pytest.param(
            "bench_http.py",
            ["--number", "20", "--rounds", "2"],
            ["200, hook installed vs plain client", "429 classified end to end vs bare 429"],
            id="http",
        ),
        pytest.param(
            "bench_runner.py",
            ["--calls", "400"],
            ["runner, every policy", "run_many, bulkhead of 50", "peak concurrency"],
            id="runner",
        ),
        pytest.param(
            "bench_hosts.py",
            ["--tools", "20", "--number", "20"],
            ["oai.tools(), 20 tools, kept", "ant.tools()", "for_model()", "oai.results"],
            id="hosts",
        ),
        pytest.param(
            "bench_mcp.py",
            ["--calls", "100"],
            ["ToolRunner.run", "tools/call handler", "SDK's MCPServer"],
            id="mcp",
        ),
        pytest.param(
            "bench_redis.py",
            ["--calls", "20", "--seconds", "0.3", "--workers", "1", "2"],
            ["runner, RedisStore", "bare EVALSHA", "worker process"],
            id="redis",
        ),
        pytest.param(
            "bench_serve.py",
            ["--seconds", "0.3", "--clients", "2", "--workers", "2", "--starts", "1"],
            ["tdk serve", "SDK MCPServer", "cold start", "tdk serve, 2 workers"],
            id="serve",
        ),
        pytest.param(
            "bench_otel.py",
            ["--calls", "50"],
            ["absent", "idle", "recording"],
            id="otel",
        ),
        pytest.param(
            "bench_define.py",
            ["--tools", "20", "--repeat", "1", "--imports", "1"],
            ["@tool", "Memory for 20 tools", "import tdk"],
            id="define",
        ),
    ],
)
def test_benchmark_runs(script: str, arguments: list[str], rows: list[str]) -> None:
    """The benchmark exits 0 and prints every row it measures."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for row in rows:
        assert row in done.stdout, done.stdout
