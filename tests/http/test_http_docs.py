"""The examples of ``docs/http.md`` and ``examples/http_hook.py`` run as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "http.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_page_has_examples() -> None:
    """Installing (sync, async), options, dialects, redaction and checks are all shown."""
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block-{i}" for i in range(len(BLOCKS))])
def test_doc_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each Python block of docs/http.md runs on its own, assertions included."""
    exec(compile(code, f"{DOC}:block", "exec"), {"__name__": "__doc_example__"})


def test_example_script_prints_a_classified_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``examples/http_hook.py`` classifies a 429 and prints its ``to_dict()``."""
    runpy.run_path(str(ROOT / "examples" / "http_hook.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert '"kind": "UPSTREAM_RUNTIME_RATE_LIMIT"' in printed
    assert '"retry_after_ms": 30000' in printed
    assert '"status_code": 403' in printed
    assert "sk-live" not in printed
