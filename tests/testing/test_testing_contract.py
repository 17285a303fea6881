"""Contract snapshots: each change of a tool labelled breaking, compatible or cosmetic, the
snapshot file stable, and ``tdk schema TARGET --check FILE [--update]`` with its exit
statuses (run as a user runs it: ``python -m tdk`` in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from tdk import Tool, Toolkit, tool
from tdk.__main__ import main
from tdk.testing import check_snapshot
from tdk.testing.schema_changes import schema_changes

#: Bound of one command, in seconds (each takes about one).
COMMAND_TIMEOUT = 60


class Issue(BaseModel):
    """An issue."""

    number: int
    url: str | None = None


class Node(BaseModel):
    """A tree."""

    name: str
    children: list[Node] = []


@tool
def base(
    q: Annotated[str, "Query."],
    state: Annotated[Literal["open", "all"], "Which."] = "open",
    size: Annotated[float, "Size."] = 1.0,
    tree: Annotated[Node | None, "A tree."] = None,
) -> Issue:
    """Search."""
    raise NotImplementedError


#: The parameters of ``base``, as source text, by name.
PARAMETERS = {
    "q": "q: Annotated[str, 'Query.']",
    "state": "state: Annotated[Literal['open', 'all'], 'Which.'] = 'open'",
    "size": "size: Annotated[float, 'Size.'] = 1.0",
    "tree": "tree: Annotated[Node | None, 'A tree.'] = None",
}


class Out2(BaseModel):
    """An issue."""

    number: int


class Out3(BaseModel):
    """An issue."""

    number: int | None = None
    url: str | None = None


def variant(
    *,
    first: str = "",
    last: str = "",
    output: str = "Issue",
    doc: str = "Search.",
    options: str = "",
    **parameters: str,
) -> Tool[..., Any]:
    """``base`` with parameters replaced (by name; "" removes one), one added ``first`` or
    ``last``, another output, docstring or ``@tool`` options."""
    listed = [first, *({**PARAMETERS, **parameters}.values()), last]
    source = (
        f"@tool({options})\n"
        f"def base({', '.join(p for p in listed if p)}) -> {output}:\n"
        f"    {doc!r}\n"
        "    raise NotImplementedError\n"
    )
    space: dict[str, Any] = {}
    exec(source, {**globals(), "Out2": Out2, "Out3": Out3, "Field": Field}, space)
    made: Tool[..., Any] = space["base"]
    return made


CASES = [
    pytest.param(
        {"first": "page: Annotated[int, 'P.']"}, "breaking",
        "required parameter 'page' added", id="required-added",
    ),
    pytest.param(
        {"last": "page: Annotated[int, 'P.'] = 1"}, "compatible",
        "optional parameter 'page' added", id="optional-added",
    ),
    pytest.param(
        {"state": "state: Annotated[Literal['open'], 'Which.'] = 'open'"}, "breaking",
        'parameter \'state\': enum value "all" removed', id="enum-removed",
    ),
    pytest.param(
        {"state": "state: Annotated[Literal['open', 'all', 'x'], 'Which.'] = 'open'"},
        "compatible", 'parameter \'state\': enum value "x" added', id="enum-added",
    ),
    pytest.param(
        {"size": "size: Annotated[int, 'Size.'] = 1"}, "breaking",
        "parameter 'size': number narrowed to integer", id="type-narrowed",
    ),
    pytest.param(
        {"q": "q: Annotated[str | int, 'Query.']"}, "compatible",
        "parameter 'q': type widened, integer now allowed", id="type-widened",
    ),
    pytest.param({"q": ""}, "breaking", "parameter 'q' removed", id="parameter-removed"),
    pytest.param(
        {"state": "state: Annotated[Literal['open', 'all'], 'Which.'] = 'all'"}, "compatible",
        'parameter \'state\': default changed from "open" to "all"', id="default",
    ),
    pytest.param(
        {"output": "Out2"}, "breaking", "output field 'url' removed", id="output-field-removed"
    ),
    pytest.param({"doc": "Search issues."}, "cosmetic", "description changed", id="description"),
    pytest.param(
        {"q": "q: Annotated[str, 'What to find.']"}, "cosmetic",
        "description of parameter 'q' changed", id="parameter-description",
    ),
    pytest.param(
        {"options": "read_only=True"}, "compatible", "read_only changed from False to True",
        id="now-read-only",
    ),
    pytest.param(
        {"options": "requires_secrets=['TOKEN']"}, "breaking", "now requires secret 'TOKEN'",
        id="secret-required",
    ),
    pytest.param(
        {"q": "q: Annotated[str, Field(max_length=10, description='Query.')]"}, "breaking",
        "parameter 'q': maxLength null -> 10", id="bound-tightened",
    ),
    pytest.param(
        {"size": "size: Annotated[float, Field(ge=0, description='Size.')] = 1.0"}, "breaking",
        "parameter 'size': minimum null -> 0", id="minimum-added",
    ),
    pytest.param(
        {"q": "q: Annotated[str, Field(pattern='^a', description='Query.')]"}, "breaking",
        'parameter \'q\': pattern null -> "^a"', id="pattern-added",
    ),
    pytest.param(
        {"output": "Out3"}, "breaking", "output field 'number' may now be missing",
        id="output-field-optional",
    ),
    pytest.param(
        {"output": "Out3"}, "breaking", "output field 'number': type widened, null now allowed",
        id="output-may-be-null",
    ),
    pytest.param(
        {"tree": "tree: Annotated[list[Node] | None, 'A tree.'] = None"}, "breaking",
        "parameter 'tree': type changed from object to array", id="ref-changed",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "label", "what"), CASES)
def test_each_change_is_labelled(
    tmp_path: Path, changes: dict[str, Any], label: str, what: str
) -> None:
    """A snapshot of ``base``, then one change: its label and words, in the json format
    (and the host formats where it shows)."""
    path = tmp_path / "contract.json"
    formats = ["json", "mcp", "openai-strict", "anthropic"]
    check_snapshot(Toolkit("t", [base]), path, formats=formats, update=True)
    checked = check_snapshot(Toolkit("t", [variant(**changes)]), path, formats=formats)
    found = {(change.label, change.what) for change in checked.changes}
    assert (label, what) in found, checked.report()
    assert checked.failed == any(change.label == "breaking" for change in checked.changes)


def test_an_optional_parameter_in_strict_mode_is_not_required(tmp_path: Path) -> None:
    """Strict mode lists every parameter as required; one that accepts null is optional."""
    path = tmp_path / "strict.json"
    check_snapshot(Toolkit("t", [base]), path, formats=["openai-strict"], update=True)
    changed = variant(last="page: Annotated[int, 'P.'] = 1")
    checked = check_snapshot(Toolkit("t", [changed]), path, formats=["openai-strict"])
    assert [(c.label, c.what) for c in checked.changes] == [
        ("compatible", "optional parameter 'page' added")
    ]


def test_a_tool_removed_or_added(tmp_path: Path) -> None:
    @tool
    def other() -> int:
        """Another tool."""
        return 1

    path = tmp_path / "tools.json"
    check_snapshot(Toolkit("t", [base]), path, update=True)
    checked = check_snapshot(Toolkit("t", [other]), path)
    assert [(c.label, c.tool, c.what) for c in checked.changes] == [
        ("breaking", "base", "tool removed"),
        ("compatible", "other", "tool added"),
    ]


def test_the_snapshot_file_is_stable_sorted_json(tmp_path: Path) -> None:
    """Written twice, the same bytes; keys sorted at every level; a final newline."""
    path = tmp_path / "stable.json"
    check_snapshot(Toolkit("t", [base]), path, formats=["mcp", "json"], update=True)
    first = path.read_bytes()
    check_snapshot(Toolkit("t", [base]), path, update=True)
    assert path.read_bytes() == first
    assert first.endswith(b"}\n")
    document = json.loads(first)
    assert (
        json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n" == first.decode()
    )
    assert sorted(document) == ["formats", "tdk_snapshot", "toolkit"]
    assert sorted(document["formats"]) == ["json", "mcp"]


TOOLS_V1 = '''
from typing import Annotated
from tdk import tool

@tool
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add."""
    return a + b
