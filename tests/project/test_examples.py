"""Every script in examples/ runs to completion in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


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


def test_the_testing_kit_example_passes_its_own_tests() -> None:
    """``examples/testing_kit``: its tests, which use every fixture of tdk.testing, pass when
    pytest runs them as a user would (a subprocess on the example's folder)."""
    folder = EXAMPLES[0].parent / "testing_kit"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=folder,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert "failed" not in done.stdout


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


def test_acting_as_the_user_example_walks_the_whole_flow() -> None:
    """``examples/acting_as_user.py``: against the loopback provider, the first call asks to
    sign in, a forwarded link and a replayed callback attach nothing, the call sent again
    runs as the user, a 401 and an expiring token are refreshed (once for calls together,
    without ``scope``), and a revoked grant or a sign-out asks again."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES[0].parent / "acting_as_user.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()
    asked = (
        "   TOOL_RUNTIME_INPUT_REQUIRED: auth.github: open /authorize?client_id&code_challenge"
        "&code_challenge_method&redirect_uri&response_type&scope&state"
    )
    for line in [
        asked,
        "   bob opens alice's link: other_user - This sign-in link was made for another user: "
        "nothing was attached. Ask your assistant for a link of your own.",
        "   alice opens it: attached - You are signed in. Go back to your assistant: the call "
        "can go on now.",
        "   the same callback again: used - This sign-in link was used already: nothing more "
        "was attached.",
        "   -> created alice/notes",
        "   after a 401: -> alice",
        "   refreshes so far: 1",
        "   5 calls at once: ['-> alice']",
        "   refreshes so far: 2",
        "   a refresh sends scope: False",
        "   bob signed in: -> bob",
        "   bob signed out; his token still honoured: False",
    ]:
        assert line in lines, done.stdout
    assert sum("TOOL_RUNTIME_INPUT_REQUIRED" in line for line in lines) == 3, done.stdout
    assert "code=" not in done.stdout + done.stderr
    assert "state=" not in done.stdout + done.stderr
