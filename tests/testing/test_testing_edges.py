"""The kit's parts at their edges: what each refuses, and the odd values each must cope with
(used directly, as a test outside pytest's fixtures would)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest

from tdk import Toolkit, ToolRunner, tool
from tdk.__main__ import main
from tdk.testing import Canaries, FakeClock, McpClients, ScriptedModel, Upstream, check_snapshot
from tdk.testing.dialects import go_duration


@tool(requires_secrets=["A"])
def one(text: Annotated[str, "Text."] = "") -> str:
    """Say one thing."""
    return text


KIT = Toolkit("edges", [one])


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        pytest.param(
            lambda: Upstream().rate_limited("fax"), ValueError, "unknown dialect", id="dialect"
        ),
        pytest.param(
            lambda: Upstream().rate_limited(retry_after=-1),
            ValueError,
            "retry_after",
            id="negative-wait",
        ),
        pytest.param(lambda: Upstream().server_error(404), ValueError, "5xx", id="not-5xx"),
        pytest.param(
            lambda: Upstream().route("GET", "/relative"), ValueError, "absolute", id="relative"
        ),
        pytest.param(
            lambda: Upstream().get("https://a.test/").answer(),
            ValueError,
            "at least one",
            id="no-answer",
        ),
        pytest.param(
            lambda: FakeClock().advance(-1), ValueError, "does not go back", id="clock-back"
        ),
        pytest.param(
            lambda: asyncio.run(FakeClock().sleep(-1)), ValueError, "negative", id="sleep-back"
        ),
        pytest.param(lambda: McpClients("2024-01-01"), ValueError, "unknown MCP era", id="era"),
        pytest.param(
            lambda: ScriptedModel().openai("x", api="fax"), ValueError, "api must be", id="api"
        ),
        pytest.param(
            lambda: ScriptedModel().openai(42), TypeError, "turn 1 of the script", id="turn"
        ),
        pytest.param(
            lambda: ScriptedModel().openai([("only-a-name",)]),
            TypeError,
            "a tool call is",
            id="call",
        ),
        pytest.param(
            lambda: Canaries().context(42), TypeError, "expected a secret name", id="source"
        ),
        pytest.param(
            lambda: check_snapshot(KIT, "x.json", formats=[]),
            ValueError,
            "at least one format",
            id="no-format",
        ),
        pytest.param(
            lambda: check_snapshot(KIT, "x.json", formats=["yaml"]),
            ValueError,
            "unknown format",
            id="format",
        ),
    ],
)
def test_what_the_kit_refuses(make: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.02, "20ms"), (1.5, "1.5s"), (30, "30s"), (360, "6m0s"), (3723.5, "1h2m3.5s")],
    ids=["ms", "fraction", "seconds", "minutes", "hours"],
)
def test_go_durations_are_written_as_openai_writes_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_an_unknown_era_given_to_connect_is_refused() -> None:
    async def scenario() -> None:
        async with McpClients().connect(KIT, era="1999"):
            pass

    with pytest.raises(ValueError, match="unknown MCP era"):
        asyncio.run(scenario())


def test_upstream_shortcuts_and_plain_responses() -> None:
    """``put``, ``patch``, ``delete``; a plain ``httpx.Response`` answers as it is; more than
    ten unrouted requests are counted, not all named."""
    with Upstream("https://api.test") as upstream:
        routes = [upstream.put("/a"), upstream.patch("/a"), upstream.delete("/a")]
        routes[0].answer(httpx.Response(201, json={"made": True}))
        with httpx.Client() as client:
            assert client.put("https://api.test/a").json() == {"made": True}
            assert client.patch("https://api.test/a").status_code == 200
            assert client.delete("https://api.test/a").status_code == 200
            for number in range(12):
                with pytest.raises(httpx.ConnectError):
                    client.get(f"https://api.test/other/{number}")
    assert [route.calls for route in routes] == [1, 1, 1]
    assert upstream.calls == 3
    assert "calls=1" in repr(routes[0])
    report = upstream.unrouted_report()
    assert report is not None
    assert report.count("  - GET") == 10
    assert "... and 2 more" in report


def test_the_clock_reads_as_it_moves() -> None:
    clock = FakeClock(start=5.0)
    asyncio.run(clock.sleep(1.5))
    clock.advance(2.0)
    assert (clock.clock(), clock.slept, clock.sleeps) == (8.5, 1.5, [1.5])
    assert repr(clock) == "<FakeClock now=8.5 sleeps=1>"


class _Odd:
    """An object that is neither JSON nor a model."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Odd({self.text})"


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def test_canaries_are_found_in_any_value_and_sources() -> None:
    """Sources: names, a tool, its definition, a runner; values: text, keys, objects, and
    values too deep to show (searched as far as they go, never an error)."""
    canaries = Canaries()
    context = canaries.context("B", one, one.definition, ToolRunner(KIT))
    assert set(context.secrets) == {"A", "B"}
    secret = canaries.values["A"]
    canaries.check({secret: 1}, sink="a key")
    canaries.check([_Odd(secret)], sink="an object")
    canaries.check(_deep(100_000), sink="too deep")
    canaries.check("nothing", sink="text")
    assert [(leak.sink, leak.where) for leak in canaries.leaks] == [
        ("a key", f"{secret} (a key)"),
        ("an object", "[0]"),
    ]
    assert canaries.report([]) is None


