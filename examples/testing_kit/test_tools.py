"""The tests of tools.py, one per failure that matters, with the fixtures of tdk.testing (the
pytest plugin that comes with tdk). docs/testing.md walks through them.

Run: pytest examples/testing_kit
"""

from __future__ import annotations

import asyncio
from typing import Any

from tools import create_issue, search_issues, toolkit

import tdk.testing
from tdk import RetryPolicy
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai

SEARCH = "https://api.github.com/search/issues"
ISSUES = "https://api.github.com/repos/{owner}/{name}/issues"
FOUND = {"items": [{"number": 7, "title": "Crash on start", "html_url": "https://x.test/7"}]}
MADE = {"number": 8, "title": "Docs", "html_url": "https://x.test/8"}
#: Never wait longer than this for one scenario (each takes well under a second).
BOUND = 30


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, BOUND))


# -- upstream failures, the way GitHub answers them ------------------------------------------


def test_a_rate_limit_is_waited_out_without_wall_time(tdk_upstream, tdk_clock, tdk_secrets):
    """GitHub says 429 with its reset 30 s away: the runner waits exactly that (on the fake
    clock: no wall time) and the second attempt succeeds."""
    route = tdk_upstream.get(SEARCH).answer(
        tdk_upstream.rate_limited("github", retry_after=30), tdk_upstream.ok(FOUND)
    )
    runner = tdk_clock.runner(toolkit, retry=RetryPolicy(max_attempts=3, jitter=False))
    context = tdk_secrets.context(toolkit)

    result = run(runner.run("search_issues", {"repository": "acme/app", "query": "crash"},
                            context=context))  # fmt: skip

    assert result.is_success
    assert result.attempts == 2
    assert [issue["number"] for issue in result.value] == [7]
    assert tdk_clock.sleeps == [30.0]  # the server's reset, waited once
    assert route.calls == 2
    sent = route.requests[0].headers["Authorization"]
    assert sent == f"Bearer {tdk_secrets.values['GITHUB_TOKEN']}"  # the canary was used


def test_the_model_is_told_when_to_come_back(tdk_upstream, tdk_secrets):
    """Without a runner, the rate limit goes back to the model with its retry time."""
    tdk_upstream.get(SEARCH).answer(tdk_upstream.rate_limited("github", retry_after=30))
    result = run(tdk_secrets.run(toolkit, "search_issues", {"repository": "a/b", "query": "x"}))
    assert result.kind == "UPSTREAM_RUNTIME_RATE_LIMIT"
    assert result.retry_after_ms == 30_000


def test_a_write_reset_after_sending_is_not_repeated(tdk_upstream, tdk_clock, tdk_secrets):
    """The connection drops after the issue was sent: it may exist now, so the runner does
    not send it again, and the model is told to check first."""
    route = tdk_upstream.post(ISSUES).answer(tdk_upstream.reset(), tdk_upstream.ok(MADE))
    runner = tdk_clock.runner(toolkit, retry=RetryPolicy(max_attempts=3, jitter=False))

    result = run(runner.run("create_issue", {"repository": "acme/app", "title": "Docs"},
                            context=tdk_secrets.context(toolkit)))  # fmt: skip

    assert route.calls == 1
    assert result.attempts == 1
    assert result.kind.startswith("NETWORK_TRANSPORT")
    assert not result.retryable
    assert "may have taken effect" in result.error.additional_prompt_content


def test_a_write_refused_before_sending_is_retried(tdk_upstream, tdk_clock, tdk_secrets):
    """A refused connection never sent anything: retrying the write is safe."""
    route = tdk_upstream.post(ISSUES).answer(tdk_upstream.refused(), tdk_upstream.ok(MADE))
    runner = tdk_clock.runner(toolkit, retry=RetryPolicy(max_attempts=3, jitter=False))
    result = run(runner.run("create_issue", {"repository": "acme/app", "title": "Docs"},
                            context=tdk_secrets.context(toolkit)))  # fmt: skip
    assert (result.is_success, route.calls) == (True, 2)


def test_field_errors_reach_the_model(tdk_upstream, tdk_secrets):
    """A 422 names the field, so the model can fix its arguments."""
    tdk_upstream.post(ISSUES).answer(tdk_upstream.invalid({"title": "missing_field"}))
    result = run(tdk_secrets.run(toolkit, "create_issue", {"repository": "a/b", "title": "T"}))
    assert result.kind == "UPSTREAM_RUNTIME_VALIDATION_ERROR"
    assert "title" in result.error.message


def test_a_server_error_and_a_timeout_are_retryable_reads(tdk_upstream, tdk_clock, tdk_secrets):
    """A 503 and a read timeout on a read-only tool: retried, then the answer."""
    route = tdk_upstream.get(SEARCH).answer(
        tdk_upstream.server_error(503, retry_after=2),
        tdk_upstream.timeout(),
        tdk_upstream.ok(FOUND),
    )
    runner = tdk_clock.runner(toolkit, retry=RetryPolicy(max_attempts=3, initial_delay=0.5,
                                                         jitter=False))  # fmt: skip
    result = run(runner.run("search_issues", {"repository": "a/b", "query": "x"},
                            context=tdk_secrets.context(toolkit)))  # fmt: skip
    assert (result.is_success, route.calls) == (True, 3)
    assert tdk_clock.sleeps == [2.0, 1.0]  # Retry-After, then the backoff


