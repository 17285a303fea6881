"""Targets of the ``tdk`` command: ``tools.py:runner``, ``pkg.mod:toolkit``, ``a.b.c:make``
and the discovery rule of a bare module, for ``serve``, ``check``, ``schema`` and ``run``.

Each module is written to a temp dir and run by ``python -m tdk`` in a subprocess; ``tdk
serve`` is spoken to by the ``mcp`` SDK's own client over stdio.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import mcp
import pytest
from _mcp_support import facts, run, text_of
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

#: Bound of one command, in seconds (each takes well under one).
COMMAND_TIMEOUT = 60

#: Tools, a toolkit, and runners with policies that show which runner serves a call: ``count``
#: is limited to one call an hour by ``limited``; ``flaky`` fails once (a retryable 503) then
#: answers, which a runner with retries hides.
TOOLS = '''
from typing import Annotated

from tdk import RateLimit, RetryPolicy, Toolkit, ToolRunner, tool
from tdk.errors import UpstreamServerError

_FAILED: set[str] = set()


@tool(read_only=True)
def count(n: Annotated[int, "A number."]) -> int:
    """Give the number back."""
    return n


@tool(read_only=True)
def flaky(token: Annotated[str, "Names the call."]) -> str:
    """Fail once for each token, then answer."""
    if token not in _FAILED:
        _FAILED.add(token)
        raise UpstreamServerError("try again", status_code=503)
    return token


def toolkit_named(name: str) -> Toolkit:
    return Toolkit(name, [count, flaky], version="7.1")


def limited(toolkit: Toolkit) -> ToolRunner:
    return ToolRunner(toolkit, rate_limit=RateLimit(calls=1, period=3600))
'''

#: Modules of targets, by name: each imports ``TOOLS`` as ``shared`` (written beside it).
MODULES = {
    "one_runner": "from shared import *\nrunner = limited(toolkit_named('metered'))\n",
    "one_toolkit": "from shared import *\nkit = toolkit_named('plain')\n",
    "only_tools": "from shared import count, flaky\n",
    "runner_and_toolkit": (
        "from shared import *\nkit = toolkit_named('both')\nrunner = limited(kit)\n"
    ),
    "two_runners": (
        "from shared import *\nfirst = limited(toolkit_named('a'))\n"
        "second = ToolRunner(toolkit_named('b'))\n"
    ),
    "two_toolkits": (
        "from shared import *\nred = toolkit_named('red')\nblue = toolkit_named('blue')\n"
    ),
    "factories": textwrap.dedent(
        """
        from shared import *


        def make():
            return limited(toolkit_named("made"))


        def make_kit():
            return toolkit_named("made-kit")


        def broken():
            raise RuntimeError("no database: password=hunter2-hunter2-hunter2")


        def wrong():
            return {"not": "a runner"}


        def needs(region):
            return toolkit_named(region)


        async def later():
            return toolkit_named("later")


        settings = {"region": "eu"}
        kit = toolkit_named("kit")
        """
    ),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The modules, written once; also as a package ``deep.er.place`` for dotted targets."""
    root = tmp_path_factory.mktemp("targets")
    (root / "shared.py").write_text(TOOLS)
    for name, text in MODULES.items():
        (root / f"{name}.py").write_text(text)
    package = root / "deep" / "er"
    package.mkdir(parents=True)
    (root / "deep" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "place.py").write_text(MODULES["factories"])
    return root


def tdk(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m tdk ARGV`` run in ``folder``, stdin closed."""
    return subprocess.run(
        [sys.executable, "-m", "tdk", *argv],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def _served(folder: Path, target: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What an SDK client sees of ``tdk serve TARGET`` over stdio: the server's name and
    version, the tools listed, and each call's text (a failure's kind)."""

    async def scenario() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "tdk", "serve", target], cwd=folder
        )
        with (folder / "serve.log").open("w") as errlog:
            async with mcp.Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                info = client.server_info
                listed = await client.list_tools()
                answers = [await client.call_tool(n, a) for n, a in calls]
        assert info is not None
        return {
            "name": info.name,
            "version": info.version,
            "tools": [each.name for each in listed.tools],
            "texts": [facts(a)["kind"] if a.is_error else text_of(a) for a in answers],
        }

    return run(scenario())


#: Two calls of ``count`` then one of ``flaky``: a runner limited to one call an hour refuses
#: the second ``count``; ``flaky`` fails once and succeeds only with retries (tdk serve's own
#: runner for a toolkit or tools has them; ``limited`` has none).
CALLS = [("count", {"n": 1}), ("count", {"n": 2}), ("flaky", {"token": "t"})]
REFUSED = "TOOL_RUNTIME_RATE_LIMITED"
FAILED = "UPSTREAM_RUNTIME_SERVER_ERROR"

