"""The fixtures of tdk.testing, used as a tool author uses them (tdk's own suite runs with the
plugin loaded): dialect-true rate limits, writes not repeated after a reset, a fake clock
that counts steps, the MCP client in both eras, and the scripted model APIs."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import httpx
import openai
import pytest

import tdk.http
from tdk import CircuitBreaker, RateLimit, RetryPolicy, Toolkit, tool
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai
from tdk.testing import FakeClock, McpClients, ScriptedModel, Upstream

T = TypeVar("T")
URL = "https://api.example.test/v1/items"
#: Bound of one scenario, in seconds (each takes well under one).
BOUND = 30


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, BOUND))


async def _get() -> dict[str, Any]:
    async with tdk.http.install(httpx.AsyncClient()) as client:
        return (await client.get(URL)).json()  # type: ignore[no-any-return]


@tool(read_only=True)
async def fetch() -> dict[str, Any]:
    """Read the items."""
    return await _get()


@tool
async def store(name: Annotated[str, "A name."] = "x") -> dict[str, Any]:
    """Write an item (neither read-only nor idempotent)."""
    async with tdk.http.install(httpx.AsyncClient()) as client:
        return (await client.post(URL, json={"name": name})).json()  # type: ignore[no-any-return]


KIT = Toolkit("items", [fetch, store])
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.5, jitter=False)


@pytest.mark.parametrize(
    ("dialect", "retry_after", "status", "expected_ms"),
    [
        pytest.param("github", 30, 429, 30_000, id="github"),
        pytest.param("github-secondary", 61, 403, 61_000, id="github-secondary"),
        pytest.param("openai", 1.5, 429, 1_500, id="openai-go-duration"),
        pytest.param("openai", 90, 429, 90_000, id="openai-minutes"),
        pytest.param("stripe", 2, 429, 2_000, id="stripe"),
        pytest.param("anthropic", 20, 429, 20_000, id="anthropic"),
        pytest.param("ietf", 30, 429, 30_000, id="ietf-08"),
        pytest.param("ietf-07", 5, 429, 5_000, id="ietf-07"),
        pytest.param("ietf-06", 12, 429, 12_000, id="ietf-06"),
    ],
)
def test_rate_limits_are_dialect_true(
    tdk_upstream: Upstream, dialect: str, retry_after: float, status: int, expected_ms: int
) -> None:
    """Each dialect's 429 (or 403) classifies as a rate limit with the exact wait, and keeps
    the real status (the reset is measured against the answer's ``Date``)."""
    tdk_upstream.get(URL).answer(tdk_upstream.rate_limited(dialect, retry_after=retry_after))
    result = run(KIT.run("fetch"))
    assert result.kind == "UPSTREAM_RUNTIME_RATE_LIMIT"
    assert (result.retry_after_ms, result.error.status_code) == (expected_ms, status)  # type: ignore[union-attr]


def test_a_github_403_rate_limit_keeps_its_status(tdk_upstream: Upstream) -> None:
    tdk_upstream.get(URL).answer(tdk_upstream.rate_limited("github", status=403))
    result = run(KIT.run("fetch"))
    assert (result.kind, result.error.status_code) == ("UPSTREAM_RUNTIME_RATE_LIMIT", 403)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool_name", "answer", "calls"),
    [
        pytest.param("store", "reset", 1, id="write-reset-after-send"),
        pytest.param("store", "timeout", 1, id="write-timeout-after-send"),
        pytest.param("store", "refused", 2, id="write-refused-before-send"),
        pytest.param("fetch", "reset", 2, id="read-reset"),
        pytest.param("fetch", "timeout", 2, id="read-timeout"),
    ],
)
def test_a_write_the_upstream_may_have_seen_is_not_repeated(
    tdk_upstream: Upstream, tdk_clock: FakeClock, tool_name: str, answer: str, calls: int
) -> None:
    """A connection that fails after the request left: a write is not sent again (it may
    have happened); a read is, and so is a write whose connection was refused."""
    failure = getattr(tdk_upstream, answer)()
    route = tdk_upstream.route("POST" if tool_name == "store" else "GET", URL)
    route.answer(failure, tdk_upstream.ok({"ok": True}))
    result = run(tdk_clock.runner(KIT, retry=RETRY).run(tool_name))
    assert route.calls == calls
    assert result.is_success == (calls == 2)


