"""A write is never repeated by surprise: whether a failed attempt of a tool that may write
can be repeated, and what its result tells the model when it cannot.

A tool that is neither read-only nor idempotent is retried only where the upstream certainly
did not act: its error says so (a rate limit; a connection that failed before its request
left), and no other request of the attempt may have reached an upstream (what tdk's HTTP
hooks noted during the attempt, see :mod:`tdk._exchanges`). Otherwise its result is returned
as it is, not retryable for the model either (it would send the duplicate itself), with
guidance to check first.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

from tdk._exchanges import CURRENT, Exchanges
from tdk._result import ToolResult
from tdk.errors import ErrorCategory, ErrorInfo

__all__ = ["MAY_HAVE_ACTED", "not_repeated", "upstream_did_not_act", "watched"]

#: The guidance of a failed write the runner did not repeat.
MAY_HAVE_ACTED: Final = (
    "The action may have taken effect before this failure. Check whether it did (look up "
    "what it would have created or changed) before trying again: repeating it blindly may "
    "do it twice."
)

_RATE_LIMIT: Final = ErrorCategory.RATE_LIMIT


def upstream_did_not_act(error: ErrorInfo, exchanges: Exchanges | None) -> bool:
    """Whether ``error`` says for certain that the upstream did nothing (a rate limit: the
    call was refused; a connection that failed before its request was sent), while no other
    request of the attempt (``exchanges``) may have reached an upstream: one answered, one
    whose answer never came (a timeout, a reset connection), one still in flight."""
    if exchanges is not None and exchanges.reached > 0:
        return False
    return error.category is _RATE_LIMIT or error.details.get("request_sent") is False


async def watched(attempt: Awaitable[ToolResult], exchanges: Exchanges) -> ToolResult:
    """Run ``attempt`` noting what its requests may do in ``exchanges``, then count them for
    the call around it, if any: a tool that calls another through a runner acted when the
    inner one did."""
    token = CURRENT.set(exchanges)
    try:
        return await attempt
    finally:
        CURRENT.reset(token)
        outer = CURRENT.get()
        if outer is not None:
            outer.add(exchanges)


def not_repeated(error: ErrorInfo) -> dict[str, object]:
    """The changes to ``error`` of a write the runner did not repeat: not retryable, and
    guidance saying it may have happened (before the tool's own guidance, if any)."""
    guidance = error.additional_prompt_content
    return {
        "retryable": False,
        "max_retry_attempts": 0,
        "additional_prompt_content": (
            MAY_HAVE_ACTED if not guidance else f"{MAY_HAVE_ACTED} {guidance}"
        ),
    }
