"""A write is never repeated by surprise: whether a failure of a tool that may write says
for certain that nothing happened, and what its result tells the model when it does not.

A tool that is neither read-only nor idempotent may have acted before it failed, unless its
error says the upstream certainly did not (a rate limit; a connection that failed before its
request left) and no other request of the attempt may have reached an upstream (what tdk's
HTTP hooks noted while it ran, see :mod:`tdk._execution.exchanges`). A failure that may have acted
is not repeated by a runner, and is not offered to the model as retryable either (it would send
the duplicate itself): its result says ``retryable: false`` and tells the model to check
first. The rule is the same wherever a call runs: ``tool.run()``, ``toolkit.run()``,
``run_sync()``, ``tdk run``, a host's loop, a runner's attempt.
"""

from __future__ import annotations

from typing import Final

from tdk._execution.exchanges import Exchanges
from tdk.errors import ErrorCategory, ErrorInfo, ErrorKind

__all__ = ["MAY_HAVE_ACTED", "may_have_acted", "not_repeated", "upstream_did_not_act"]

#: The guidance of a failed write that may have taken effect.
MAY_HAVE_ACTED: Final = (
    "The action may have taken effect before this failure. Check whether it did (look up "
    "what it would have created or changed) before trying again: repeating it blindly may "
    "do it twice."
)

_RATE_LIMIT: Final = ErrorCategory.RATE_LIMIT

#: Retryable kinds a failed write keeps as they are: the tool itself asks the model to try
#: again with other arguments, or a runner refused the call before anything ran.
_KEPT: Final = frozenset(
    {
        ErrorKind.TOOL_RUNTIME_RETRY,
        ErrorKind.TOOL_RUNTIME_RATE_LIMITED,
        ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN,
        ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL,
    }
)


def upstream_did_not_act(error: ErrorInfo, exchanges: Exchanges | None) -> bool:
    """Whether ``error`` says for certain that the upstream did nothing (a rate limit: the
    call was refused; a connection that failed before its request was sent), while no other
    request of the attempt (``exchanges``; None when none could be noted) may have reached an
    upstream: one answered, one whose answer never came (a timeout, a reset connection), one
    still in flight."""
    if exchanges is not None and exchanges.reached > 0:
        return False
    return error.category is _RATE_LIMIT or error.details.get("request_sent") is False


def may_have_acted(error: ErrorInfo, exchanges: Exchanges | None) -> bool:
    """Whether a failed attempt of a tool that may write, which ended with ``error`` after
    its body started (``exchanges``: what its requests may have done), must not be repeated:
    its error offers a retry, and does not say for certain that the upstream did nothing."""
    return (
        error.retryable and error.kind not in _KEPT and not upstream_did_not_act(error, exchanges)
    )


def not_repeated(error: ErrorInfo) -> dict[str, object]:
    """The changes to ``error`` of a write that may have acted: not retryable, and guidance
    saying it may have happened (before the tool's own guidance, if any)."""
    guidance = error.additional_prompt_content
    return {
        "retryable": False,
        "max_retry_attempts": 0,
        "additional_prompt_content": (
            MAY_HAVE_ACTED if not guidance else f"{MAY_HAVE_ACTED} {guidance}"
        ),
    }
