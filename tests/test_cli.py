"""The tdk command: check, schema and run, on real modules written to a temp dir."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tdk.__main__ import main

GOOD = '''
from typing import Annotated

from tdk import tool


@tool
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."]) -> int:
    """Add two numbers.

    More words for the model.
    """
    return a + b


@tool
def divide(a: Annotated[int, "Dividend."], b: Annotated[int, "Divisor."]) -> float:
    """Divide two numbers."""
    return a / b
'''

BAD = """
from tdk import tool


@tool
def search(query, limit: int = "ten"):
    return []
"""


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One module for all tests: a module name is bound to one file per process."""
    path = tmp_path_factory.mktemp("cli") / "cli_maths.py"
    path.write_text(textwrap.dedent(GOOD))
    return path


def test_check_lists_the_tools(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check loads every tool and says so."""
    assert main(["check", str(good)]) == 0
    out = capsys.readouterr().out
    assert "ok  add: Add two numbers." in out
    assert "2 tools in toolkit 'cli_maths', every definition valid." in out


def test_check_reports_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A broken definition exits 1 with the error and each problem with its fix."""
    path = tmp_path / "cli_broken.py"
    path.write_text(textwrap.dedent(BAD))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition")
    assert "  - parameter 'query' has no type annotation [missing_annotation]" in err
    assert "[missing_description]" in err
    assert "    fix: " in err


def test_schema_prints_definitions(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """schema prints the definitions a host would show, toolkit filled in."""
    assert main(["schema", str(good)]) == 0
    definitions = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in definitions] == ["add", "divide"]
    assert definitions[0]["toolkit"] == "cli_maths"
    assert definitions[0]["input_schema"]["required"] == ["a", "b"]


@pytest.mark.parametrize(
    ("argv", "status", "kind"),
    [
        pytest.param(["add", '{"a": 1, "b": 2}'], 0, None, id="success"),
        pytest.param(["divide", '{"a": 1, "b": 0}'], 1, "TOOL_RUNTIME_FATAL", id="tool-raises"),
        pytest.param(["add", '{"a": 1}'], 1, "TOOL_RUNTIME_BAD_INPUT_VALUE", id="bad-arguments"),
        pytest.param(["ad"], 1, "TOOL_NOT_FOUND", id="unknown-tool"),
    ],
)
def test_run_prints_the_result(
    good: Path, capsys: pytest.CaptureFixture[str], argv: list[str], status: int, kind: str | None
) -> None:
    """run makes one call and prints its ToolResult; the exit status says whether it worked."""
    assert main(["run", str(good), *argv]) == status
    result = json.loads(capsys.readouterr().out)
    assert (result["error"] or {}).get("kind") == kind
    if kind is None:
        assert result["value"] == 3


def test_run_with_stacktrace(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--stacktrace includes the redacted traceback."""
    main(["run", str(good), "divide", '{"a": 1, "b": 0}', "--stacktrace"])
    assert "ZeroDivisionError" in json.loads(capsys.readouterr().out)["error"]["stacktrace"]


def test_dotted_module_without_tools(capsys: pytest.CaptureFixture[str]) -> None:
    """A dotted module name is imported; a module without tools is a load error."""
    assert main(["check", "tdk.errors"]) == 1
    assert "[TOOLKIT_LOAD_FAILED]" in capsys.readouterr().err


def test_console_entry_point_runs(good: Path) -> None:
    """python -m tdk is the same command."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "check", str(good)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "every definition valid" in done.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["check", "TMP/nope.py"],
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit 'nope': "
            "no such file or directory: TMP/nope.py",
            id="missing-file",
        ),
    ],
)
def test_bad_targets_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """A target that cannot be loaded is one line on stderr and exit status 1."""
    resolved = tmp_path.resolve()
    assert main([arg.replace("TMP", str(resolved)) for arg in argv]) == 1
    captured = capsys.readouterr()
    assert captured.err == message.replace("TMP", str(resolved)) + "\n"
    assert captured.out == ""
