"""An agent loop on the official Anthropic SDK, offline: the API is a scripted fake.

The model asks for two tools in one turn: an order lookup that answers, and a shipment
tracker whose carrier API is rate limited (429 with ``Retry-After: 20``). A ``ToolRunner``
with a short deadline hands the model the failure instead of waiting: ``is_error`` set, and a
JSON text with the kind and ``retry_after_ms``. The model answers with what it has.

Everything is offline: the Anthropic client talks to ``fake_anthropic`` through an
``httpx2.MockTransport``, and the carrier API is an ``httpx.MockTransport``. The fake refuses a
turn in which a ``tool_use`` block has no ``tool_result``, as the real API does.

Run: python examples/anthropic_loop.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import httpx
import httpx2
from anthropic import AsyncAnthropic

import tdk.http
from tdk import Toolkit, ToolRunner, tool
from tdk.hosts import anthropic as ant

# -- The tools ------------------------------------------------------------------------------

ORDERS = {"A-1001": {"order": "A-1001", "status": "shipped", "carrier_ref": "ZX81"}}


def carrier(request: httpx.Request) -> httpx.Response:
    """A carrier API over its quota."""
    return httpx.Response(429, headers={"Retry-After": "20"}, text="slow down")


tracking = httpx.AsyncClient(
    base_url="https://carrier.example.test", transport=httpx.MockTransport(carrier)
)
tdk.http.install(tracking)


@tool(read_only=True)
def get_order(order_id: Annotated[str, "The order number, like 'A-1001'."]) -> dict[str, str]:
    """An order's status and its carrier reference."""
    return ORDERS[order_id]


@tool(read_only=True)
async def track_shipment(carrier_ref: Annotated[str, "The carrier's reference."]) -> str:
    """Where a shipment is now, as the carrier reports it."""
    return (await tracking.get(f"/track/{carrier_ref}")).text


toolkit = Toolkit("orders", [get_order, track_shipment])
runner = ToolRunner(toolkit, deadline=5.0)

# -- The fake of the Messages API -----------------------------------------------------------


def message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 40},
    }


def fake_anthropic(request: httpx2.Request) -> httpx2.Response:
    """Turn 1: two tool_use blocks. Turn 2: answer from the tool_result blocks."""
    body = json.loads(request.content)
    assert {tool["name"] for tool in body["tools"]} == {"get_order", "track_shipment"}
    turns = body["messages"]
    if len(turns) == 1:
        uses = [
            {"type": "text", "text": "Let me look that up."},
            {
                "type": "tool_use",
                "id": "toolu_order",
                "name": "get_order",
                "input": {"order_id": "A-1001"},
            },
            {
                "type": "tool_use",
                "id": "toolu_track",
                "name": "track_shipment",
                "input": {"carrier_ref": "ZX81"},
            },
        ]
        return httpx2.Response(200, json=message(uses, "tool_use"))
    asked = {block["id"] for block in turns[-2]["content"] if block["type"] == "tool_use"}
    answers = {block["tool_use_id"]: block for block in turns[-1]["content"]}
    if asked - answers.keys():  # what the real API says
        error = {
            "type": "invalid_request_error",
            "message": "tool_use ids were found without tool_result blocks immediately after",
        }
        return httpx2.Response(400, json={"type": "error", "error": error})
    order = json.loads(answers["toolu_order"]["content"])
    track = answers["toolu_track"]
    failure = json.loads(track["content"]) if track["is_error"] else {}
    text = (
        f"Order {order['order']} is {order['status']}. The carrier's tracking is busy "
        f"({failure.get('kind')}); ask me again in {failure.get('retry_after_ms', 0) // 1000} s."
    )
    return httpx2.Response(200, json=message([{"type": "text", "text": text}], "end_turn"))


# -- The loop -------------------------------------------------------------------------------


async def main() -> None:
    client = AsyncAnthropic(
        api_key="sk-ant-offline-example",
        base_url="https://api.anthropic.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(fake_anthropic)),
    )
    messages: list[Any] = [{"role": "user", "content": "Where is my order A-1001?"}]
    while True:
        reply = await client.messages.create(
            model="claude-fake", max_tokens=1024, messages=messages, tools=ant.tools(toolkit)
        )
        messages.append({"role": "assistant", "content": reply.content})
        calls = ant.calls(reply)
        if not calls:
            print("model:", " ".join(b.text for b in reply.content if b.type == "text"))
            break
        results = await runner.run_many(calls)
        for result in results:
            print(f"tool {result.tool} ({result.call_id}): {result.for_model()}")
        messages.append({"role": "user", "content": ant.results(results)})
    await client.close()
    await tracking.aclose()


if __name__ == "__main__":
    asyncio.run(main())
