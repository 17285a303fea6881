"""``tdk.testing.fuzz``: bounded, deterministic, and failing for each thing it promises to
catch (an unknown kind, an argument echoed in an error, a secret in a result or a log); and
the kit's packaging: ``import tdk`` loads none of it, and the plugin loads without its extras,
each part that needs one naming it."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Annotated, Any

import hypothesis
import pytest
from pydantic import BaseModel

import tdk.testing
from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import ErrorKind, RetryableToolError, ToolError

#: Bound of one subprocess, in seconds (each takes about one).
COMMAND_TIMEOUT = 60


class Filter(BaseModel):
    """A filter."""

    field: str
    values: list[int] = []


@tool(requires_secrets=["TOKEN"])
def careful(
    context: ToolContext,
    text: Annotated[str, "Text."],
    count: Annotated[int, "A count."] = 1,
    ratio: Annotated[float | None, "A ratio."] = None,
    filters: Annotated[list[Filter] | None, "Filters."] = None,
) -> dict[str, Any]:
    """Echo what it got (a success may carry the arguments; errors must not)."""
    if count < 0:
        raise RetryableToolError("count must not be negative")
    return {"text": text[:10], "count": count, "ratio": ratio}


def test_a_careful_toolkit_passes_deterministically() -> None:
    """The default run: 100 examples, derandomized: two runs see the same outcomes."""
    kit = Toolkit("careful", [careful])
    first, second = tdk.testing.fuzz(kit), tdk.testing.fuzz(kit)
    assert first.examples == 100
    assert first.kinds == second.kinds
    assert first.kinds["success"] > 0
    assert first.kinds["TOOL_RUNTIME_BAD_INPUT_VALUE"] > 0


def test_the_callers_settings_are_used() -> None:
    kit = Toolkit("careful", [careful])
    settings = hypothesis.settings(max_examples=7, derandomize=True, database=None, deadline=None)
    assert tdk.testing.fuzz(kit, settings=settings).examples == 7


def test_a_runner_runs_the_calls() -> None:
    runner = ToolRunner(Toolkit("careful", [careful]))
    report = tdk.testing.fuzz(runner.toolkit, runner=runner, max_examples=10)
    assert runner.stats().calls == report.examples == 10


@tool
def echoing(word: Annotated[str, "A word."]) -> str:
    """Fail with the word in the message."""
    raise ToolError(f"no such word: {word}")


@tool(requires_secrets=["TOKEN"])
def leaking(context: ToolContext, word: Annotated[str, "A word."] = "") -> str:
    """Return the token."""
    return context.get_secret("TOKEN")


@tool(requires_secrets=["TOKEN"])
def logging_it(context: ToolContext, word: Annotated[str, "A word."] = "") -> str:
    """Log the token."""
    logging.getLogger("acme").info("token is %s", context.get_secret("TOKEN"))
    return "ok"


@tool
def unknown_kind(word: Annotated[str, "A word."] = "") -> str:
    """Fail with a kind no host knows."""
    raise ToolError("odd")


@pytest.mark.parametrize(
    ("target", "kinds", "message"),
    [
        pytest.param(echoing, set(ErrorKind), "the error echoes an argument", id="echo"),
        pytest.param(leaking, None, "result: leaking: value", id="secret-in-result"),
        pytest.param(logging_it, None, "log record: logger 'acme' INFO", id="secret-in-log"),
        pytest.param(unknown_kind, None, "the kind UNKNOWN is not one of those allowed", id="kind"),
    ],
)
def test_fuzz_catches(target: Any, kinds: set[ErrorKind] | None, message: str) -> None:
    """Each failure is an ``AssertionError`` naming the tool and what is wrong."""
    with pytest.raises(AssertionError, match="fuzz: ") as caught:
        tdk.testing.fuzz(Toolkit("bad", [target]), kinds=kinds, max_examples=30)
    assert message in str(caught.value)


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=True,
    )
    return done.stdout.strip()


def test_import_tdk_loads_none_of_the_kit() -> None:
    loaded = _fresh(
        "import sys, tdk, tdk.http, tdk.runner\n"
        "print(sorted(m for m in ('tdk.testing', 'pytest', 'respx', 'hypothesis') "
        "if m in sys.modules))"
    )
    assert loaded == "[]"


def test_the_plugin_loads_nothing_of_the_kit_until_a_fixture_asks() -> None:
    """pytest imports the entry module in every run where tdk is installed, before coverage
    starts: it imports nothing of tdk. The plugin it loads at configure time imports three
    modules; the kit's parts load when a fixture asks."""
    entry = _fresh("import sys, _tdk_pytest\nprint(sorted(m for m in sys.modules if 'tdk' in m))")
    assert entry == "['_tdk_pytest']"
    loaded = _fresh(
        "import sys, tdk.testing.plugin\nprint(sorted(m for m in sys.modules if 'tdk' in m))"
    )
    assert loaded == "['tdk', 'tdk.testing', 'tdk.testing.plugin']"


def test_the_plugins_eras_are_the_clients() -> None:
    from tdk.testing.plugin import MCP_ERAS

    assert tuple(tdk.testing.ERAS) == MCP_ERAS


#: Makes the kit's extras unimportable in a fresh process, then loads the plugin.
WITHOUT_EXTRAS = """
import asyncio, sys
for name in ("hypothesis", "respx", "openai", "anthropic", "mcp"):
    sys.modules[name] = None
import tdk.testing.plugin
from tdk import Toolkit
from tdk.testing import McpClients, ScriptedModel, Upstream, fuzz

async def connect():
    async with McpClients().connect(Toolkit("t")):
        pass

for attempt in (
    lambda: Upstream().__enter__(),
    lambda: ScriptedModel().openai("hi"),
    lambda: ScriptedModel().anthropic("hi"),
    lambda: fuzz(Toolkit("t")),
    lambda: asyncio.run(connect()),
):
    try:
        attempt()
    except ImportError as missing:
        print(missing)
"""


def test_the_plugin_loads_without_its_extras_and_each_part_names_what_it_needs() -> None:
    lines = _fresh(WITHOUT_EXTRAS).splitlines()
    assert lines == [
        "tdk_upstream needs respx: pip install 'tdk-tools[testing]'",
        "scripted_model.openai() needs the openai package: pip install 'tdk-tools[testing]'",
        "scripted_model.anthropic() needs the anthropic package: pip install 'tdk-tools[testing]'",
        "fuzz() needs hypothesis: pip install 'tdk-tools[testing]'",
        "tdk_mcp needs the mcp package: pip install 'tdk-tools[testing]'",
    ]
