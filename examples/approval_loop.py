"""An agent loop that asks the user before a tool acts, on the official OpenAI SDK, offline.

The model calls ``transfer``, a tool declared ``requires_approval=True``. The runner does not
run it: the result is pending (``TOOL_RUNTIME_INPUT_REQUIRED``), and ``result.pending`` holds
the confirmation to show (the tool and its arguments) and a sealed, single-use token. The
application shows it to the user, and resumes the call with the answer
(``runner.resume(token, {"approval": True}, context=...)``): the body runs once, approved.
The model then gets the tool's answer as any other result.

The Chat Completions API is a scripted fake behind an ``httpx2.MockTransport`` (the
transport of the SDK's own HTTP client); the user is a function that says yes.

Run: python examples/approval_loop.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import httpx2
from openai import AsyncOpenAI

from tdk import ToolContext, Toolkit, ToolResult, ToolRunner, tool
from tdk.hosts import openai as oai

# -- The tool -------------------------------------------------------------------------------

SENT: list[str] = []


@tool(requires_approval=True)
def transfer(
    amount: Annotated[int, "How much, in cents."], to: Annotated[str, "The payee's account."]
) -> str:
    """Send money to an account."""
    SENT.append(f"{amount} to {to}")
    return f"sent {amount} cents to {to}"


toolkit = Toolkit("bank", [transfer])
runner = ToolRunner(toolkit, state_key="example key: use 32 random bytes in production")
me = ToolContext(user_id="alice")

# -- The fake of the Chat Completions API ---------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": "gpt-fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def fake_openai(request: httpx2.Request) -> httpx2.Response:
    """Turn 1: call ``transfer``. Turn 2: say what the tool answered."""
    messages = json.loads(request.content)["messages"]
    if messages[-1]["role"] == "user":
        call = {
            "id": "call_pay",
            "type": "function",
            "function": {"name": "transfer", "arguments": '{"amount": 1250, "to": "DE-42"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return httpx2.Response(200, json=completion(message, "tool_calls"))
    answer = messages[-1]["content"]
    message = {"role": "assistant", "content": f"Done: {answer}."}
    return httpx2.Response(200, json=completion(message, "stop"))


# -- The application ------------------------------------------------------------------------


def user_answers(requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Show each request to the user and collect the answers (this user says yes)."""
    answers: dict[str, Any] = {}
    for key, request in requests.items():
        print(f"ask the user [{key}]: {request['message']}")
        answers[key] = True
    return answers


async def settled(result: ToolResult) -> ToolResult:
    """The result to give the model: a pending call is shown to the user and resumed."""
    while result.pending is not None and result.pending.token is not None:
        answers = user_answers(result.pending.requests)
        result = await runner.resume(result.pending.token, answers, context=me)
    return result


async def main() -> None:
    client = AsyncOpenAI(
        api_key="sk-offline-example",
        base_url="https://api.openai.test/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(fake_openai)),
    )
    messages: list[Any] = [{"role": "user", "content": "Pay 12.50 EUR to DE-42."}]
    while True:
        answer = await client.chat.completions.create(
            model="gpt-fake", messages=messages, tools=oai.tools(toolkit)
        )
        message = answer.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        calls = oai.calls(message)
        if not calls:
            print("model:", message.content)
            break
        results = [await settled(r) for r in await runner.run_many(calls, context=me)]
        for result in results:
            print(f"tool {result.tool}: {result.for_model()}")
        messages.extend(oai.results(results))
    await client.close()
    assert SENT == ["1250 to DE-42"], SENT


if __name__ == "__main__":
    asyncio.run(main())
