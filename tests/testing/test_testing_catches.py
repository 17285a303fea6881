"""Each fixture of tdk.testing catches what it promises: an inner test file, run by
``pytester`` with the plugin loaded as users get it (the ``pytest11`` entry point), FAILS
with the message a user needs (every sink a canary reached, a readable contract diff, the
requests no route answered, a request past a model's script)."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

#: The tools the inner tests call: ``leaky`` leaks its token where ``SINK`` says.
TOOLS = '''
import logging
from typing import Annotated

from opentelemetry import trace

from tdk import ToolContext, Toolkit, tool

log = logging.getLogger("acme.tools")
tracer = trace.get_tracer("acme.tools")
SINKS = set()


@tool(requires_secrets=["API_TOKEN"], read_only=True)
def leaky(context: ToolContext, text: Annotated[str, "Some text."] = "") -> str:
    """Do something, leaking the token where SINKS say."""
    token = context.get_secret("API_TOKEN")
    if "log" in SINKS:
        log.debug("calling the API with %s", token)
    if "span" in SINKS:
        with tracer.start_as_current_span("acme.call") as span:
            span.set_attribute("acme.auth", token)
    if "result" in SINKS:
        return f"used {token}"
    return "done"


toolkit = Toolkit("acme", [leaky])
'''


def inner(
    pytester: pytest.Pytester, test: str, *args: str, subprocess: bool = False
) -> pytest.RunResult:
    """Run the inner test file ``test`` (beside ``tools.py``) with the plugin as installed (in
    this process, or in a new one)."""
    pytester.makepyfile(tools=TOOLS)
    pytester.makepyfile(test_inner=textwrap.dedent(test))
    pytester.syspathinsert()
    if subprocess:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", *args, timeout=120)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", *args)


LEAKS = """
import asyncio
import tools

def test_leaks(tdk_secrets):
    tools.SINKS.update({sinks!r})
    asyncio.run(tdk_secrets.run(tools.toolkit, "leaky", {{}}))
"""


@pytest.mark.parametrize(
    ("sinks", "named"),
    [
        pytest.param({"log"}, ["log record: logger 'acme.tools' DEBUG"], id="log"),
        pytest.param({"span"}, ["span: 'acme.call': attributes.acme.auth"], id="span"),
        pytest.param({"result"}, ["result: leaky (call", "value"], id="result"),
        pytest.param(
            {"log", "span", "result"},
            ["3 sink(s) (log record, result, span)", "log record:", "span:", "result:"],
            id="every-sink",
        ),
    ],
)
def test_a_leaking_tool_fails_tdk_secrets_naming_each_sink(
    pytester: pytest.Pytester, sinks: set[str], named: list[str]
) -> None:
    """A tool that puts its token in a log record, a span or its result fails the test that
    ran it, and the failure names every sink reached and the secret whose canary it was."""
    result = inner(pytester, LEAKS.format(sinks=sorted(sinks)))
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "tdk_secrets: a canary secret reached" in output
    for text in named:
        assert text in output
    assert "(the canary of API_TOKEN)" in output


def test_a_tool_that_keeps_its_secret_passes_tdk_secrets(pytester: pytest.Pytester) -> None:
    """The same tool, leaking nowhere: the test passes (the canary reached the tool)."""
    result = inner(
        pytester,
        """
        import asyncio
        import tools

        def test_clean(tdk_secrets):
            result = asyncio.run(tdk_secrets.run(tools.toolkit, "leaky", {}))
            assert result.value == "done"
            assert tdk_secrets.spans_watched
        """,
    )
    result.assert_outcomes(passed=1)


def test_spans_are_watched_on_the_provider_the_tests_set(pytester: pytest.Pytester) -> None:
    """A project whose conftest sets its own tracer provider (the public setter, once per
    process: so in a subprocess): ``tdk_secrets`` listens to it, and the spans still reach
    the project's own exporter."""
    pytester.makeconftest(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        EXPORTED = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTED))
        trace.set_tracer_provider(provider)
        """
    )
    result = inner(
        pytester,
        """
        import asyncio
        import conftest
        import tools

        def test_leaks(tdk_secrets):
            tools.SINKS.add("span")
            asyncio.run(tdk_secrets.run(tools.toolkit, "leaky", {}))
            assert "acme.call" in [s.name for s in conftest.EXPORTED.get_finished_spans()]
        """,
        subprocess=True,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*- span: 'acme.call': attributes.acme.auth*"])


def test_a_leak_into_an_mcp_answer_is_named(pytester: pytest.Pytester) -> None:
    """Over ``tdk_mcp``, in each era, the answer that carries the canary is named."""
    result = inner(
        pytester,
        """
        import asyncio
        import tools

        def test_over_mcp(tdk_mcp, tdk_secrets):
            tools.SINKS.add("result")

            async def scenario():
                context = tdk_secrets.context(tools.toolkit)
                async with tdk_mcp.connect(tools.toolkit, context=context) as client:
                    return await client.call_tool("leaky", {})

            asyncio.run(scenario())
        """,
    )
    result.assert_outcomes(failed=2)
    for era in ("2025-11-25", "2026-07-28"):
        result.stdout.fnmatch_lines(
            [f"*MCP answer: tools/call 'leaky' ({era}): *content[[]0[]].text*"]
        )


def test_a_leak_when_the_body_failed_too_is_reported(pytester: pytest.Pytester) -> None:
    """When the test body fails first, the leaks are added to its report."""
    result = inner(
        pytester,
        """
        import asyncio
        import tools

        def test_fails(tdk_secrets):
            tools.SINKS.add("log")
            asyncio.run(tdk_secrets.run(tools.toolkit, "leaky", {}))
            assert False, "the body's own failure"
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the body's own failure*", "*tdk_secrets*log record*"])


