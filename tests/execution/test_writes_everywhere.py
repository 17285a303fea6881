"""A write that may have happened is never offered to the model as retryable, whatever runs it.

The runner's rule (tests/runner/test_runner_side_effects.py) holds without a runner too: through
``await tool.run()``, ``Toolkit.run()``, ``run_sync()``, ``tdk run`` and the text a host sends
back, a failure of a tool that is neither read-only nor idempotent says ``retryable: false``
and tells the model to check first, unless it says for certain that the upstream did nothing
(a rate limit, a connection refused before anything of the call was sent). Read-only and
idempotent tools keep ``retryable: true``. A real server on 127.0.0.1 counts the writes it
receives.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _writes_tools as tools
import pytest
from _http_server import Writes, refused_port

from tdk import Tool, Toolkit, ToolResult, tool
from tdk.errors import UpstreamServerError
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai

TOOLS_FILE = Path(tools.__file__)
WARNING = "The action may have taken effect before this failure."
TIMEOUT = "NETWORK_TRANSPORT_RUNTIME_TIMEOUT"
UNREACHABLE = "NETWORK_TRANSPORT_RUNTIME_UNREACHABLE"


@dataclass(frozen=True)
class Seen:
    """What a front door shows of a failed call (None: what it does not show)."""

    kind: str
    retryable: bool | None
    max_retry_attempts: int | None
    guidance: str | None


def _of_result(result: ToolResult) -> Seen:
    assert result.error is not None
    error = result.error
    return Seen(
        error.kind.value, error.retryable, error.max_retry_attempts, error.additional_prompt_content
    )


def _of_error_dict(error: dict[str, Any]) -> Seen:
    return Seen(
        error["kind"],
        error["retryable"],
        error["max_retry_attempts"],
        error["additional_prompt_content"],
    )


def _of_text(text: str) -> Seen:
    """What a model reads (``for_model()``): no ``retryable`` there, the guidance is."""
    shown = json.loads(text)
    return Seen(shown["kind"], None, None, shown.get("additional_prompt_content"))


def _toolkit_run(tool: Tool[..., Any], arguments: dict[str, Any]) -> ToolResult:
    return asyncio.run(Toolkit("t", [tool]).run(tool.name, arguments, call_id="call_1"))


def _openai(tool: Tool[..., Any], arguments: dict[str, Any]) -> Seen:
    (answer,) = oai.results([_toolkit_run(tool, arguments)])
    return _of_text(answer["content"])


def _anthropic(tool: Tool[..., Any], arguments: dict[str, Any]) -> Seen:
    (block,) = ant.results([_toolkit_run(tool, arguments)])
    assert block["is_error"] is True
    return _of_text(block["content"])


def _tdk_run(tool: Tool[..., Any], arguments: dict[str, Any]) -> Seen:
    """``tdk run`` in a subprocess: it prints the result's ``to_dict()``."""
    command = [sys.executable, "-m", "tdk", "run", str(TOOLS_FILE), tool.name]
    done = subprocess.run(
        [*command, json.dumps(arguments)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    return _of_error_dict(json.loads(done.stdout)["error"])


DOORS: dict[str, Callable[[Tool[..., Any], dict[str, Any]], Seen]] = {
    "tool.run": lambda tool, arguments: _of_result(asyncio.run(tool.run(arguments))),
    "Toolkit.run": lambda tool, arguments: _of_result(_toolkit_run(tool, arguments)),
    "run_sync": lambda tool, arguments: _of_result(tool.run_sync(arguments)),
    "openai-results": _openai,
    "anthropic-results": _anthropic,
    "tdk-run": _tdk_run,
}


@pytest.fixture
def upstream() -> Iterator[tuple[Writes, str]]:
    """A tracker on 127.0.0.1, and its base URL."""
    writes = Writes()
    with writes.serve() as base:
        yield writes, base


@pytest.fixture
def closed() -> Iterator[str]:
    """A URL of 127.0.0.1 whose connect is refused."""
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}/hook"


def _assert_may_have_acted(seen: Seen, kind: str) -> None:
    """Not retryable (where the door shows it), and the model is told to check first."""
    assert seen.kind == kind
    assert seen.retryable in (False, None)
    assert seen.max_retry_attempts in (0, None)
    assert seen.guidance is not None
    assert seen.guidance.startswith(WARNING)


def _assert_retryable(seen: Seen, kind: str) -> None:
    """Retryable as its error says, without the warning."""
    assert seen.kind == kind
    assert seen.retryable in (True, None)
    assert seen.max_retry_attempts != 0
    assert seen.guidance is None or WARNING not in seen.guidance


# (tool, path on the tracker or "closed", writes the tracker receives, kind, may have acted)
EVERY_DOOR: dict[str, tuple[Tool[..., Any], str, int, str, bool]] = {
    "write-read-timeout": (tools.create_issue, "/lost", 1, TIMEOUT, True),
    "write-connect-refused": (tools.create_issue, "closed", 0, UNREACHABLE, False),
    "read-only-read-timeout": (tools.find_issues, "/issues", 0, TIMEOUT, False),
}


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
@pytest.mark.parametrize(
    ("tool", "path", "writes", "kind", "acted"), EVERY_DOOR.values(), ids=EVERY_DOOR.keys()
)
def test_every_front_door_tells_a_write_that_may_have_happened(
    door: Callable[[Tool[..., Any], dict[str, Any]], Seen],
    tool: Tool[..., Any],
    path: str,
    writes: int,
    kind: str,
    acted: bool,
    upstream: tuple[Writes, str],
    closed: str,
) -> None:
    """A write received whose answer timed out: not retryable, with the warning, through
    every front door. A write whose connect was refused, and a read that timed out, stay
    retryable."""
    tracker, base = upstream
    seen = door(tool, {"url": closed if path == "closed" else base + path})
    assert tracker.writes == writes
    (_assert_may_have_acted if acted else _assert_retryable)(seen, kind)


# (tool, its URLs on the tracker or "closed", writes received, kind, may have acted)
FAILURES: dict[str, tuple[Tool[..., Any], dict[str, str], int, str, bool]] = {
    "write-reset": (tools.create_issue, {"url": "/reset"}, 1, UNREACHABLE, True),
    "write-503": (tools.create_issue, {"url": "/down"}, 1, "UPSTREAM_RUNTIME_SERVER_ERROR", True),
    "write-plain-client-read-timeout": (
        tools.create_issue_plain,
        {"url": "/lost"},
        1,
        TIMEOUT,
        True,
    ),
    "write-plain-client-503": (
        tools.create_issue_plain,
        {"url": "/down"},
        1,
        "UPSTREAM_RUNTIME_SERVER_ERROR",
        True,
    ),
    "write-plain-client-connect-refused": (
        tools.create_issue_plain,
        {"url": "closed"},
        0,
        UNREACHABLE,
        False,
    ),
    "sync-write-read-timeout": (tools.create_issue_sync, {"url": "/lost"}, 1, TIMEOUT, True),
    "sync-write-connect-refused": (
        tools.create_issue_sync,
        {"url": "closed"},
        0,
        UNREACHABLE,
        False,
    ),
    "write-past-its-time-limit": (
        tools.create_slowly,
        {"url": "/held"},
        1,
        "TOOL_RUNTIME_TIMEOUT",
        True,
    ),
    "sync-write-past-its-time-limit": (
        tools.create_slowly_sync,
        {"url": "/held"},
        1,
        "TOOL_RUNTIME_TIMEOUT",
        True,
    ),
    "write-answer-lost-then-connect-refused": (
        tools.create_then_notify,
        {"url": "/lost", "notify": "closed"},
        1,
        UNREACHABLE,
        True,
    ),
    "write-reset-then-connect-refused": (
        tools.create_then_notify,
        {"url": "/reset", "notify": "closed"},
        1,
        UNREACHABLE,
        True,
    ),
    "inner-tool-wrote-then-connect-refused": (
        tools.create_through_another,
        {"url": "/lost", "notify": "closed"},
        1,
        UNREACHABLE,
        True,
    ),
    "write-429": (tools.create_issue, {"url": "/quota"}, 0, "UPSTREAM_RUNTIME_RATE_LIMIT", False),
    "write-asks-for-other-arguments": (
        tools.create_or_ask,
        {"url": "/lost"},
        0,
        "TOOL_RUNTIME_RETRY",
        False,
    ),
    "idempotent-read-timeout": (tools.put_issue, {"url": "/issues"}, 0, TIMEOUT, False),
    "read-only-past-its-time-limit": (
        tools.find_issues_slowly,
        {"url": "/issues"},
        0,
        "TOOL_RUNTIME_TIMEOUT",
        False,
    ),
}


@pytest.mark.parametrize(
    ("tool", "urls", "writes", "kind", "acted"), FAILURES.values(), ids=FAILURES.keys()
)
def test_a_failure_of_a_write_is_retryable_only_where_nothing_happened(
    tool: Tool[..., Any],
    urls: dict[str, str],
    writes: int,
    kind: str,
    acted: bool,
    upstream: tuple[Writes, str],
    closed: str,
) -> None:
    """Timeouts, resets and 5xx of a write (through tdk's hook or a plain client, from an
    async or a sync tool, past the tool's own time limit) may have acted; so may a refused
    connect after an earlier request of the same call was received (its own, or an inner
    tool's). A 429 alone, a refused connect alone and a request for other arguments did
    nothing; read-only and idempotent tools are safe to repeat."""
    tracker, base = upstream
    arguments = {name: closed if url == "closed" else base + url for name, url in urls.items()}
    seen = _of_result(asyncio.run(tool.run(arguments)))
    assert tracker.writes == writes
    (_assert_may_have_acted if acted else _assert_retryable)(seen, kind)


def test_the_guidance_of_the_tool_follows_the_warning() -> None:
    """Guidance the error already had is kept, after the warning."""

    @tool
    async def create() -> str:
        """Create (the upstream answers 503)."""
        raise UpstreamServerError("down", status_code=503, additional_prompt_content="Use v2.")

    guidance = _of_result(create.run_sync({})).guidance
    assert guidance is not None
    assert guidance.startswith(WARNING)
    assert guidance.endswith(" Use v2.")


#: A script run in a fresh interpreter that never loads tdk.http: nothing can note a
#: request there, and the rule holds on the error alone.
WITHOUT_HOOKS = """
    import json, sys
    from typing import Annotated
    from tdk import tool
    from tdk.errors import UpstreamRateLimitError, UpstreamServerError

    @tool
    async def create(status: Annotated[int, "The status the upstream answers."]) -> str:
        '''Create (the upstream answers ``status``).'''
        if status == 429:
            raise UpstreamRateLimitError("slow down", status_code=429)
        raise UpstreamServerError("down", status_code=status)

    seen = [create.run_sync({"status": status}).to_dict()["error"] for status in (503, 429)]
    print(json.dumps({"loaded": "tdk.http._hooks" in sys.modules, "seen": seen}))
"""


def test_without_tdk_http_loaded_the_error_alone_decides(tmp_path: Path) -> None:
    """In a process that never loaded tdk's HTTP hooks, a 5xx of a write is not retryable
    and a 429 is."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WITHOUT_HOOKS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    shown = json.loads(done.stdout)
    assert shown["loaded"] is False
    server_error, rate_limit = shown["seen"]
    assert (server_error["retryable"], server_error["max_retry_attempts"]) == (False, 0)
    assert server_error["additional_prompt_content"].startswith(WARNING)
    assert rate_limit["retryable"] is True
    assert rate_limit["additional_prompt_content"] is None