'''


#: ``TOOLS_V1`` with ``b`` required.
REQUIRED_B = TOOLS_V1.replace('"Second."] = 2', '"Second."]')


def tdk_schema(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tdk", "schema", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "args", "status", "said"),
    [
        pytest.param(None, ["--check", "c.json"], 1, "no snapshot yet", id="missing"),
        pytest.param(TOOLS_V1, ["--check", "c.json"], 0, "0 breaking, 0 compatible", id="same"),
        pytest.param(
            TOOLS_V1.replace('= 2) -> int', '= 2, c: Annotated[int, "C."] = 0) -> int'),
            ["--check", "c.json"], 0, "compatible  add: optional parameter 'c' added",
            id="compatible",
        ),
        pytest.param(
            REQUIRED_B,
            ["--check", "c.json"], 1, "BREAKING    add: parameter 'b' is now required",
            id="breaking",
        ),
        pytest.param(
            REQUIRED_B,
            ["--check", "c.json", "--update"], 0, "(snapshot written)", id="update",
        ),
        pytest.param(TOOLS_V1, ["--update"], 2, "--update needs --check FILE", id="usage"),
    ],
)  # fmt: skip
def test_tdk_schema_check_exit_statuses(
    tmp_path: Path, module: str | None, args: list[str], status: int, said: str
) -> None:
    """0: nothing breaking (changes listed) or written; 1: breaking, or no snapshot; 2: a
    usage error. The report is on stdout."""
    (tmp_path / "tools.py").write_text(TOOLS_V1)
    if module is not None:
        assert tdk_schema("tools.py", "--check", "c.json", "--update", cwd=tmp_path).returncode == 0
        (tmp_path / "tools.py").write_text(module)
    done = tdk_schema("tools.py", *args, cwd=tmp_path)
    assert done.returncode == status, done.stdout + done.stderr
    assert said in (done.stdout if status != 2 else done.stderr)


def _write_hostile(path: Path, kind: str) -> None:
    """A snapshot file nobody should have to trust: ``kind`` says how it is hostile."""
    if kind == "directory":
        path.mkdir()
    elif kind == "nested-deeper-than-python-reads":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "tools-not-objects":
        path.write_text(json.dumps({"tdk_snapshot": 1, "formats": {"json": [[[]]]}}))
    elif kind == "not-utf-8":
        path.write_bytes(b"\xff\xfe{}")
    else:  # too large: read no further than the bound
        path.write_bytes(b" " * (16 * 1024 * 1024 + 1))


@pytest.mark.parametrize(
    ("kind", "args", "said"),
    [
        ("directory", [], "cannot be read (IsADirectoryError)"),
        ("nested-deeper-than-python-reads", [], "not a tdk contract snapshot"),
        ("tools-not-objects", [], "the snapshot is malformed"),
        ("not-utf-8", [], "not UTF-8 text"),
        ("too-large", [], "larger than 16777216 bytes"),
        ("directory", ["--update"], "cannot write c.json (IsADirectoryError)"),
    ],
    ids=["directory", "deeply-nested", "wrong-shape", "not-utf-8", "too-large", "update-a-dir"],
)
def test_tdk_schema_check_of_a_hostile_snapshot_says_why_with_status_1(
    tmp_path: Path, kind: str, args: list[str], said: str
) -> None:
    """A snapshot that is a directory, nested deeper than Python's JSON reader goes, of
    another shape, not UTF-8 or huge is a failed check (status 1) saying why, never a
    traceback; so is an update that cannot write."""
    (tmp_path / "tools.py").write_text(TOOLS_V1)
    _write_hostile(tmp_path / "c.json", kind)
    done = tdk_schema("tools.py", "--check", "c.json", *args, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert said in done.stdout + done.stderr


def test_tdk_schema_without_check_still_prints_json(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS_V1)
    done = tdk_schema("tools.py", cwd=tmp_path)
    assert done.returncode == 0
    assert json.loads(done.stdout)[0]["name"] == "add"


def test_the_check_runs_in_process_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main()`` with arguments (the command's code, in this process): written, then the
    same, then a breaking change."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools_in_process.py").write_text(TOOLS_V1)
    check = ["schema", "tools_in_process.py", "--check", "c.json"]
    assert main([*check, "--update"]) == 0
    assert main(check) == 0
    (tmp_path / "tools_changed.py").write_text(REQUIRED_B)  # (a module is imported once)
    assert main(["schema", "tools_changed.py", "--check", "c.json"]) == 1
    assert "BREAKING    add: parameter 'b' is now required" in capsys.readouterr().out


def _arguments(schema: dict[str, Any], **more: Any) -> dict[str, Any]:
    """An input (or output) schema with one required property ``a``."""
    return {"type": "object", "properties": {"a": schema}, "required": ["a"], **more}


NODE = {
    "type": "object",
    "properties": {"next": {"$ref": "#/$defs/Node"}, "n": {"type": "integer"}},
}
SCHEMAS = [
    pytest.param(
        _arguments({"type": "string"}),
        _arguments({"type": "string", "deprecated": True}),
        "input",
        ("compatible", "parameter 'a' deprecated"),
        id="deprecated",
    ),
    pytest.param(
        _arguments({"type": "string", "x-odd": 1}),
        _arguments({"type": "string", "x-odd": 2}),
        "input",
        ("breaking", "parameter 'a': 'x-odd' changed"),
        id="unknown-keyword",
    ),
    pytest.param(
        _arguments({"type": "integer"}),
        _arguments({"type": "number"}),
        "input",
        ("compatible", "parameter 'a': integer widened to number"),
        id="integer-to-number",
    ),
    pytest.param(
        _arguments({"type": "string"}),
        _arguments({"type": ["string", "null"]}),
        "input",
        ("compatible", "parameter 'a': type widened, null now allowed"),
        id="type-list",
    ),
    pytest.param(
        _arguments({"enum": ["x", "y"]}),
        _arguments({"type": "string"}),
        "input",
        ("compatible", "parameter 'a': no longer limited to listed values"),
        id="enum-dropped",
    ),
    pytest.param(
        _arguments({"type": "string"}),
        _arguments({"enum": ["x"]}),
        "input",
        ("breaking", "parameter 'a': now limited to [\"x\"]"),
        id="enum-set",
    ),
    pytest.param(
        _arguments({"type": "string", "pattern": "a"}),
        _arguments({"type": "string", "pattern": "b"}),
        "input",
        ("breaking", 'parameter \'a\': pattern "a" -> "b"'),
        id="pattern-changed",
    ),
    pytest.param(
        _arguments({"type": "string", "format": "date"}),
        _arguments({"type": "string"}),
        "input",
        ("compatible", "parameter 'a': format \"date\" -> null"),
        id="format-dropped",
    ),
    pytest.param(
        _arguments({"type": "array", "items": {"type": "string"}, "maxItems": 3}),
        _arguments({"items": {"type": "string"}, "type": "array", "maxItems": 5}),
        "input",
        ("compatible", "parameter 'a': maxItems 3 -> 5"),
        id="bound-loosened",
    ),
    pytest.param(
        _arguments({"type": "string"}, additionalProperties=False),
        _arguments({"type": "string"}),
        "input",
        ("compatible", "the arguments: other keys now allowed"),
        id="extra-keys-allowed",
    ),
    pytest.param(
        _arguments({"type": "string"}),
        _arguments({"type": "string"}, additionalProperties=False),
        "input",
        ("breaking", "the arguments: other keys no longer allowed"),
        id="extra-keys-refused",
    ),
    pytest.param(
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        "input",
        ("breaking", "parameter '{}': type changed from integer to string"),
        id="extra-key-values",
    ),
    pytest.param(
        _arguments({"enum": ["x"]}),
        _arguments({"enum": ["x", "y"]}),
        "output",
        ("breaking", "output field 'a': enum value \"y\" added"),
        id="output-enum-added",
    ),
    pytest.param(
        _arguments({"items": {"type": "integer"}}),
        _arguments({"items": {"type": "string"}}),
        "input",
        ("breaking", "parameter 'a[]': type changed from integer to string"),
        id="items-inferred",
    ),
    pytest.param(
        {"$ref": "#/$defs/Node", "$defs": {"Node": NODE}},
        {"$ref": "#/$defs/Node", "$defs": {"Node": {**NODE, "required": ["n"]}}},
        "input",
        ("breaking", "parameter 'n' is now required"),
        id="recursive-ref",
    ),
    pytest.param(
        {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}},
        {"type": "object"},
        "input",
        ("breaking", "the arguments: type changed from any to object"),
        id="ref-loop",
    ),
]


@pytest.mark.parametrize(("old", "new", "role", "change"), SCHEMAS)
def test_schema_changes_table(
    old: dict[str, Any], new: dict[str, Any], role: str, change: tuple[str, str]
) -> None:
    """Each keyword's rule, on raw JSON Schemas (``ref-loop``: a ``$ref`` that never ends
    reads as a schema that says nothing, at a bounded cost)."""
    found = schema_changes(old, new, role=role)
    assert change in found, found
