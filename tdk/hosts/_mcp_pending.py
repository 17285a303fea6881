"""The requests of a stdio client that were handed to the server and not answered yet.

When the client closes stdin, the SDK's server cancels what it runs and answers each request
in flight with a "Connection closed" error. A request it had read but not started handling
yet (the last lines of a client that writes its requests and closes stdin at once, as
``tdk serve < requests.jsonl`` does) is cancelled before its handler runs: it was never
answered at all, and a client that still reads stdout waited for ever. tdk's stdio
transport keeps count of what it handed over and what was answered, and answers what is
left, once the server has ended, with the same error the SDK gives the others.
"""

from __future__ import annotations

import collections
from typing import Any

from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

__all__ = ["Pending"]

#: A request id as JSON tells it apart: 1 and "1" are two ids.
_Key = tuple[type, Any]


class Pending:
    """Request ids read from the client and not answered (nor cancelled by it) yet; an id the
    client reused counts once per request."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: collections.Counter[_Key] = collections.Counter()

    def read(self, message: Any) -> None:
        """``message`` was handed to the server: a request waits for its answer; the client's
        cancellation of a request means that none is due (the SDK sends none)."""
        if isinstance(message, JSONRPCRequest):
            self._ids[_key(message.id)] += 1
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            params = message.params or {}
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if type(request_id) in (int, str):
                self._done(_key(request_id))

    def written(self, message: Any) -> None:
        """``message`` reached the client: the answer of its request, when it is one."""
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._done(_key(message.id))

    def closing_answers(self) -> list[JSONRPCError]:
        """The answers still due (the SDK's "Connection closed" error for each), forgotten
        once given."""
        answers = [
            JSONRPCError(
                jsonrpc="2.0",
                id=value,
                error=ErrorData(code=CONNECTION_CLOSED, message="Connection closed"),
            )
            for (_, value), count in self._ids.items()
            for _ in range(count)
        ]
        self._ids.clear()
        return answers

    def _done(self, key: _Key) -> None:
        if self._ids[key] > 1:
            self._ids[key] -= 1
        else:
            self._ids.pop(key, None)


def _key(request_id: Any) -> _Key:
    return (type(request_id), request_id)