# -- hosts: MCP in both protocol eras, and the model APIs ------------------------------------


def test_over_mcp_the_host_gets_the_wait(tdk_mcp, tdk_upstream, tdk_secrets):
    """Over MCP (run once per protocol era), a rate limit is an error result whose
    ``_meta`` tells the host when to retry; the canary token is nowhere in the answer."""
    tdk_upstream.get(SEARCH).answer(tdk_upstream.rate_limited("github", retry_after=30))

    async def scenario():
        async with tdk_mcp.connect(toolkit, context=tdk_secrets.context(toolkit)) as client:
            assert client.protocol_version == tdk_mcp.era
            return await client.call_tool(
                "search_issues", {"repository": "acme/app", "query": "crash"}
            )

    answered = run(scenario())
    assert answered.is_error
    assert answered.meta["tdk/error"]["retry_after_ms"] == 30_000


def test_an_openai_agent_loop(scripted_model, tdk_upstream, tdk_secrets):
    """The official OpenAI client, against a fake API that asks for one search then answers:
    the model gets the issues back."""
    tdk_upstream.get(SEARCH).answer(tdk_upstream.ok(FOUND))
    context = tdk_secrets.context(toolkit)

    async def loop():
        script = [("search_issues", {"repository": "acme/app", "query": "crash"})], "One bug."
        async with scripted_model.openai(*script) as llm:
            messages: list[Any] = [{"role": "user", "content": "Any crash bugs in acme/app?"}]
            while True:
                reply = await llm.chat.completions.create(
                    model="any", messages=messages, tools=oai.tools(toolkit, strict=True)
                )
                message = reply.choices[0].message
                messages.append(message)
                if not message.tool_calls:
                    return message.content
                calls = oai.calls(message)
                results = [await toolkit.run(c.name, c.arguments, call_id=c.call_id,
                                             context=context) for c in calls]  # fmt: skip
                messages.extend(oai.results(results))

    assert run(loop()) == "One bug."
    [returned] = scripted_model.results
    assert (returned.name, returned.json()[0]["number"]) == ("search_issues", 7)


def test_an_anthropic_agent_loop(scripted_model, tdk_upstream, tdk_secrets):
    """The official Anthropic client: a failed write comes back as an error block."""
    tdk_upstream.post(ISSUES).answer(tdk_upstream.server_error(502))
    context = tdk_secrets.context(toolkit)

    async def loop():
        script = [("create_issue", {"repository": "acme/app", "title": "Docs"})], "Sorry."
        async with scripted_model.anthropic(*script) as llm:
            messages: list[Any] = [{"role": "user", "content": "File a docs issue."}]
            while True:
                reply = await llm.messages.create(
                    model="any", max_tokens=512, messages=messages, tools=ant.tools(toolkit)
                )
                messages.append({"role": "assistant", "content": reply.content})
                calls = ant.calls(reply)
                if not calls:
                    return reply.content[0].text
                results = [await toolkit.run(c.name, c.arguments, call_id=c.call_id,
                                             context=context) for c in calls]  # fmt: skip
                messages.append({"role": "user", "content": ant.results(results)})

    assert run(loop()) == "Sorry."
    [returned] = scripted_model.results
    assert returned.is_error
    assert returned.json()["kind"] == "UPSTREAM_RUNTIME_SERVER_ERROR"


# -- the contract, and hostile arguments -----------------------------------------------------


def test_the_contract_has_no_breaking_change(tdk_snapshot):
    """The definitions models and hosts see, against snapshots/github.json."""
    checked = tdk_snapshot(toolkit, formats=["json", "mcp", "openai-strict"])
    assert not checked.breaking


def test_hostile_arguments_give_known_results(tdk_upstream, tdk_secrets):
    """Whatever the model sends, every outcome is a known kind with no secret in it."""
    tdk_upstream.get(SEARCH).answer(tdk_upstream.ok(FOUND))
    tdk_upstream.post(ISSUES).answer(tdk_upstream.ok(MADE))
    report = tdk.testing.fuzz(toolkit, max_examples=60)
    assert report.examples == 60
    assert report.kinds["TOOL_RUNTIME_BAD_INPUT_VALUE"] > 0


def test_direct_calls_still_work(tdk_upstream, tdk_secrets):
    """The decorated functions stay plain async functions for Python callers."""
    tdk_upstream.post(ISSUES).answer(tdk_upstream.ok(MADE))
    made = run(create_issue(tdk_secrets.context(toolkit), "acme/app", "Docs"))
    assert made.number == 8
    assert search_issues.definition.annotations.read_only
