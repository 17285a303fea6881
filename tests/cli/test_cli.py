"""The tdk command: check, schema and run, on real modules written to a temp dir."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tdk import Toolkit
from tdk.__main__ import main
from tdk.errors import ToolDefinitionError

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


def _module(directory: Path, text: str, prefix: str = "cli") -> Path:
    """A module with a name of its own (a module name is bound to one file per process)."""
    path = directory / f"{prefix}_{uuid.uuid4().hex[:10]}.py"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def _error_lines(err: str) -> list[str]:
    """The error lines of a report (its problem and fix lines are indented)."""
    return [line for line in err.splitlines() if not line.startswith(" ")]


TWO_BROKEN = '''
from typing import Annotated

from tdk import tool


@tool
def search(query) -> list[str]:
    """Search the issues."""
    return []


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool(timeout=0)
def fetch(number: Annotated[int, "The issue number."]) -> str:
    return ""
'''


@pytest.mark.parametrize(
    "command",
    [["check"], ["schema"], ["run", "ping"]],
    ids=["check", "schema", "run"],
)
def test_every_broken_tool_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Each broken tool of a module is reported with its problems, not only the first."""
    path = _module(tmp_path, TWO_BROKEN)
    assert main([command[0], str(path), *command[1:]]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert [line.split(":")[0] for line in _error_lines(captured.err)] == [
        "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool 'search'",
        "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool 'fetch'",
    ]
    assert "  - parameter 'query' has no type annotation [missing_annotation]\n" in captured.err
    assert "  - timeout= must be a positive number of seconds, not 0 [invalid_timeout]\n" in (
        captured.err
    )
    assert captured.err.count("    fix: ") == 4


def test_a_module_with_broken_tools_is_not_left_imported(tmp_path: Path) -> None:
    """After check, loading the module again raises as usual: its plain functions, left
    undecorated so that check could go on, are not handed out."""
    path = _module(tmp_path, TWO_BROKEN)
    assert main(["check", str(path)]) == 1
    with pytest.raises(ToolDefinitionError):
        Toolkit.from_path(path)


def test_modules_importing_a_broken_tool_are_not_left_imported(tmp_path: Path) -> None:
    """The modules that imported the module of a broken tool are forgotten too, as a failed
    import would leave them: loading again raises instead of finding no tools."""
    package = tmp_path / f"clipkg_{uuid.uuid4().hex[:10]}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "broken.py").write_text(textwrap.dedent(TWO_BROKEN))
    (package / "uses.py").write_text(f"from {package.name}.broken import search, ping\n")
    assert main(["check", str(package / "uses.py")]) == 1
    with pytest.raises(ToolDefinitionError):
        Toolkit.from_path(package / "uses.py")


def test_broken_tools_come_before_the_load_failure_they_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module that goes on to use a broken tool fails to load; its broken tools, the cause,
    are reported first."""
    path = _module(
        tmp_path,
        TWO_BROKEN + "\nfrom tdk import Toolkit\n\ntoolkit = Toolkit('issues', [search, ping])\n",
    )
    assert main(["check", str(path)]) == 1
    errors = _error_lines(capsys.readouterr().err)
    assert errors[0].startswith("[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError")
    assert errors[1].startswith("[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError")
    assert errors[2].endswith("TypeError: Toolkit.add() takes a tool made with @tool, not function")
    assert len(errors) == 3


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        pytest.param(
            '''
            from tdk import tool


            @tool
            def search(query) -> list[str]:
                """Search the issues."""
                return []
            ''',
            [
                "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
                "'search'"
            ],
            id="every-tool-broken",
        ),
        pytest.param(
            '''
            from tdk import tool


            @tool("search")
            def search() -> list[str]:
                """Search the issues."""
                return []


            @tool
            def fetch() -> str:
                return ""
            ''',
            [
                "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError: 1 problem: @tool was "
                "applied to an object of type str",
                "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
                "'fetch'",
            ],
            id="options-passed-positionally",
        ),
    ],
)
def test_broken_tools_alone_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, starts: list[str]
) -> None:
    """When the definition errors explain everything, nothing else is reported: not that the
    module has no tools, nor what the import would have stumbled over next."""
    assert main(["check", str(_module(tmp_path, text))]) == 1
    errors = _error_lines(capsys.readouterr().err)
    assert len(errors) == len(starts)
    for line, start in zip(errors, starts, strict=True):
        assert line.startswith(start)


def test_broken_tools_of_every_submodule_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a package, the broken tools of each submodule are reported."""
    package = tmp_path / f"clipkg_{uuid.uuid4().hex[:10]}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(textwrap.dedent(TWO_BROKEN))
    (package / "b.py").write_text(textwrap.dedent(TWO_BROKEN).replace("def ping", "def pong"))
    assert main(["check", str(package)]) == 1
    assert len(_error_lines(capsys.readouterr().err)) == 4


USES_A_SIBLING = '''
from typing import Annotated

import {helper}
from tdk import tool


@tool
def unit(city: Annotated[str, "The city."]) -> str:
    """Tell the unit of temperature."""
    return {helper}.UNIT
'''


@pytest.mark.parametrize(
    "inside",
    ["", "clipkg_{}/", "clipkg_{}/sub/"],
    ids=["file", "file-in-a-package", "file-in-a-subpackage"],
)
def test_a_file_can_import_the_modules_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: str
) -> None:
    """As for a script, the folder holding the file's top-level module comes first on
    sys.path while the command runs (and only then): the tools can import their siblings."""
    helper = _module(tmp_path, "UNIT = 'C'\n", prefix="helper").stem
    folder = tmp_path / inside.format(uuid.uuid4().hex[:10])
    folder.mkdir(parents=True, exist_ok=True)
    for package in [folder, *folder.parents][: inside.count("/")]:
        (package / "__init__.py").write_text("")
    path = _module(folder, USES_A_SIBLING.format(helper=helper))
    path_before = list(sys.path)
    try:
        assert main(["run", str(path), "unit", '{"city": "Oslo"}']) == 0, capsys.readouterr()
        assert json.loads(capsys.readouterr().out)["value"] == "C"
        assert sys.path == path_before
    finally:
        sys.modules.pop(helper, None)


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


