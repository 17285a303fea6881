"""Helpers shared by the host adapter tests: a realistic toolkit that counts what ran, tools
that plant a secret everywhere, and the check of a shape against an SDK's own TypedDict."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from tdk import ToolCall, ToolContext, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import RetryableToolError, UpstreamRateLimitError

#: A secret with no recognisable shape: only the context's exact values can scrub it.
SECRET = "plum-tangerine-8c41f7e2b9d3"
#: Planted where a failure should never show the model anything.
DEVELOPER_NOTE = "developer-only note 5521"
DETAIL_VALUE = "detail-only value 7736"


def assert_valid(param_type: Any, shape: object) -> None:
    """``shape`` validates against the SDK's TypedDict ``param_type`` unchanged: a TypedDict
    adapter drops unknown keys, so equality proves there are none (and every required key is
    there, else it raises)."""
    assert TypeAdapter(param_type).validate_python(shape) == shape


class Priority(enum.StrEnum):
    """How urgent a ticket is."""

    LOW = "low"
    HIGH = "high"


class Repo(BaseModel):
    """A repository."""

    owner: str = Field(description="The owner's login.")
    name: str = Field(description="The repository's name.")


class Person(BaseModel):
    """Someone on the team."""

    login: str = Field(description="Their login.")
    team: str = Field("core", description="Their team.")


class Issue(BaseModel):
    """An issue found by a search."""

    number: int
    title: str


class Tracker:
    """An issue tracker's tools; ``ran`` lists the name of each tool whose body ran and
    ``seen`` the arguments each body got, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.seen: list[dict[str, Any]] = []

        @tool(read_only=True)
        def search_issues(
            repo: Annotated[Repo, "Where to search."],
            query: Annotated[str, "What to look for."],
            state: Annotated[Literal["open", "closed"], "Which issues."] = "open",
            labels: Annotated[list[str] | None, "Labels the issues must all have."] = None,
            limit: Annotated[int, "How many issues, at most."] = 10,
        ) -> list[Issue]:
            """Search the issues of a repository."""
            self.ran.append("search_issues")
            self.seen.append(
                {"repo": repo, "query": query, "state": state, "labels": labels, "limit": limit}
            )
            return [Issue(number=n, title=f"{query} #{n}") for n in range(1, min(limit, 2) + 1)]

        @tool
        def create_ticket(
            title: Annotated[str, "A one-line summary."],
            priority: Annotated[Priority, "How urgent it is."],
            assignee: Annotated[Person | None, "Who works on it."] = None,
            watchers: Annotated[list[Person], "Who is told of changes."] = [],  # noqa: B006
        ) -> dict[str, Any]:
            """Open a ticket."""
            self.ran.append("create_ticket")
            self.seen.append({"title": title, "priority": priority, "assignee": assignee})
            return {
                "id": 42,
                "priority": priority.value,
                "assignee": None if assignee is None else assignee.login,
                "watchers": [person.login for person in watchers],
            }

        @tool(deprecated="Use search_issues instead.")
        def find_issues(query: Annotated[str, "What to look for."]) -> list[str]:
            """Find issues by text."""
            self.ran.append("find_issues")
            return [query]

        @tool
        def server_time() -> str:
            """The tracker's clock, as text."""
            self.ran.append("server_time")
            return "2026-12-01T12:00:00Z"

        @tool
        def fetch_page(url: Annotated[str, "The page's address."]) -> str:
            """Fetch a page of the tracker's wiki."""
            self.ran.append("fetch_page")
            raise RetryableToolError(
                "The wiki is busy.",
                retry_after_ms=1500,
                additional_prompt_content="Ask for a smaller page, or wait.",
                developer_message=DEVELOPER_NOTE,
                details={"backend": DETAIL_VALUE},
            )

        self.toolkit = Toolkit(
            "tracker", [search_issues, create_ticket, find_issues, server_time, fetch_page]
        )

    def run(
        self, calls: Iterable[ToolCall], context: ToolContext | None = None
    ) -> list[ToolResult]:
        """The results of ``calls`` run by a :class:`~tdk.ToolRunner` over the toolkit."""
        return asyncio.run(ToolRunner(self.toolkit).run_many(calls, context=context))


def leaky_results() -> list[ToolResult]:
    """Results of tools that plant ``SECRET`` (from their context) in every field of the
    error they raise and in its cause: a ``RetryableToolError``, an ``UpstreamRateLimitError``
    and a plain ``ValueError``, run with stack traces included."""

    def raising(kind: str) -> Any:
        @tool(name=f"leak_{kind}", requires_secrets=["API_KEY"])
        def leak(context: ToolContext) -> str:
            """Fail with the secret everywhere."""
            secret = context.get_secret("API_KEY")
            cause = RuntimeError(f"the upstream said {secret}")
            if kind == "plain":
                raise ValueError(f"bad key {secret}") from cause
            options: dict[str, Any] = {
                "developer_message": f"{DEVELOPER_NOTE} {secret}",
                "additional_prompt_content": f"retry without {secret}",
                "details": {
                    "planted_key": secret,
                    "planted_nested": [{"planted_inner": f"x{secret}x"}],
                    DETAIL_VALUE: 1,
                },
                "retry_after_ms": 2500,
            }
            if kind == "retryable":
                raise RetryableToolError(f"the key {secret} is cooling down", **options) from cause
            raise UpstreamRateLimitError(
                f"over quota for {secret}", status_code=429, **options
            ) from cause

        return leak

    toolkit = Toolkit(
        "leaky",
        [raising("retryable"), raising("upstream"), raising("plain")],
        include_stacktrace=True,
    )
    calls = [ToolCall(name=item.name, call_id=f"call_{item.name}") for item in toolkit]
    context = ToolContext(secrets={"API_KEY": SECRET})
    return asyncio.run(ToolRunner(toolkit).run_many(calls, context=context))


class LyingClass:
    """An object whose ``__class__`` raises: ``isinstance`` itself fails on it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no class")
