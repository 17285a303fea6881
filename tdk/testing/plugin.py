"""The pytest plugin of :mod:`tdk.testing`: its fixtures and hooks. pytest loads it through
the entry point ``tdk`` of the ``pytest11`` group (the module ``_tdk_pytest``, which adds the
option and loads this module when pytest is configured); ``pytest -p no:tdk`` turns it off.

Its fixtures are thin: each builds one object of the kit for the length of a test and checks
it when the test ends. What a fixture finds wrong (a canary that reached a sink, a request no
route answered, a request past the end of a model's script) fails the test itself, after its
body ran, naming everything found; when the body failed first, the findings are added to its
report. This module imports nothing of the kit at load (pytest loads it in every run of a
project where tdk is installed): each fixture imports its part of the kit when first used, and
a fixture whose package is missing fails with the name of the extra that brings it.

Option (added by ``_tdk_pytest``): ``--tdk-update-snapshots`` writes the contract snapshots
``tdk_snapshot`` compares with (accepting every change, breaking ones included).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tdk._define.toolkit import Toolkit
    from tdk.testing.canaries import Canaries
    from tdk.testing.clock import FakeClock
    from tdk.testing.mcp_client import McpClients
    from tdk.testing.scripted_model import ScriptedModel
    from tdk.testing.snapshot import SnapshotCheck
    from tdk.testing.upstream import Upstream

__all__ = [
    "pytest_runtest_call",
    "scripted_model",
    "tdk_clock",
    "tdk_mcp",
    "tdk_secrets",
    "tdk_snapshot",
    "tdk_upstream",
]

_UPDATE = "--tdk-update-snapshots"


def _findings(item: pytest.Item) -> list[tuple[str, str]]:
    """What the kit's fixtures of ``item`` found wrong: ``(fixture, report)`` each."""
    used: dict[str, Any] = getattr(item, "funcargs", {})
    if not ({"tdk_secrets", "tdk_upstream", "scripted_model"} & used.keys()):
        return []  # (most tests: nothing of the kit to load)
    from tdk.testing.canaries import Canaries
    from tdk.testing.scripted_model import ScriptedModel
    from tdk.testing.upstream import Upstream

    found = []
    secrets = used.get("tdk_secrets")
    if isinstance(secrets, Canaries):
        report = secrets.report(secrets.leaks[secrets.reported :])
        secrets.reported = len(secrets.leaks)
        if report:
            found.append(("tdk_secrets", report))
    upstream = used.get("tdk_upstream")
    if isinstance(upstream, Upstream) and (report := upstream.unrouted_report()):
        found.append(("tdk_upstream", report))
    model = used.get("scripted_model")
    if isinstance(model, ScriptedModel) and (report := model.problems()):
        found.append(("scripted_model", report))
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """After the test body: fail it with what the kit's fixtures found."""
    try:
        outcome = yield
    except BaseException:
        for fixture, report in _findings(item):
            item.add_report_section("call", fixture, report)
        raise
    found = _findings(item)
    if found:
        pytest.fail("\n\n".join(report for _, report in found), pytrace=False)
    return outcome


@pytest.fixture
def tdk_upstream() -> Iterator[Upstream]:
    """Fake upstream APIs on respx for this test: routes answering as real APIs fail, and
    counting their requests (:class:`tdk.testing.Upstream`)."""
    from tdk.testing.upstream import Upstream

    with Upstream() as upstream:
        yield upstream


@pytest.fixture
def tdk_clock() -> FakeClock:
    """A fake clock and sleep for ``ToolRunner`` (:class:`tdk.testing.FakeClock`):
    ``tdk_clock.runner(toolkit, retry=...)``."""
    from tdk.testing.clock import FakeClock

    return FakeClock()


@pytest.fixture
def tdk_secrets() -> Iterator[Canaries]:
    """Canary secrets (``tdk_secrets.context(toolkit)``, ``tdk_secrets.env(toolkit)``); the
    test fails naming every sink one reached (:class:`tdk.testing.Canaries`)."""
    from tdk.testing.canaries import Canaries

    with Canaries() as canaries:
        yield canaries
    late = canaries.report(canaries.leaks[canaries.reported :])
    if late:  # (found after the body ended: a span or record of the teardown)
        pytest.fail(late, pytrace=False)


#: The MCP protocol eras (``tdk.testing.ERAS``, written here so that loading the plugin
#: loads nothing of the kit; a test checks that the two agree).
MCP_ERAS = ("2025-11-25", "2026-07-28")


@pytest.fixture(params=MCP_ERAS, ids=[f"mcp-{era}" for era in MCP_ERAS])
def tdk_mcp(request: pytest.FixtureRequest) -> McpClients:
    """The official MCP client in memory (``async with tdk_mcp.connect(toolkit) as client``);
    each test using it runs once per protocol era (:class:`tdk.testing.McpClients`)."""
    from tdk.testing.mcp_client import McpClients

    return McpClients(request.param)


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    """Fake OpenAI and Anthropic APIs for the official clients, playing scripts of tool calls
    (:class:`tdk.testing.ScriptedModel`)."""
    from tdk.testing.scripted_model import ScriptedModel

    model = ScriptedModel()
    try:
        yield model
    finally:
        model.close()


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "toolkit"


@pytest.fixture
def tdk_snapshot(request: pytest.FixtureRequest) -> Callable[..., SnapshotCheck]:
    """``tdk_snapshot(toolkit, formats=["json", "mcp"], path=None, strict=False)``: compare
    the toolkit's definitions with its contract snapshot (by default
    ``snapshots/<toolkit>.json`` beside the test file; a relative ``path`` is from there too).
    A breaking change fails the test with a readable report; ``strict`` fails on any change.
    ``pytest --tdk-update-snapshots`` writes the snapshot instead."""
    from tdk.testing.snapshot import check_snapshot

    update = bool(request.config.getoption(_UPDATE, default=False))
    folder = Path(request.path).parent

    def check(
        toolkit: Toolkit,
        formats: Iterable[str] = ("json",),
        *,
        path: str | Path | None = None,
        strict: bool = False,
    ) -> SnapshotCheck:
        where = folder / (
            path if path is not None else f"snapshots/{_file_name(toolkit.name)}.json"
        )
        checked = check_snapshot(toolkit, where, formats=list(formats), update=update)
        if checked.failed or (strict and checked.changes and not checked.written):
            pytest.fail(checked.report(), pytrace=False)
        if checked.changes:
            print(checked.report())  # (shown with the test's output)
        return checked

    return check
