"""Every script in examples/ runs to completion in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[script.name for script in EXAMPLES])
def test_example_runs(script: Path) -> None:
    """The example exits 0 and prints something."""
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_main_job_classifies_failures() -> None:
    """The README's main job prints one classified error per failure, without leaking keys."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / "classify_errors.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for kind in (
        "TOOL_RUNTIME_RETRY",
        "TOOL_RUNTIME_CONTEXT_REQUIRED",
        "TOOL_RUNTIME_FATAL",
        "TOOL_RUNTIME_BAD_INPUT_VALUE",
        "UPSTREAM_RUNTIME_RATE_LIMIT",
        "TOOL_RUNTIME_TIMEOUT",
        "TOOL_NOT_FOUND",
    ):
        assert f'"kind": "{kind}"' in done.stdout
    assert '"retry_after_ms": 30000' in done.stdout
    assert "sk-demo-do-not-leak" not in done.stdout


@pytest.mark.parametrize(
    ("script", "lines"),
    [
        pytest.param(
            "openai_loop.py",
            [
                'tool forecast (call_forecast): {"city":"Oslo","max_c":4}',
                'tool headlines (call_news): {"kind":"UPSTREAM_RUNTIME_RATE_LIMIT",',
                '"retry_after_ms":30000}',
                "model: Tomorrow in Oslo: up to 4 °C. The news service is over its quota "
                "(UPSTREAM_RUNTIME_RATE_LIMIT); I can fetch the headlines in 30 s.",
            ],
            id="openai",
        ),
        pytest.param(
            "anthropic_loop.py",
            [
                'tool get_order (toolu_order): {"order":"A-1001","status":"shipped",',
                'tool track_shipment (toolu_track): {"kind":"UPSTREAM_RUNTIME_RATE_LIMIT",',
                '"retry_after_ms":20000}',
                "model: Order A-1001 is shipped. The carrier's tracking is busy "
                "(UPSTREAM_RUNTIME_RATE_LIMIT); ask me again in 20 s.",
            ],
            id="anthropic",
        ),
    ],
)
def test_agent_loop_runs_to_the_models_answer(script: str, lines: list[str]) -> None:
    """Each host's loop, on the official SDK client and a fake of its API: two tools in
    parallel, one rate limited; the model gets both answers (the fake refuses a turn with an
    unanswered call) and answers from them."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for line in lines:
        assert line in done.stdout
    assert "sk-" not in done.stdout


def test_mcp_server_example_shows_what_a_host_sees() -> None:
    """The example serves itself with ``tdk serve`` and talks to it with the mcp SDK's client:
    a success, a rate limit answered at once with its wait in ``_meta``, a bad argument, and a
    key read from the environment that is never shown."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / "mcp_server.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for line in [
        "structuredContent: {'city': 'Oslo', 'max_c': [4, 4]}",
        "headlines({'topic': 'energy'}) -> isError=True",
        "'retry_after_ms': 30000, 'status_code': 429",
        "'kind': 'TOOL_RUNTIME_BAD_INPUT_VALUE'",
        "structuredContent: {'result': 'plan: pro'}",
    ]:
        assert line in done.stdout
    assert "wx-demo-key-0042" not in done.stdout + done.stderr


def test_a_served_runner_shows_its_policies() -> None:
    """``examples/mcp_runner.py``: ``tdk serve`` of the module serves its ToolRunner (named
    after its toolkit); the client hears why the runner waits, a tool's progress, and that
    the list changed when a circuit opened."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / "mcp_runner.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for line in [
        "server market, protocol 2026-07-28",
        "tools: ['quote', 'report', 'status']",
        "  progress 0: rate limited upstream: retrying in 1.0 s, attempt 2 of 3",
        "  -> {'symbol': 'ACME', 'price': 101.5}",
        "  progress 3 of 3: page 3 of 3",
        "heard: ToolsListChanged",
        "tools: ['quote', 'report']",
    ]:
        assert line in done.stdout.splitlines(), done.stdout
