"""A small GitHub toolkit: the example that ``test_tools.py`` tests with every fixture of
``tdk.testing`` (see docs/testing.md).

Two tools on the GitHub REST API: ``search_issues`` (a read) and ``create_issue`` (a write:
neither read-only nor idempotent, so a failure after the request left must not be repeated).
Each call opens its own ``httpx.AsyncClient`` with tdk's hook installed: a client made at
import time would be bound to the first event loop that used it, and fail in the next
``asyncio.run`` (or the next test).

Run the tests: pytest examples/testing_kit
"""

from __future__ import annotations

from typing import Annotated

import httpx
from pydantic import BaseModel, Field

import tdk.http
from tdk import ToolContext, Toolkit, tool

API = "https://api.github.com"

#: ``owner/name``, as GitHub spells a repository.
Repository = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$", description="owner/name")
]


class Issue(BaseModel):
    """An issue, as the tools return it."""

    number: int
    title: str
    url: str


def _client(context: ToolContext) -> httpx.AsyncClient:
    """A client for one call: the token from the context, tdk's hook installed (4xx and 5xx
    become Upstream* errors with their retry time)."""
    headers = {
        "Authorization": f"Bearer {context.get_secret('GITHUB_TOKEN')}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }
    return tdk.http.install(httpx.AsyncClient(base_url=API, headers=headers, timeout=10.0))


@tool(requires_secrets=["GITHUB_TOKEN"], read_only=True)
async def search_issues(
    context: ToolContext,
    repository: Repository,
    query: Annotated[str, Field(max_length=256, description="Words to look for.")],
    limit: Annotated[int, Field(ge=1, le=50, description="How many issues, at most.")] = 10,
) -> list[Issue]:
    """Search the open issues of a repository."""
    async with _client(context) as client:
        found = await client.get(
            "/search/issues",
            params={"q": f"repo:{repository} is:issue is:open {query}", "per_page": limit},
        )
    return [
        Issue(number=item["number"], title=item["title"], url=item["html_url"])
        for item in found.json()["items"]
    ]


@tool(requires_secrets=["GITHUB_TOKEN"])
async def create_issue(
    context: ToolContext,
    repository: Repository,
    title: Annotated[str, Field(min_length=1, max_length=256, description="The title.")],
    body: Annotated[str, Field(max_length=65_536, description="The text, in Markdown.")] = "",
) -> Issue:
    """Open an issue in a repository."""
    async with _client(context) as client:
        made = await client.post(f"/repos/{repository}/issues", json={"title": title, "body": body})
    item = made.json()
    return Issue(number=item["number"], title=item["title"], url=item["html_url"])


toolkit = Toolkit("github", [search_issues, create_issue], description="GitHub issues.")