SERVED = [
    pytest.param("one_runner.py", "metered", ["1", REFUSED, FAILED], id="bare-module-one-runner"),
    pytest.param("one_toolkit.py", "plain", ["1", "2", "t"], id="bare-module-one-toolkit"),
    pytest.param("only_tools.py", "only_tools", ["1", "2", "t"], id="bare-module-tools"),
    pytest.param(
        "runner_and_toolkit.py", "both", ["1", REFUSED, FAILED], id="runner-before-toolkit"
    ),
    pytest.param("two_runners.py:second", "b", ["1", "2", FAILED], id="file-colon-runner"),
    pytest.param("two_toolkits:blue", "blue", ["1", "2", "t"], id="module-colon-toolkit"),
    pytest.param("deep.er.place:make", "made", ["1", REFUSED, FAILED], id="dotted-factory"),
    pytest.param("factories.py:make_kit", "made-kit", ["1", "2", "t"], id="factory-of-toolkit"),
]


@pytest.mark.parametrize(("target", "name", "texts"), SERVED)
def test_serve_serves_what_the_target_names(
    folder: Path, target: str, name: str, texts: list[str]
) -> None:
    """A runner the module gives is served as it is (its rate limit refuses the second call,
    and it does not retry); a toolkit or the module's tools get ``tdk serve``'s runner, with
    retries. The server is named after the toolkit."""
    seen = _served(folder, target, CALLS)
    assert seen["name"] == name
    assert seen["tools"] == ["count", "flaky"]
    assert seen["texts"] == texts


def test_the_server_has_the_version_of_the_toolkit(folder: Path) -> None:
    """The server's version is the toolkit's."""
    assert _served(folder, "one_toolkit.py", [])["version"] == "7.1"


CHECKED = [
    pytest.param("one_runner.py", "toolkit 'metered' (ToolRunner 'runner')", id="one-runner"),
    pytest.param("one_toolkit.py", "toolkit 'plain' (Toolkit 'kit')", id="one-toolkit"),
    pytest.param("only_tools.py", "toolkit 'only_tools',", id="tools"),
    pytest.param("two_runners.py:first", "toolkit 'a' (ToolRunner 'first')", id="named-runner"),
    pytest.param(
        "deep.er.place:make", "toolkit 'made' (ToolRunner made by make())", id="dotted-factory"
    ),
]


@pytest.mark.parametrize(("target", "said"), CHECKED)
def test_check_and_schema_take_targets(folder: Path, target: str, said: str) -> None:
    """``check`` says what it checked; ``schema`` describes the same tools."""
    checked = tdk(folder, "check", target)
    assert checked.returncode == 0, checked.stderr
    assert f"2 tools in {said}" in checked.stdout
    schema = tdk(folder, "schema", target)
    assert schema.returncode == 0, schema.stderr
    assert [each["name"] for each in json.loads(schema.stdout)] == ["count", "flaky"]


@pytest.mark.parametrize(
    ("target", "status", "error"),
    [
        pytest.param("one_runner.py", 1, FAILED, id="runner-no-retries"),
        pytest.param("one_toolkit.py", 1, FAILED, id="toolkit-as-before"),
        pytest.param("factories.py:make", 1, FAILED, id="factory"),
    ],
)
def test_run_takes_targets(folder: Path, target: str, status: int, error: str) -> None:
    """``tdk run`` of a target runs the call (through the module's runner when it gives
    one): the result is the tool's."""
    ran = tdk(folder, "run", target, "count", '{"n": 5}')
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["value"] == 5
    failed = tdk(folder, "run", target, "flaky", '{"token": "x"}')
    assert failed.returncode == status
    assert json.loads(failed.stdout)["error"]["kind"] == error


def test_run_goes_through_the_runner_of_the_target(folder: Path) -> None:
    """The runner's policies apply to ``tdk run``: a runner whose limiter refuses at once
    (its quota used up by a call made at import) answers ``TOOL_RUNTIME_RATE_LIMITED``."""
    (folder / "used_up.py").write_text(
        "from shared import *\n"
        "runner = limited(toolkit_named('used'))\n"
        "runner.run_sync('count', {'n': 0})\n"
    )
    ran = tdk(folder, "run", "used_up.py", "count", '{"n": 5}')
    assert ran.returncode == 1
    assert json.loads(ran.stdout)["error"]["kind"] == REFUSED


