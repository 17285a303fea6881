"""An agent loop on the official OpenAI SDK, offline: the API is a scripted fake.

The model asks for two tools at once. One answers; the other's upstream is rate limited
(429, ``Retry-After: 30``). The loop runs both through a ``ToolRunner``, whose deadline is
shorter than the wait, so instead of sleeping it hands the model the error, kind and
``retry_after_ms`` included. The model answers with what it has and says when to try again.

Everything is offline: the OpenAI client talks to ``fake_openai`` through an
``httpx2.MockTransport`` (the transport of the SDK's own HTTP client), and the tools' upstream
is an ``httpx.MockTransport``. The fake answers like the API, and refuses a conversation in
which a tool call has no answer, as the real one does.

Run: python examples/openai_loop.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import httpx
import httpx2
from openai import AsyncOpenAI

import tdk.http
from tdk import Toolkit, ToolRunner, tool
from tdk.hosts import openai as oai

# -- The tools, and the upstream they call -------------------------------------------------


def upstream(request: httpx.Request) -> httpx.Response:
    """A weather API that answers, and a news API over its quota."""
    if request.url.path == "/forecast":
        return httpx.Response(200, json={"city": request.url.params["city"], "max_c": 4})
    return httpx.Response(
        429, headers={"Retry-After": "30"}, json={"error": {"message": "Too many requests"}}
    )


api = httpx.AsyncClient(
    base_url="https://api.example.test", transport=httpx.MockTransport(upstream)
)
tdk.http.install(api)  # 4xx/5xx become Upstream* errors, with retry_after_ms from the headers


@tool(read_only=True)
async def forecast(city: Annotated[str, "The city, e.g. 'Oslo'."]) -> dict[str, Any]:
    """Tomorrow's maximum temperature in a city, in degrees Celsius."""
    return (await api.get("/forecast", params={"city": city})).json()


@tool(read_only=True)
async def headlines(
    topic: Annotated[str, "What the news should be about."],
    limit: Annotated[int, "How many headlines, at most."] = 3,
) -> list[str]:
    """The latest headlines on a topic."""
    found = await api.get("/news", params={"q": topic, "limit": limit})
    return [item["title"] for item in found.json()["items"]]


toolkit = Toolkit("briefing", [forecast, headlines])
runner = ToolRunner(toolkit, deadline=5.0)  # never wait 30 s inside one call: tell the model


# -- The fake of the Chat Completions API --------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": "gpt-fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def fake_openai(request: httpx2.Request) -> httpx2.Response:
    """Turn 1: call both tools in parallel (``limit`` left out: strict mode sends null).
    Turn 2: answer from the tool results, once every call has one."""
    body = json.loads(request.content)
    assert all(tool["function"]["strict"] for tool in body["tools"])
    messages = body["messages"]
    if messages[-1]["role"] == "user":
        calls = [
            ("call_forecast", "forecast", {"city": "Oslo"}),
            ("call_news", "headlines", {"topic": "energy", "limit": None}),
        ]
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": id_,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for id_, name, args in calls
            ],
        }
        return httpx2.Response(200, json=completion(message, "tool_calls"))
    asked = {call["id"] for m in messages if m.get("tool_calls") for call in m["tool_calls"]}
    answers = {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
    if asked - answers.keys():  # what the real API says
        error = {
            "message": "An assistant message with 'tool_calls' must be followed by tool "
            "messages responding to each 'tool_call_id'.",
            "type": "invalid_request_error",
        }
        return httpx2.Response(400, json={"error": error})
    weather, news = answers["call_forecast"], answers["call_news"]
    wait_s = news["retry_after_ms"] // 1000
    text = (
        f"Tomorrow in {weather['city']}: up to {weather['max_c']} °C. The news service is "
        f"over its quota ({news['kind']}); I can fetch the headlines in {wait_s} s."
    )
    return httpx2.Response(200, json=completion({"role": "assistant", "content": text}, "stop"))


# -- The loop -------------------------------------------------------------------------------


async def main() -> None:
    client = AsyncOpenAI(
        api_key="sk-offline-example",
        base_url="https://api.openai.test/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(fake_openai)),
    )
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Oslo tomorrow, and the energy headlines?"}
    ]
    tools = oai.tools(toolkit, strict=True)
    while True:
        answer = await client.chat.completions.create(
            model="gpt-fake", messages=messages, tools=tools
        )
        message = answer.choices[0].message
        messages.append(message)
        calls = oai.calls(message)
        if not calls:
            print(f"model: {message.content}")
            break
        results = await runner.run_many(calls)
        for result in results:
            print(f"tool {result.tool} ({result.call_id}): {result.for_model()}")
        messages.extend(oai.results(results))
    await client.close()
    await api.aclose()


if __name__ == "__main__":
    asyncio.run(main())