def test_log_records_of_every_shape_are_searched() -> None:
    """A message whose arguments do not fit its format, an exception's text, a stack, extra
    fields: each is looked at."""
    with Canaries() as canaries:
        secret = canaries.canary("A")
        log = logging.getLogger("edges")
        bad = {"name": "edges", "msg": "two %s %s", "args": (secret,)}  # (a handler's view)
        canaries.record_seen(logging.makeLogRecord(bad))
        try:
            raise ValueError(secret)
        except ValueError:
            log.exception("failed")
        log.info("fields", extra={"token": secret}, stack_info=True)
    assert [leak.where.split(": ")[1] for leak in canaries.leaks] == [
        "message",
        "exception",
        "extra.token",
    ]


def test_the_scripted_model_refuses_what_is_not_its_api(scripted_model: ScriptedModel) -> None:
    """A wrong path, a streamed request, a body that is not a JSON object, a script that
    does not exist: each a 4xx, as an API answers."""
    url = str(scripted_model.openai("hi").base_url).removesuffix("/").removesuffix("/0/v1")
    with httpx.Client() as client:
        answers = [
            client.post(f"{url}/0/v1/messages", json={}).status_code,
            client.post(f"{url}/0/v1/chat/completions", json={"stream": True}).status_code,
            client.post(f"{url}/0/v1/chat/completions", content=b"[1]").status_code,
            client.post(f"{url}/0/v1/chat/completions", content=b"{").status_code,
            client.post(f"{url}/99/v1/chat/completions", json={}).status_code,
            client.post(f"{url}/x/v1/chat/completions", json={}).status_code,
        ]
    assert answers == [404, 400, 400, 400, 404, 400]


def test_snapshot_files_that_cannot_be_compared(tmp_path: Path) -> None:
    """Not JSON, another version, other formats: each a problem that fails the check (and
    an update writes over it)."""
    path = tmp_path / "c.json"
    for text, problem in [
        ("{", "not a tdk contract snapshot"),
        (json.dumps({"tdk_snapshot": 99}), "not a tdk contract snapshot"),
        (json.dumps({"tdk_snapshot": 1, "formats": {"mcp": {}}}), "holds the formats ['mcp']"),
    ]:
        path.write_text(text)
        checked = check_snapshot(KIT, path, formats=["json"])
        assert checked.failed
        assert problem in checked.report()
    assert not check_snapshot(KIT, path, formats=["json"], update=True).failed


def test_marks_and_deprecations_are_labelled(tmp_path: Path) -> None:
    @tool(requires_secrets=["A", "OLD"], deprecated="Use two.")
    def before(text: Annotated[str, "Text."] = "") -> str:
        """Say one thing."""
        return text

    @tool(name="before", requires_secrets=["A"], deprecated="Use three.")
    def after(text: Annotated[str, "Text."] = "") -> str:
        """Say one thing."""
        return text

    @tool(name="before", requires_secrets=["A"])
    def kept(text: Annotated[str, "Text."] = "") -> str:
        """Say one thing."""
        return text

    path = tmp_path / "marks.json"
    check_snapshot(Toolkit("m", [before]), path, update=True)
    found = {(c.label, c.what) for c in check_snapshot(Toolkit("m", [after]), path).changes}
    assert found == {
        ("compatible", "no longer requires 'OLD'"),
        ("cosmetic", "deprecation message changed"),
    }
    check_snapshot(Toolkit("m", [after]), path, update=True)
    found = {(c.label, c.what) for c in check_snapshot(Toolkit("m", [kept]), path).changes}
    assert found == {("compatible", "no longer deprecated")}


def test_strict_mode_turned_on_is_compatible(tmp_path: Path) -> None:
    """The same tool, first in the Responses format (not strict), then strict: a snapshot
    written by hand from each."""
    path = tmp_path / "strict.json"
    check_snapshot(KIT, path, formats=["responses"], update=True)
    document = json.loads(path.read_text())
    document["formats"]["responses"]["one"]["strict"] = True
    path.write_text(json.dumps(document))
    changes = check_snapshot(KIT, path, formats=["responses"]).changes
    assert ("compatible", "strict changed from True to False") in {
        (c.label, c.what) for c in changes
    }


def test_a_tool_that_cannot_be_strict_is_a_command_error(tmp_path: Path) -> None:
    """``tdk schema --check`` with a format the tool cannot take: status 1, on stderr."""
    (tmp_path / "free.py").write_text(
        "from typing import Annotated\nfrom tdk import tool\n\n"
        "@tool\ndef free(data: Annotated[dict[str, int], 'Any keys.']) -> int:\n"
        "    '''Count.'''\n    return len(data)\n"
    )
    target, snapshot = str(tmp_path / "free.py"), str(tmp_path / "s.json")
    status = main(["schema", target, "--check", snapshot, "--update", "--format", "openai-strict"])
    assert status == 1


def test_the_spans_of_a_provider_already_set_are_heard_while_listening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tracer provider the tests set (put straight into the API's global here: the public
    setter works once per process) gets a processor that forwards while ``Canaries`` listen,
    and only then; a provider that takes no processor leaves spans unwatched."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(shutdown_on_exit=False)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    tracer = provider.get_tracer("edges")
    with Canaries() as canaries:
        assert canaries.spans_watched
        with tracer.start_as_current_span("inside") as span:
            span.set_attribute("token", canaries.canary("A"))
    with tracer.start_as_current_span("after") as span:
        span.set_attribute("token", canaries.values["A"])
    assert [leak.where for leak in canaries.leaks] == ["'inside': attributes.token"]
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", object())
    with Canaries() as unwatched:
        assert not unwatched.spans_watched