def test_a_30_second_retry_after_is_one_fake_step(
    tdk_upstream: Upstream, tdk_clock: FakeClock
) -> None:
    """The runner waits the server's 30 s on the fake clock: one step of exactly 30 s, and
    the clock moved by that much (no real wait: the loop ran no timer)."""
    tdk_upstream.get(URL).answer(
        tdk_upstream.rate_limited("github", retry_after=30), tdk_upstream.ok({"n": 1})
    )
    start = tdk_clock.now
    result = run(tdk_clock.runner(KIT, retry=RETRY).run("fetch"))
    assert (result.value, result.attempts) == ({"n": 1}, 2)
    assert tdk_clock.sleeps == [30.0]
    assert tdk_clock.now - start == tdk_clock.slept == 30.0


def test_limits_and_breakers_run_on_the_fake_clock(
    tdk_upstream: Upstream, tdk_clock: FakeClock
) -> None:
    """A circuit opens after two 503s, refuses until its reset timeout passes on the fake
    clock, then lets a probe through; the limiter's refusal says how long to wait."""
    tdk_upstream.get(URL).answer(
        tdk_upstream.server_error(503), tdk_upstream.server_error(503), tdk_upstream.ok({})
    )
    runner = tdk_clock.runner(
        KIT,
        circuit_breaker=CircuitBreaker(failure_threshold=2, reset_timeout=60.0),
        rate_limit=RateLimit(calls=10, period=1.0),
    )
    kinds = [run(runner.run("fetch")).kind for _ in range(3)]
    assert kinds == [
        "UPSTREAM_RUNTIME_SERVER_ERROR",
        "UPSTREAM_RUNTIME_SERVER_ERROR",
        "TOOL_RUNTIME_CIRCUIT_OPEN",
    ]
    tdk_clock.advance(60.0)
    assert run(runner.run("fetch")).is_success
    limited = tdk_clock.runner(KIT, rate_limit=RateLimit(calls=1, period=10.0))
    assert run(limited.run("fetch")).is_success
    refused = run(limited.run("fetch"))
    assert (refused.kind, refused.retry_after_ms) == ("TOOL_RUNTIME_RATE_LIMITED", 10_000)


def test_field_errors_and_proxy_pages(tdk_upstream: Upstream) -> None:
    """A 422 names each field for the model; a 502 is a proxy's HTML page, never shown."""
    tdk_upstream.post(URL).answer(tdk_upstream.invalid({"name": "already_exists"}))
    tdk_upstream.get(URL).answer(tdk_upstream.server_error(502))
    invalid = run(KIT.run("store", {"name": "a"}))
    assert invalid.kind == "UPSTREAM_RUNTIME_VALIDATION_ERROR"
    assert "name" in invalid.error.message  # type: ignore[union-attr]
    page = run(KIT.run("fetch"))
    assert page.kind == "UPSTREAM_RUNTIME_SERVER_ERROR"
    assert "<html" not in page.for_model()


@pytest.mark.parametrize(
    ("route", "url", "matched"),
    [
        pytest.param("/repos/{owner}/{name}/issues", "/repos/a/b/issues", True, id="placeholders"),
        pytest.param("/repos/{owner}/{name}/issues", "/repos/a/issues", False, id="too-short"),
        pytest.param("/items?page=2", "/items?page=2", True, id="query-given"),
        pytest.param("/items?page=2", "/items?page=3", False, id="query-differs"),
        pytest.param("/items", "/items?page=3", True, id="any-query"),
    ],
)
def test_routes_match_paths_and_queries(
    tdk_upstream: Upstream, route: str, url: str, matched: bool
) -> None:
    tdk_upstream.base_url = "https://api.example.test"
    answered = tdk_upstream.get(route)
    try:
        httpx.get(f"https://api.example.test{url}")
    except httpx.ConnectError:
        tdk_upstream.unrouted.clear()  # (expected here: the test's own verdict follows)
    assert answered.calls == int(matched)


def test_loopback_requests_reach_the_network(tdk_upstream: Upstream) -> None:
    """A local server of the test's own is not mocked (here: nothing listens, so the
    connection is refused for real)."""
    with pytest.raises(httpx.ConnectError):
        httpx.get("http://127.0.0.1:9/")
    assert tdk_upstream.unrouted == []