#: Targets that name nothing to serve, and what the command says (after "tdk COMMAND: ").
UNUSABLE = [
    pytest.param(
        "factories.py:missing",
        "factories.py:missing: module 'factories' has no attribute 'missing'; it holds "
        "Toolkit 'kit'",
        id="missing-attribute",
    ),
    pytest.param(
        "only_tools.py:runner",
        "only_tools.py:runner: module 'only_tools' has no attribute 'runner'; it holds no "
        "ToolRunner or Toolkit (serve its tools with only_tools.py alone)",
        id="missing-attribute-nothing-held",
    ),
    pytest.param(
        "factories.py:settings",
        "factories.py:settings is a dict, not a ToolRunner, a Toolkit or a function of no "
        "argument returning one",
        id="wrong-type",
    ),
    pytest.param(
        "factories.py:count",
        "factories.py:count is a tool: name a ToolRunner, a Toolkit or a function of no "
        "argument returning one, or serve every tool of the module with factories.py alone",
        id="a-tool",
    ),
    pytest.param(
        "two_runners.py",
        "two_runners.py holds 2 ToolRunners, 'first' and 'second': name the one to serve, "
        "e.g. two_runners.py:first",
        id="two-runners",
    ),
    pytest.param(
        "two_toolkits",
        "two_toolkits holds 2 Toolkits, 'red' and 'blue': name the one to serve, "
        "e.g. two_toolkits:red",
        id="two-toolkits",
    ),
    pytest.param(
        "deep.er.place:broken",
        "deep.er.place:broken: calling broken() raised RuntimeError: no database: "
        "password=[REDACTED]",
        id="factory-raises",
    ),
    pytest.param(
        "factories.py:wrong",
        "factories.py:wrong: wrong() returned a dict, not a ToolRunner or a Toolkit",
        id="factory-returns-a-dict",
    ),
    pytest.param(
        "factories.py:needs",
        "factories.py:needs takes arguments (region): a factory is called with none; give "
        "them defaults, or name a ToolRunner or a Toolkit",
        id="factory-takes-arguments",
    ),
    pytest.param(
        "factories.py:later",
        "factories.py:later is an async function: a factory is a plain function of no "
        "argument that returns a ToolRunner or a Toolkit",
        id="async-factory",
    ),
]


@pytest.mark.parametrize(("target", "message"), UNUSABLE)
def test_a_target_naming_nothing_to_serve_is_a_usage_error(
    folder: Path, target: str, message: str
) -> None:
    """Every command refuses such a target with status 2 and one line saying what the module
    holds; nothing is served, printed or run. (``schema`` loads as ``check`` does: see
    :func:`test_schema_refuses_what_check_refuses`.)"""
    for command in (["check"], ["run", "count", '{"n": 1}'], ["serve"]):
        done = tdk(folder, command[0], target, *command[1:])
        assert (done.returncode, done.stdout) == (2, ""), (command, done.stderr)
        assert done.stderr == f"tdk {command[0]}: {message}\n", command
        assert "hunter2" not in done.stderr


def test_schema_refuses_what_check_refuses(folder: Path) -> None:
    """``tdk schema`` of a target naming nothing to serve: status 2, the same line."""
    done = tdk(folder, "schema", "two_runners.py")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("tdk schema: two_runners.py holds 2 ToolRunners")


def test_a_deadline_is_not_given_to_a_runner_of_the_module(folder: Path) -> None:
    """``tdk serve --deadline`` with a runner the module gives is a usage error: the runner
    is served as it is, with its own deadline. For a toolkit it applies."""
    refused = tdk(folder, "serve", "one_runner.py", "--deadline", "5")
    assert refused.returncode == 2
    assert "--deadline is for tools or a Toolkit: the ToolRunner 'runner' is served" in (
        refused.stderr
    )
    served = tdk(folder, "serve", "one_toolkit.py", "--deadline", "5")  # (stdin closed: ends)
    assert served.returncode == 0, served.stderr


def test_run_refuses_stacktrace_for_a_runner(folder: Path) -> None:
    """``--stacktrace`` is the toolkit's setting for a runner of the module: a usage error."""
    ran = tdk(folder, "run", "one_runner.py", "count", '{"n": 1}', "--stacktrace")
    assert (ran.returncode, ran.stdout) == (2, "")
    assert "--stacktrace applies to tools or a Toolkit" in ran.stderr


def test_a_path_with_a_colon_in_a_folder_is_still_a_path(tmp_path: Path) -> None:
    """A ``:`` followed by something that is no identifier is part of the path."""
    folder = tmp_path / "a:b c"
    folder.mkdir()
    (folder / "shared.py").write_text(TOOLS)
    (folder / "colon_tools.py").write_text(MODULES["one_toolkit"])
    checked = tdk(folder, "check", str(folder / "colon_tools.py"))
    assert checked.returncode == 0, checked.stderr
    assert "toolkit 'plain' (Toolkit 'kit')" in checked.stdout
