"""``tdk schema --format``: each host's shape of the tools, on modules written to a temp dir.

``json`` gives the definitions; ``openai``, ``openai-strict``, ``responses`` and ``anthropic``
give what ``tdk.hosts`` gives for the same toolkit; ``mcp`` gives MCP's ``Tool`` (checked
with the ``mcp`` SDK's own type), its annotations from the tool's marks and its output schema
an object (a value that is not one is wrapped as ``{"result": ...}``). A tool that cannot be
strict fails ``openai-strict`` naming it; an unknown format is a usage error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import mcp.types
import pytest
from jsonschema import Draft202012Validator

from tdk import Toolkit
from tdk.__main__ import SCHEMA_FORMATS, main
from tdk.hosts import anthropic, openai
from tdk.hosts._strict import strict_schema

HOSTS = '''
from __future__ import annotations

import dataclasses

from pydantic import BaseModel
from typing_extensions import TypedDict

from tdk import tool


class Reading(BaseModel):
    """A sensor reading."""

    sensor: str
    value: float


class Tree(BaseModel):
    """A category and its subcategories."""

    name: str
    children: list[Tree] = []


class Summary(TypedDict):
    """Counts of a day."""

    day: str
    total: int


@dataclasses.dataclass
class Point:
    """A point on the map."""

    x: float
    y: float


@tool(read_only=True)
def latest_reading(sensor: str, max_age: int = 60) -> Reading:
    """Read a sensor's latest value.

    Args:
        sensor: The sensor's id.
        max_age: The oldest reading to accept, in seconds.
    """
    return Reading(sensor=sensor, value=21.5)


@tool(read_only=True)
def maybe_reading(sensor: str) -> Reading | None:
    """Read a sensor, if it answers.

    Args:
        sensor: The sensor's id.
    """
    return Reading(sensor=sensor, value=1.0) if sensor == "s1" else None


@tool(read_only=True)
def sensor_name(sensor: str) -> str:
    """Name a sensor.

    Args:
        sensor: The sensor's id.
    """
    return sensor.upper()


@tool(read_only=True)
def history(sensor: str, limit: int = 3) -> list[int]:
    """List a sensor's last values.

    Args:
        sensor: The sensor's id.
        limit: How many values.
    """
    return list(range(limit))


@tool(read_only=True)
def counts_by_sensor() -> dict[str, int]:
    """Count the readings of each sensor."""
    return {"s1": 3, "s2": 0}


@tool(read_only=True)
def daily_summary(day: str) -> Summary:
    """Summarise a day.

    Args:
        day: The day, as YYYY-MM-DD.
    """
    return {"day": day, "total": 4}


@tool(read_only=True)
def sensor_position(sensor: str) -> Point:
    """Locate a sensor.

    Args:
        sensor: The sensor's id.
    """
    return Point(1.0, 2.0)


@tool(read_only=True)
def categories() -> Tree:
    """The sensor categories."""
    return Tree(name="all", children=[Tree(name="heat")])


@tool(idempotent=True, destructive=False)
def set_threshold(sensor: str, value: float) -> float:
    """Set a sensor's alarm threshold.

    Args:
        sensor: The sensor's id.
        value: The threshold.
    """
    return value


@tool(destructive=True, open_world=False, deprecated="use retire_sensor")
def delete_sensor(sensor: str) -> None:
    """Delete a sensor.

    Args:
        sensor: The sensor's id.
    """


@tool
def notify(sensor: str, message: str) -> bool:
    """Send a notification about a sensor.

    Args:
        sensor: The sensor's id.
        message: What to say.
    """
    return True
'''

NOT_STRICT = '''
from typing import Any

from tdk import tool


@tool(read_only=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool(read_only=True)
def tally(counts: dict[str, int]) -> int:
    """Add up votes.

    Args:
        counts: Votes by name.
    """
    return sum(counts.values())


@tool(read_only=True)
def remember(value: Any) -> str:
    """Remember a value.

    Args:
        value: Anything.
    """
    return "ok"
'''


def _module(directory: Path, text: str, prefix: str = "cli_schema") -> Path:
    """A module with a name of its own (a module name is bound to one file per process)."""
    path = directory / f"{prefix}_{uuid.uuid4().hex[:10]}.py"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One module of sensor tools for the whole file."""
    return _module(tmp_path_factory.mktemp("cli_schema"), HOSTS)