def test_a_dotted_module_is_found_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tdk check package.module`` from the project's folder finds the package there, as
    ``python -m`` would (the ``tdk`` script's own folder is what Python put first), and
    leaves ``sys.path`` as it was."""
    package = f"dotted_{uuid.uuid4().hex[:10]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "maths.py").write_text(textwrap.dedent(GOOD))
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    assert main(["check", f"{package}.maths"]) == 0, capsys.readouterr().err
    assert "add" in capsys.readouterr().out
    assert sys.path == before


def test_the_working_directory_never_stands_in_for_an_installed_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The working directory is searched last, and only for a package found nowhere else: a
    ``colorsys.py`` there (a module of the standard library the target imports) is not the
    one imported, and a dotted target installed elsewhere is the installed one."""
    package = f"dotted_{uuid.uuid4().hex[:10]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("import colorsys  # noqa: F401\n")
    (tmp_path / package / "maths.py").write_text(textwrap.dedent(GOOD))
    marker = tmp_path / "shadow-imported"
    (tmp_path / "colorsys.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "tdk").mkdir()  # a folder named like an installed package: not looked at
    (tmp_path / "tdk" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    assert main(["check", f"{package}.maths"]) == 0, capsys.readouterr().err
    assert main(["check", "tdk.errors"]) == 1  # (the installed one: it defines no tools)
    assert "no tools" in capsys.readouterr().err
    assert not marker.exists()


def test_safe_path_mode_keeps_the_working_directory_out(tmp_path: Path) -> None:
    """With ``PYTHONSAFEPATH`` set, the ``tdk`` script does not look in the working directory
    for a dotted target (Python's own rule for ``-m`` then), and says the module is missing."""
    package = f"dotted_{uuid.uuid4().hex[:10]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "maths.py").write_text(textwrap.dedent(GOOD))
    script = str(Path(sys.executable).parent / "tdk")
    argv = [script, "check", f"{package}.maths"]
    found = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    safe = {**os.environ, "PYTHONSAFEPATH": "1"}
    refused = subprocess.run(
        argv, cwd=tmp_path, env=safe, capture_output=True, timeout=60, check=False
    )
    assert refused.returncode == 1
    assert package.encode() in refused.stderr


def test_check_counts_one_tool_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A toolkit of one tool is "1 tool", not "1 tools"."""
    path = _module(tmp_path, CHATTY)
    assert main(["check", str(path)]) == 0
    assert f"1 tool in toolkit '{path.stem}', every definition valid." in capsys.readouterr().out


def test_dotted_module_without_tools(capsys: pytest.CaptureFixture[str]) -> None:
    """A dotted module name is imported; a module without tools is a load error."""
    assert main(["check", "tdk.errors"]) == 1
    assert "[TOOLKIT_LOAD_FAILED]" in capsys.readouterr().err


BIG = """
from tdk import tool


@tool(description="Describe at length. " + "x" * 2_000_000)
def big() -> str:
    return "y" * 2_000_000
"""


@pytest.mark.parametrize("command", [["schema"], ["run", "big"]], ids=["schema", "run"])
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path, command: list[str]) -> None:
    """When the reader closes the pipe after one line (``| head -1``), the command stops
    quietly with status 1: no BrokenPipeError traceback on stderr."""
    path = _module(tmp_path, BIG)
    with subprocess.Popen(
        [sys.executable, "-m", "tdk", command[0], str(path), *command[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert process.stdout.readline() in (b"[\n", b"{\n")  # far more than a pipe holds
        process.stdout.close()
        err = process.stderr.read().decode()
        assert process.wait(timeout=60) == 1
    assert err == ""


CHATTY = """
import os
import sys
from typing import Annotated

from tdk import tool

print("import-time print 5b2a")
os.write(1, b"import-time fd write 5b2a\\n")


@tool
def chatty(text: Annotated[str, "Anything."]) -> str:
    \"\"\"Print while called.\"\"\"
    print("call-time print 5b2a")
    sys.stdout.write("call-time write without a newline 5b2a")
    os.write(1, b"call-time fd write 5b2a\\n")
    return text
"""

#: What CHATTY prints on the way, at import and (for ``tdk run``) while called.
CHATTY_PRINTS = ["import-time print 5b2a", "import-time fd write 5b2a"]
CHATTY_CALL_PRINTS = [
    "call-time print 5b2a",
    "call-time write without a newline 5b2a",
    "call-time fd write 5b2a",
]


@pytest.mark.parametrize(
    ("command", "printed"),
    [
        pytest.param(["schema"], CHATTY_PRINTS, id="schema"),
        pytest.param(["schema", "--format", "openai"], CHATTY_PRINTS, id="schema-openai"),
        pytest.param(
            ["run", "chatty", '{"text": "hi"}'], CHATTY_PRINTS + CHATTY_CALL_PRINTS, id="run"
        ),
    ],
)
def test_what_a_module_prints_goes_to_stderr_not_into_the_json(
    tmp_path: Path, command: list[str], printed: list[str]
) -> None:
    """``tdk schema`` and ``tdk run`` write one JSON document on stdout: what the module
    prints while imported, and the tool while it runs (``print``, buffered text, writes to fd
    1), goes to stderr, so that ``tdk run ... | jq`` works on any module."""
    path = _module(tmp_path, CHATTY)
    done = subprocess.run(
        [sys.executable, "-m", "tdk", command[0], str(path), *command[1:]],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": ""},  # buffered, as in a pipe by default
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    if command[0] == "run":
        assert document["value"] == "hi"
    else:
        assert len(document) == 1
    for text in printed:
        assert text in done.stderr.decode()


def test_what_a_tool_prints_in_process(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The same through main() in this process, whose ``sys.stdout`` is pytest's capture and
    not file descriptor 1: what the module and the tool print goes to stderr."""
    path = _module(tmp_path, CHATTY)
    assert main(["run", str(path), "chatty", '{"text": "hi"}']) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["value"] == "hi"
    for text in CHATTY_PRINTS + CHATTY_CALL_PRINTS:
        assert text in err


#: A module that re-wraps ``sys.stdout`` for UTF-8 when imported (a common idiom; the wrapper
#: closes the stream it wraps once it is dropped), and a tool that raises.
REWRAPS_STDOUT = """
import io
import sys
from typing import Annotated

from tdk import tool

sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")


@tool
def broken(text: Annotated[str, "Anything."]) -> str:
    \"\"\"Fail.\"\"\"
    print("call-time print 5b2a")
    raise RuntimeError("broken")
"""


@pytest.mark.parametrize(
    "command",
    [pytest.param(["schema"], id="schema"), pytest.param(["run", "broken", "{}"], id="run")],
)
def test_a_module_rewrapping_stdout_leaves_stderr_open(tmp_path: Path, command: list[str]) -> None:
    """A module that replaces ``sys.stdout`` with its own wrapper while imported never gets
    stderr to wrap: the command's JSON is whole on stdout and its report still reaches
    stderr (a usage error here: ``broken`` needs ``text``)."""
    path = _module(tmp_path, REWRAPS_STDOUT)
    done = subprocess.run(
        [sys.executable, "-m", "tdk", command[0], str(path), *command[1:]],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == (0 if command[0] == "schema" else 1), done.stderr
    assert json.loads(done.stdout)
    assert b"lost sys.stderr" not in done.stderr
    assert b"closed file" not in done.stderr


@pytest.mark.parametrize(
    "gesture",
    [
        pytest.param("sys.stdout.close()", id="closes-stdout"),
        pytest.param("sys.stdout = None", id="drops-stdout"),
        pytest.param("sys.stdout = sys.stderr", id="swaps-to-stderr"),
        pytest.param("sys.stdout = io.StringIO()", id="swaps-to-stringio"),
        pytest.param("sys.__stdout__.close()", id="closes-the-real-one"),
        pytest.param(
            'sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")\n'
            'sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")',
            id="rewraps-twice",
        ),
    ],
)
def test_a_module_that_changes_stdout_does_not_take_the_json(tmp_path: Path, gesture: str) -> None:
    """Whatever a module does to ``sys.stdout`` while imported (closing it, dropping it,
    swapping it for stderr or a ``StringIO``, re-wrapping it), the command's JSON is whole
    on its stdout, here a file while stderr is a pipe (neither one seekable like the other)."""
    source = f"import io\nimport sys\n{gesture}\n" + textwrap.dedent(GOOD)
    path = _module(tmp_path, source)
    output = tmp_path / "tools.json"
    with output.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "tdk", "schema", str(path)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert [tool["name"] for tool in json.loads(output.read_bytes())] == ["add", "divide"]
    assert done.stderr == b""


@pytest.mark.parametrize(
    ("redirect", "status"),
    [
        pytest.param("<&-", 0, id="stdin-closed"),
        pytest.param("2>&-", 0, id="stderr-closed"),
        pytest.param("</dev/null", 0, id="stdin-null"),
        pytest.param("<&- 2>&-", 0, id="stdin-and-stderr-closed"),
    ],
)
def test_closed_standard_streams(tmp_path: Path, redirect: str, status: int) -> None:
    """``tdk schema`` and ``tdk run`` work with stdin or stderr closed by the caller (a
    service manager, a host): the module's prints go nowhere, the JSON still to stdout."""
    path = _module(tmp_path, CHATTY)
    for command in (["schema"], ["run", "chatty", '\'{"text": "hi"}\'']):
        line = " ".join([shlex.quote(sys.executable), "-m", "tdk", command[0], str(path)])
        line = " ".join([line, *command[1:], redirect])
        done = subprocess.run(["/bin/sh", "-c", line], capture_output=True, timeout=60, check=False)
        assert done.returncode == status, done.stderr
        assert json.loads(done.stdout)


def test_a_closed_stdout_in_process(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same holds when main() runs in-process with a stdout whose reader is gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with open(write_end, "w") as closed:
        monkeypatch.setattr(sys, "stdout", closed)
        assert main(["schema", str(good)]) == 1
        monkeypatch.undo()


def test_run_arguments_that_are_not_text_are_a_usage_error(good: Path) -> None:
    """Arguments whose bytes are not UTF-8 are refused as a usage error (status 2), before
    anything is loaded, instead of becoming a puzzling invalid-arguments result."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "run", str(good), "add", b'{"a": "\xff", "b": 2}'],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode().splitlines()[-1] == (
        "tdk run: error: argument arguments: not valid UTF-8 text"
    )


def test_run_arguments_that_are_not_text_in_process(
    good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() refuses them the same way: argparse's exit with status 2."""
    with pytest.raises(SystemExit) as exited:
        main(["run", str(good), "add", '{"a": "\udcff"}'])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith("error: argument arguments: not valid UTF-8 text\n")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        pytest.param(
            "import sys\n\nsys.exit(0)\n",
            1,
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError: importing PATH raised SystemExit(0): a tool "
            "module must not exit when imported; put script code under if __name__ == '__main__':",
            id="module-exits-0",
        ),
        pytest.param(
            "raise SystemExit('no API key')\n",
            1,
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError: importing PATH raised SystemExit('no API "
            "key'): a tool module must not exit when imported; put script code under if "
            "__name__ == '__main__':",
            id="module-exits-with-a-message",
        ),
        pytest.param(
            "raise SystemExit(10 ** 5000)\n",
            1,
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError: importing PATH raised SystemExit(an int of "
            "16610 bits): a tool module must not exit when imported; put script code under if "
            "__name__ == '__main__':",
            id="module-exits-with-a-huge-status",
        ),
        pytest.param(
            "class Code:\n    def __repr__(self):\n        raise RuntimeError\n\n"
            "raise SystemExit(Code())\n",
            1,
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError: importing PATH raised SystemExit(a Code): a "
            "tool module must not exit when imported; put script code under if "
            "__name__ == '__main__':",
            id="module-exits-with-an-unprintable-code",
        ),
        pytest.param("raise KeyboardInterrupt\n", 130, "tdk: interrupted", id="interrupted"),
    ],
)
def test_a_module_that_ends_the_import_early(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, status: int, message: str
) -> None:
    """A module that exits while imported is a load error, not a silent success of check;
    Ctrl-C is one line and status 130."""
    path = _module(tmp_path, body)
    assert main(["check", str(path)]) == status
    captured = capsys.readouterr()
    assert captured.err == message.replace("PATH", str(path)) + "\n"
    assert captured.out == ""


SLOW = '''
import asyncio
import pathlib

from tdk import tool


@tool
async def wait() -> str:
    """Wait for a long time."""
    pathlib.Path(__file__).with_suffix(".started").write_text("")
    await asyncio.sleep(60)
    return "done"
'''


def test_ctrl_c_during_a_run(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) while a tool runs ends tdk with one line and status 130."""
    path = _module(tmp_path, SLOW)
    with subprocess.Popen(
        [sys.executable, "-m", "tdk", "run", str(path), "wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        started = path.with_suffix(".started")
        for _ in range(600):  # the tool tells when it runs: the signal cannot come too early
            if started.exists() or process.poll() is not None:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (130, b"", b"tdk: interrupted\n")


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


LOAD_FAILED = "[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit"


@pytest.mark.parametrize(
    ("target", "files", "message"),
    [
        pytest.param(
            "TMP/nope.py",
            {},
            f"{LOAD_FAILED} 'nope': no such file or directory: TMP/nope.py",
            id="missing-file",
        ),
        pytest.param(
            "TMP/nope",
            {},
            f"{LOAD_FAILED} 'nope': no such file or directory: TMP/nope",
            id="missing-path-without-suffix",
        ),
        pytest.param(
            "TMP/" + "x" * 300,
            {},
            f"{LOAD_FAILED} '{'x' * 300}': cannot use TMP/{'x' * 300} as a path: "
            "File name too long",
            id="path-too-long",
        ),
        pytest.param(
            "TMP/forecast.v2.py",
            {"forecast.v2.py": ""},
            f"{LOAD_FAILED} 'forecast.v2': cannot import TMP/forecast.v2.py as a module: the name "
            "'forecast.v2' contains a '.'; rename it, e.g. to 'forecast_v2'",
            id="dotted-file-name",
        ),
        pytest.param(
            "TMP/plain",
            {"plain/notes.py": ""},
            f"{LOAD_FAILED} 'plain': TMP/plain is a directory without __init__.py, not a Python "
            "package",
            id="directory-without-init",
        ),
        pytest.param(
            "TMP/UNIQUE",
            {"UNIQUE/__init__.py": "", "UNIQUE/notes.py": "X = 1\n"},
            f"{LOAD_FAILED} 'UNIQUE': module 'UNIQUE' defines no tools; decorate its functions "
            "with @tool",
            id="package-without-tools",
        ),
        pytest.param(
            "no_such_package_42.tools",
            {},
            f"{LOAD_FAILED} 'tools': could not import module 'no_such_package_42.tools': "
            "ModuleNotFoundError: No module named 'no_such_package_42'",
            id="unknown-dotted-name",
        ),
        pytest.param(
            "x" * 300,
            {},
            f"{LOAD_FAILED} '{'x' * 300}': could not import module '{'x' * 300}': "
            f"ModuleNotFoundError: No module named '{'x' * 300}'",
            id="dotted-name-too-long-for-a-file",
        ),
    ],
)
def test_bad_targets_are_one_line_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    files: dict[str, str],
    message: str,
) -> None:
    """A target that cannot be loaded is one line on stderr and exit status 1."""
    resolved, unique = str(tmp_path.resolve()), f"clipkg_{uuid.uuid4().hex[:10]}"
    for relative, text in files.items():
        path = tmp_path / relative.replace("UNIQUE", unique)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for command in (["check"], ["schema"], ["run", "anything"]):
        argv = [command[0], target.replace("TMP", resolved).replace("UNIQUE", unique)]
        assert main(argv + command[1:]) == 1
        captured = capsys.readouterr()
        assert captured.err == message.replace("TMP", resolved).replace("UNIQUE", unique) + "\n"
        assert captured.out == ""