def test_mcp_clients_speak_the_era_of_the_fixture(
    tdk_mcp: McpClients, tdk_upstream: Upstream, tdk_clock: FakeClock
) -> None:
    """Each era's client connects to a runner (whose policies apply) and records answers."""
    tdk_upstream.get(URL).answer(tdk_upstream.server_error(503), tdk_upstream.ok({"n": 2}))
    runner = tdk_clock.runner(KIT, retry=RETRY)

    async def scenario() -> tuple[str, Any]:
        async with tdk_mcp.connect(runner) as client:
            answered = await client.call_tool("fetch", {})
            listed = await client.list_tools()
            return client.protocol_version, (answered, [t.name for t in listed.tools])

    version, (answered, names) = run(scenario())
    assert version == tdk_mcp.era
    assert answered.structured_content == {"n": 2}
    assert names == ["fetch", "store"]
    assert tdk_mcp.answers == [answered]
    assert runner.stats().calls == 1
    assert tdk_clock.sleeps == [0.5]


async def _chat(model: ScriptedModel, api: str) -> str:
    async with model.openai([("fetch", {})], "It has n=3.", api=api) as llm:
        if api == "responses":
            items: list[Any] = [{"role": "user", "content": "Read."}]
            while True:
                reply = await llm.responses.create(
                    model="m", input=items, tools=oai.tools(KIT, api="responses")
                )
                items.extend(reply.output)
                calls = oai.calls(reply)
                if not calls:
                    return str(reply.output_text)
                results = [await KIT.run(c.name, c.arguments, call_id=c.call_id) for c in calls]
                items.extend(oai.results(results, api="responses"))
        messages: list[Any] = [{"role": "user", "content": "Read."}]
        while True:
            answer = await llm.chat.completions.create(
                model="m", messages=messages, tools=oai.tools(KIT)
            )
            message = answer.choices[0].message
            messages.append(message)
            calls = oai.calls(message)
            if not calls:
                return str(message.content)
            results = [await KIT.run(c.name, c.arguments, call_id=c.call_id) for c in calls]
            messages.extend(oai.results(results))


async def _anthropic(model: ScriptedModel, api: str) -> str:
    async with model.anthropic([("fetch", {}, "toolu_fixed")], "It has n=3.") as llm:
        messages: list[Any] = [{"role": "user", "content": "Read."}]
        while True:
            reply = await llm.messages.create(
                model="m", max_tokens=100, messages=messages, tools=ant.tools(KIT)
            )
            messages.append({"role": "assistant", "content": reply.content})
            calls = ant.calls(reply)
            if not calls:
                return str(reply.content[0].text)
            results = [await KIT.run(c.name, c.arguments, call_id=c.call_id) for c in calls]
            messages.append({"role": "user", "content": ant.results(results)})


@pytest.mark.parametrize(
    ("loop", "api", "call_id"),
    [
        pytest.param(_chat, "chat", "call_1_1", id="openai-chat"),
        pytest.param(_chat, "responses", "call_1_1", id="openai-responses"),
        pytest.param(_anthropic, "anthropic", "toolu_fixed", id="anthropic"),
    ],
)
def test_the_scripted_model_plays_its_script_and_records_the_results(
    scripted_model: ScriptedModel, tdk_upstream: Upstream, loop: Any, api: str, call_id: str
) -> None:
    """The official client, a loop to the model's answer; what came back is recorded."""
    tdk_upstream.get(URL).answer(tdk_upstream.ok({"n": 3}))
    assert run(loop(scripted_model, api)) == "It has n=3."
    [returned] = scripted_model.results
    assert (returned.call_id, returned.name, returned.json()) == (call_id, "fetch", {"n": 3})
    assert len(scripted_model.requests) == 2


def test_the_scripted_model_refuses_a_call_left_unanswered(
    scripted_model: ScriptedModel,
) -> None:
    """As the real API does: a call of the previous turn without its result is a 400."""

    async def scenario() -> None:
        async with scripted_model.openai([("fetch", {})], "never") as llm:
            await llm.chat.completions.create(model="m", messages=[])
            await llm.chat.completions.create(model="m", messages=[])

    with pytest.raises(openai.BadRequestError, match="tool calls without a result: call_1_1"):
        run(scenario())