@pytest.fixture(scope="module")
def toolkit(hosts: Path) -> Toolkit:
    """The toolkit of the ``hosts`` module."""
    return Toolkit.from_path(hosts)


def _schema(path: Path, form: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    """``tdk schema PATH --format FORM``: the exit status, the JSON printed, stderr."""
    status = main(["schema", str(path), "--format", form])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out else None, captured.err


def _expected(toolkit: Toolkit, form: str) -> list[dict[str, Any]]:
    """What the Python API gives for the format."""
    if form == "json":
        return [definition.model_dump(mode="json") for definition in toolkit.definitions()]
    if form in ("openai", "openai-strict"):
        return openai.tools(toolkit, strict=form == "openai-strict")
    if form == "responses":
        return openai.tools(toolkit, api="responses")
    return anthropic.tools(toolkit)


def test_every_format_is_listed() -> None:
    """The formats are the six documented ones."""
    assert SCHEMA_FORMATS == ("json", "openai", "openai-strict", "responses", "anthropic", "mcp")


@pytest.mark.parametrize(
    ("form", "keys"),
    [
        pytest.param("json", None, id="json"),
        pytest.param("openai", {"type", "function"}, id="openai"),
        pytest.param("openai-strict", {"type", "function"}, id="openai-strict"),
        pytest.param(
            "responses",
            {"type", "name", "description", "parameters", "strict"},
            id="responses",
        ),
        pytest.param("anthropic", {"name", "description", "input_schema"}, id="anthropic"),
    ],
)
def test_each_format_prints_what_the_host_module_gives(
    hosts: Path,
    toolkit: Toolkit,
    form: str,
    keys: set[str] | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each host format prints, as JSON, exactly what tdk.hosts gives for the toolkit."""
    status, printed, err = _schema(hosts, form, capsys)
    assert (status, err) == (0, "")
    assert printed == json.loads(json.dumps(_expected(toolkit, form)))
    assert len(printed) == len(toolkit)
    if keys is not None:
        assert all(set(item) == keys for item in printed)


def test_openai_formats_mark_strictness(hosts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """openai has the plain schemas, openai-strict strict: true and strict ones, responses false."""
    _, plain, _ = _schema(hosts, "openai", capsys)
    _, strict, _ = _schema(hosts, "openai-strict", capsys)
    _, responses, _ = _schema(hosts, "responses", capsys)
    definitions = {d.name: d for d in Toolkit.from_path(hosts).definitions()}
    for item in plain:
        assert "strict" not in item["function"]
        assert item["function"]["parameters"] == definitions[item["function"]["name"]].input_schema
    for item in strict:
        assert item["function"]["strict"] is True
        definition = definitions[item["function"]["name"]]
        assert item["function"]["parameters"] == strict_schema(definition)
    assert all(item["strict"] is False for item in responses)
    [reading] = [item for item in strict if item["function"]["name"] == "latest_reading"]
    assert reading["function"]["parameters"]["required"] == ["sensor", "max_age"]


def test_a_deprecated_tool_says_so_in_every_host_format(
    hosts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The description a host shows carries the deprecation."""
    said = "Delete a sensor.\n\nDeprecated: use retire_sensor"
    for form in ("openai", "responses", "anthropic", "mcp"):
        _, printed, _ = _schema(hosts, form, capsys)
        items = [item.get("function", item) for item in printed]
        [deleted] = [item for item in items if item["name"] == "delete_sensor"]
        assert deleted["description"] == said, form


# --- openai-strict on tools that cannot be strict -----------------------------------------


def test_openai_strict_names_the_tool_that_cannot_be_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dict[str, int] parameter fails openai-strict: exit 1, the tool named on stderr."""
    path = _module(tmp_path, NOT_STRICT)
    status, printed, err = _schema(path, "openai-strict", capsys)
    assert status == 1
    assert printed is None
    assert err.startswith("tdk schema: ")
    assert "tool 'tally' cannot be strict: parameter 'counts' is a free-form object" in err
    assert "tool 'remember' cannot be strict: parameter 'value' takes any value" in err
    assert "ping" not in err
    for form in ("json", "openai", "responses", "anthropic", "mcp"):
        status, printed, err = _schema(path, form, capsys)
        assert (status, err, len(printed)) == (0, "", 3), form


def test_openai_strict_failure_in_a_subprocess(tmp_path: Path) -> None:
    """``python -m tdk schema --format openai-strict`` exits 1 naming the tool."""
    path = _module(tmp_path, NOT_STRICT)
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "schema", str(path), "--format", "openai-strict"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "tool 'tally' cannot be strict" in done.stderr


@pytest.mark.parametrize(
    "form",
    [
        pytest.param("xml", id="unknown"),
        pytest.param("OpenAI", id="wrong-case"),
        pytest.param("", id="empty"),
        pytest.param("openai_strict", id="underscore"),
    ],
)
def test_an_unknown_format_is_a_usage_error(
    hosts: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--format takes only the listed formats: anything else exits 2 naming the choices."""
    with pytest.raises(SystemExit) as exited:
        main(["schema", str(hosts), "--format", form])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "invalid choice" in captured.err
    assert "openai-strict" in captured.err


def test_an_unknown_format_in_a_subprocess(hosts: Path) -> None:
    """``python -m tdk schema --format xml`` exits 2."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "schema", str(hosts), "--format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


# --- mcp ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_tools(hosts: Path) -> dict[str, dict[str, Any]]:
    """``tdk schema --format mcp`` of the hosts module, by tool name (run in a subprocess, as
    the command runs)."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "schema", str(hosts), "--format", "mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {item["name"]: item for item in json.loads(done.stdout)}


def test_mcp_in_process_matches_the_command(
    hosts: Path, mcp_tools: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """main() prints the same MCP tools as the ``python -m tdk`` process, in toolkit order."""
    status, printed, err = _schema(hosts, "mcp", capsys)
    assert (status, err) == (0, "")
    assert printed == list(mcp_tools.values())


def test_mcp_tools_validate_as_the_sdk_type(
    mcp_tools: dict[str, dict[str, Any]], toolkit: Toolkit
) -> None:
    """Each item is an ``mcp.types.Tool`` with the definition's schemas, its output an object."""
    assert list(mcp_tools) == [definition.name for definition in toolkit.definitions()]
    for definition in toolkit.definitions():
        item = mcp_tools[definition.name]
        parsed = mcp.types.Tool.model_validate(item)
        assert parsed.name == definition.name
        assert parsed.input_schema == definition.input_schema
        assert parsed.output_schema is not None
        assert parsed.output_schema["type"] == "object"
        Draft202012Validator.check_schema(item["outputSchema"])
        assert set(item) == {"name", "description", "inputSchema", "outputSchema", "annotations"}


@pytest.mark.parametrize(
    ("name", "hints"),
    [
        pytest.param("latest_reading", (True, False, True, True), id="read-only"),
        pytest.param("set_threshold", (False, False, True, True), id="idempotent"),
        pytest.param("delete_sensor", (False, True, False, False), id="destructive-closed-world"),
        pytest.param("notify", (False, True, False, True), id="no-marks"),
    ],
)
def test_mcp_annotations_follow_the_marks(
    mcp_tools: dict[str, dict[str, Any]], name: str, hints: tuple[bool, bool, bool, bool]
) -> None:
    """The four MCP hints are the tool's marks (MCP's defaults when a mark is not given)."""
    annotations = mcp.types.Tool.model_validate(mcp_tools[name]).annotations
    assert annotations is not None
    got = (
        annotations.read_only_hint,
        annotations.destructive_hint,
        annotations.idempotent_hint,
        annotations.open_world_hint,
    )
    assert got == hints


READING = {
    "description": "A sensor reading.",
    "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
    "required": ["sensor", "value"],
    "type": "object",
}


def _wrapped(result: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": result},
        "required": ["result"],
    }
    if defs is not None:
        wrapped["$defs"] = defs
    return wrapped


OUTPUTS = [
    pytest.param("sensor_name", {"sensor": "s1"}, _wrapped({"type": "string"}), id="str"),
    pytest.param(
        "history",
        {"sensor": "s1"},
        _wrapped({"type": "array", "items": {"type": "integer"}}),
        id="list",
    ),
    pytest.param(
        "maybe_reading",
        {"sensor": "s1"},
        _wrapped({"anyOf": [{"$ref": "#/$defs/Reading"}, {"type": "null"}]}, {"Reading": READING}),
        id="model-or-none",
    ),
    pytest.param(
        "maybe_reading",
        {"sensor": "s9"},
        _wrapped({"anyOf": [{"$ref": "#/$defs/Reading"}, {"type": "null"}]}, {"Reading": READING}),
        id="model-or-none-as-none",
    ),
    pytest.param("delete_sensor", {"sensor": "s1"}, _wrapped({"type": "null"}), id="none"),
    pytest.param("set_threshold", {"sensor": "s1", "value": 2.5}, None, id="float"),
    pytest.param("latest_reading", {"sensor": "s1"}, READING, id="model-not-wrapped"),
    pytest.param(
        "counts_by_sensor",
        {},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        id="dict-not-wrapped",
    ),
    pytest.param(
        "daily_summary",
        {"day": "2024-05-01"},
        {
            "type": "object",
            "properties": {"day": {"type": "string"}, "total": {"type": "integer"}},
            "required": ["day", "total"],
            "additionalProperties": False,
        },
        id="typeddict-not-wrapped",
    ),
    pytest.param(
        "sensor_position",
        {"sensor": "s1"},
        {
            "description": "A point on the map.",
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        },
        id="dataclass-not-wrapped",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), OUTPUTS)
def test_mcp_output_schema_is_an_object(
    mcp_tools: dict[str, dict[str, Any]],
    toolkit: Toolkit,
    name: str,
    arguments: dict[str, Any],
    expected: dict[str, Any] | None,
) -> None:
    """An object output schema is kept, any other wrapped as {"result": ...}; the value fits it."""
    # Wrapped: $defs move to the top; the structured content is {"result": value}.
    schema = mcp_tools[name]["outputSchema"]
    if expected is not None:
        assert schema == expected
    definition = next(d for d in toolkit.definitions() if d.name == name)
    wrapped = definition.output_schema.get("type") != "object"
    assert ("result" in schema.get("properties", {})) is wrapped
    if wrapped:
        assert schema["required"] == ["result"]
        assert "$defs" not in schema["properties"]["result"]
        assert schema.get("$defs") == definition.output_schema.get("$defs")
    else:
        assert schema == definition.output_schema
    value = asyncio.run(toolkit.run(name, arguments)).value
    content = {"result": value} if wrapped else value
    Draft202012Validator(schema).validate(content)


def test_mcp_wraps_a_self_referencing_model(mcp_tools: dict[str, dict[str, Any]]) -> None:
    """A recursive model's output (a bare $ref at the root) is wrapped, unlike a plain model's."""
    # Valid MCP; the mcp SDK's own servers inline the root $ref instead and do not wrap.
    schema = mcp_tools["categories"]["outputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"] == {"result": {"$ref": "#/$defs/Tree"}}
    assert schema["$defs"]["Tree"]["type"] == "object"
    Draft202012Validator(schema).validate({"result": {"name": "all", "children": []}})
