"""Classify the ways a tool can fail, and print what a planner would receive.

Run: python examples/classify_errors.py
"""

from __future__ import annotations

import json

import httpx

from tdk.errors import ContextRequiredToolError, ErrorInfo, RetryableToolError


def mock_upstream(request: httpx.Request) -> httpx.Response:
    """A stand-in for a real API: rate limited, with a hint when to come back."""
    return httpx.Response(429, headers={"Retry-After": "30"}, json={"message": "slow down"})


def failing_tools() -> dict[str, BaseException]:
    """One exception per way a tool body can fail."""
    failures: dict[str, BaseException] = {
        "retry-with-other-arguments": RetryableToolError(
            "No subreddit named r/pythn.", additional_prompt_content="Retry with subreddit=python"
        ),
        "ask-the-user": ContextRequiredToolError(
            "Several accounts match.", additional_prompt_content="Ask which account to use."
        ),
        "bug-in-the-tool": KeyError("user_id"),
        "timeout": TimeoutError(),
    }
    with httpx.Client(transport=httpx.MockTransport(mock_upstream)) as client:
        response = client.get("https://api.example.com/posts?api_key=sk-do-not-leak-123456")
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            failures["upstream-rate-limit"] = exc
    return failures


def main() -> None:
    for label, exc in failing_tools().items():
        info = ErrorInfo.from_exception(exc, tool_name="get_posts")
        print(f"# {label}")
        print(json.dumps(info.to_dict(), indent=2))


if __name__ == "__main__":
    main()
