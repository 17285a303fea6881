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
