"""Install tdk's upstream hook on an httpx client and print a classified error.

The "upstream" is an ``httpx.MockTransport`` playing GitHub: a 403 that is really a rate limit
(``x-ratelimit-remaining: 0``), whose body echoes the API key it was sent. The hook turns it
into an ``UpstreamRateLimitError`` that keeps ``status_code`` 403, waits until the reset, and
never repeats the key.

Run: python examples/http_hook.py
"""

from __future__ import annotations

import json

import httpx

import tdk.http
from tdk.errors import UpstreamError

API_KEY = "sk-live-0123456789abcdefghij"


def github(request: httpx.Request) -> httpx.Response:
    """A stand-in for GitHub's primary rate limit."""
    headers = {
        "Date": "Tue, 14 Nov 2023 22:13:20 GMT",
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": "1700000030",  # 30 s after Date
        "x-github-request-id": "CAFE:1234:5678",
    }
    body = {"message": f"API rate limit exceeded for key {request.headers['x-api-key']}."}
    return httpx.Response(403, headers=headers, json=body)


def main() -> None:
    client = tdk.http.install(
        httpx.Client(transport=httpx.MockTransport(github), headers={"X-Api-Key": API_KEY})
    )
    with client:
        try:
            client.get("https://api.github.com/repos/python/cpython/issues?state=open&page=2")
        except UpstreamError as error:
            print(json.dumps(error.to_dict(), indent=2))


if __name__ == "__main__":
    main()
