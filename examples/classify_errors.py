"""The main job: run tools that fail in every common way, and print what a planner receives.

Each call returns a ToolResult; each failure is one structured error with kind, category,
retryable, retry_after_ms and status_code, a model-safe message and a developer message, with
secrets redacted. No network: the "upstream" is an httpx MockTransport.

Run: python examples/classify_errors.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import httpx

from tdk import ToolContext, Toolkit, tool
from tdk.errors import ContextRequiredToolError, RetryableToolError


def mock_upstream(request: httpx.Request) -> httpx.Response:
    """A stand-in for a real API that is rate limiting us, and says for how long."""
    return httpx.Response(429, headers={"Retry-After": "30"}, json={"message": "slow down"})


@tool
def get_posts(subreddit: Annotated[str, "The subreddit's name, without r/."]) -> list[str]:
    """List a subreddit's newest post titles."""
    if subreddit == "pythn":
        raise RetryableToolError(
            "No subreddit named r/pythn.", additional_prompt_content="Retry with subreddit=python"
        )
    if subreddit == "mine":
        raise ContextRequiredToolError(
            "Several accounts can read this subreddit.",
            additional_prompt_content="Ask the user which account to use.",
        )
    posts: dict[str, list[str]] = {"python": ["PEP 9999 accepted"]}
    return posts[subreddit]  # a KeyError for anything else: a bug in the tool


@tool(requires_secrets=["API_KEY"])
async def search_api(
    query: Annotated[str, "What to search for."], context: ToolContext
) -> dict[str, Any]:
    """Search an upstream API that rate limits."""
    key = context.get_secret("API_KEY")
    transport = httpx.MockTransport(mock_upstream)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(
            "https://api.example.com/search", params={"q": query, "api_key": key}
        )
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data


@tool(timeout=0.05)
async def slow_report(
    days: Annotated[int, "How many days to cover."],
) -> str:
    """Build a report (too slowly)."""
    await asyncio.sleep(days)
    return "report"


CALLS: list[tuple[str, str, Any]] = [
    ("success", "get_posts", {"subreddit": "python"}),
    ("the model should retry with other arguments", "get_posts", {"subreddit": "pythn"}),
    ("the model should ask the user", "get_posts", {"subreddit": "mine"}),
    ("a bug in the tool", "get_posts", {"subreddit": "rust"}),
    ("bad arguments from the model", "get_posts", '{"subreddit": 42, "sort": "new"}'),
    ("an upstream rate limit", "search_api", {"query": "tdk"}),
    ("the tool's time limit", "slow_report", {"days": 1}),
    ("an unknown tool", "get_post", {}),
]


async def main() -> None:
    toolkit = Toolkit("demo", tools=[get_posts, search_api, slow_report])
    context = ToolContext(secrets={"API_KEY": "sk-demo-do-not-leak-0123456789"})
    for label, name, arguments in CALLS:
        result = await toolkit.run(name, arguments, context=context, call_id=label)
        print(f"# {label}")
        print(json.dumps(result.to_dict(), indent=2))


if __name__ == "__main__":
    asyncio.run(main())