def test_canaries_in_the_environment_are_put_back(pytester: pytest.Pytester) -> None:
    """``tdk_secrets.env()`` sets each variable to its canary for the test only."""
    result = inner(
        pytester,
        """
        import os
        import tools

        def test_planted(tdk_secrets):
            planted = tdk_secrets.env(tools.toolkit, "OTHER")
            assert os.environ["API_TOKEN"] == planted["API_TOKEN"].replace("", "") != "before"
            assert set(planted) == {"API_TOKEN", "OTHER"}

        def test_after():
            assert os.environ["API_TOKEN"] == "before"
            assert "OTHER" not in os.environ
        """,
    )
    result.assert_outcomes(passed=2)


@pytest.fixture
def _token_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", "before")
    monkeypatch.delenv("OTHER", raising=False)


test_canaries_in_the_environment_are_put_back = pytest.mark.usefixtures("_token_before")(
    test_canaries_in_the_environment_are_put_back
)


# -- contract snapshots -----------------------------------------------------------------------

V1 = '''
from typing import Annotated, Literal
from tdk import Toolkit, tool

@tool
def search(
    q: Annotated[str, "What to find."],
    state: Annotated[Literal["open", "all"], "Which."] = "open",
) -> list[str]:
    """Search."""
    return [q]

toolkit = Toolkit("contract", [search])
'''
V2_BREAKING = V1.replace('Literal["open", "all"]', 'Literal["open"]').replace(
    '"What to find."]', '"What to find."], page: Annotated[int, "Page."]'
)
V2_COMPATIBLE = V1.replace(
    '"What to find."]', '"What to find."], page: Annotated[int, "Page."] = 1'
)
SNAPSHOT_TEST = """
import contract

def test_contract(tdk_snapshot):
    tdk_snapshot(contract.toolkit, formats=["json", "mcp"])
"""


def _contract(pytester: pytest.Pytester, module: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(contract=module, test_contract=SNAPSHOT_TEST)
    pytester.syspathinsert()
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", *args)


def test_a_breaking_change_fails_the_snapshot_with_a_readable_diff(
    pytester: pytest.Pytester,
) -> None:
    """A snapshot written, then a required parameter added and an enum value removed: the
    test fails, one labelled line per change with the formats that show it, then the diff."""
    _contract(pytester, V1, "--tdk-update-snapshots").assert_outcomes(passed=1)
    assert (pytester.path / "snapshots" / "contract.json").is_file()
    result = _contract(pytester, V2_BREAKING)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*snapshots/contract.json: 2 breaking, 0 compatible, 0 cosmetic",
            "*A breaking change fails*",
            "*BREAKING    search: parameter 'state': enum value \"all\" removed  [[]json, mcp[]]",
            "*BREAKING    search: required parameter 'page' added  [[]json, mcp[]]",
            "*The snapshot's diff (- saved, + now):",
            '*-                "all"*',
            '*+            "page": {*',
        ]
    )
    _contract(pytester, V2_BREAKING, "--tdk-update-snapshots").assert_outcomes(passed=1)
    _contract(pytester, V2_BREAKING).assert_outcomes(passed=1)


def test_a_compatible_change_passes_and_is_listed(pytester: pytest.Pytester) -> None:
    """An optional parameter added: the test passes, the change shown in its output."""
    _contract(pytester, V1, "--tdk-update-snapshots").assert_outcomes(passed=1)
    result = _contract(pytester, V2_COMPATIBLE, "-rP")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*compatible  search: optional parameter 'page' added*"])


def test_a_missing_snapshot_fails_and_says_how_to_write_it(pytester: pytest.Pytester) -> None:
    result = _contract(pytester, V1)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no snapshot yet; write it with pytest --tdk-update-snapshots*"])


# -- upstream, model, plugin ------------------------------------------------------------------


def test_a_request_no_route_answers_fails_the_test(pytester: pytest.Pytester) -> None:
    """A tool calling a URL the test did not route: its call fails as a refused connection,
    and the test fails naming the request (without its query)."""
    result = inner(
        pytester,
        """
        import httpx

        def test_unrouted(tdk_upstream):
            tdk_upstream.get("https://api.example.test/known")
            try:
                httpx.get("https://api.example.test/other?token=abc")
            except httpx.ConnectError:
                pass
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*tdk_upstream: requests that no route answers:*", "*- GET https://api.example.test/other"]
    )
    assert "token=abc" not in result.stdout.str()


def test_a_request_past_the_end_of_a_script_fails_the_test(pytester: pytest.Pytester) -> None:
    result = inner(
        pytester,
        """
        import asyncio
        import openai

        def test_script(scripted_model):
            async def talk():
                async with scripted_model.openai("only answer") as llm:
                    for _ in range(2):
                        try:
                            await llm.chat.completions.create(model="m", messages=[])
                        except openai.BadRequestError:
                            pass

            asyncio.run(talk())
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["scripted_model:", "*- a chat request came after the end of its script (1 turns)"]
    )


def test_tdk_mcp_runs_a_test_once_per_era(pytester: pytest.Pytester) -> None:
    result = inner(pytester, "def test_era(tdk_mcp):\n    assert tdk_mcp.era\n", "-rA")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["PASSED *::test_era[[]mcp-2025-11-25[]]", "PASSED *::test_era[[]mcp-2026-07-28[]]"]
    )


def test_the_plugin_is_turned_off_by_name(pytester: pytest.Pytester) -> None:
    """``-p no:tdk`` (the entry point's name): the fixtures are gone."""
    result = inner(pytester, "def test_clock(tdk_clock):\n    pass\n", "-p", "no:tdk")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'tdk_clock' not found*"])
