"""The runner's own refusals, as the errors every result carries and as results."""

from __future__ import annotations

from tdk._execution.call_scope import failure_result
from tdk._execution.context import ToolContext
from tdk._execution.result import ToolResult
from tdk.errors import (
    ToolBulkheadFullError,
    ToolCircuitOpenError,
    ToolError,
    ToolRateLimitedError,
    ToolRequirementError,
    ToolTimeoutError,
)
from tdk.runner._breaker import CircuitState
from tdk.runner._events import Instruments, Refused
from tdk.runner._limiter import wait_ms
from tdk.runner._policies import CircuitBreaker, RateLimit
from tdk.runner._stats import REFUSAL_KINDS

__all__ = [
    "bulkhead_full",
    "circuit_open",
    "deadline_passed",
    "rate_limited",
    "refusal_result",
]


def circuit_open(
    name: str, policy: CircuitBreaker, failures: int, state: CircuitState, wait: float | None
) -> ToolCircuitOpenError:
    """The circuit refused a call; ``wait`` is None while a half-open circuit's probes run."""
    retry_after_ms = None if wait is None else wait_ms(wait)
    when = "while probe calls run" if retry_after_ms is None else f"for {retry_after_ms} ms"
    return ToolCircuitOpenError(
        f"The tool '{name}' is failing repeatedly; calls to it are paused {when}.",
        failure_count=failures,
        reset_timeout=policy.reset_timeout,
        retry_after_ms=retry_after_ms,
        details={"attempts": 0, "state": state.value},
    )


def rate_limited(name: str, limit: RateLimit, wait: float) -> ToolRateLimitedError:
    """The limiter refused a call that it would admit in ``wait`` seconds."""
    retry_after_ms = wait_ms(wait)
    return ToolRateLimitedError(
        f"The tool '{name}' is limited to {limit.calls} calls per {limit.period:g} s; "
        f"try again in {retry_after_ms} ms.",
        limit=limit.calls,
        period=limit.period,
        retry_after_ms=retry_after_ms,
        details={"attempts": 0},
    )


def scope_fields_missing(name: str, missing: list[str]) -> ToolRequirementError:
    """A call whose policies keep their state per context field, and whose context lacks
    ``missing`` (``user_id``, or metadata keys)."""
    fields = list(dict.fromkeys(missing))
    metadata = [field for field in fields if field != "user_id"]
    needs = ", ".join(
        "user_id" if field == "user_id" else f"metadata '{field}'" for field in fields
    )
    return ToolRequirementError(
        f"The tool '{name}' cannot run: its limits are kept per {needs}, which the call's "
        "context does not give.",
        missing_metadata=metadata or None,
        developer_message=(
            "A RateLimit or CircuitBreaker scope names context fields the call did not "
            "give: pass them in ToolContext(user_id=..., metadata={...})."
        ),
        details={"attempts": 0, "missing_user_id": "user_id" in fields},
    )


def bulkhead_full(
    name: str, scope: str, max_concurrent: int, max_wait: float
) -> ToolBulkheadFullError:
    """No slot in the tool's compartment (``scope="tool"``) or the runner's (``"all"``)."""
    which = f"of the tool '{name}'" if scope == "tool" else "of all tools together"
    return ToolBulkheadFullError(
        f"Too many calls {which} are running ({max_concurrent} at most); "
        f"none finished within {max_wait:g} s.",
        max_concurrent=max_concurrent,
        max_wait=max_wait,
        details={"attempts": 0, "scope": scope},
    )


def deadline_passed(name: str, deadline: float) -> ToolTimeoutError:
    """The call's deadline passed before its first attempt could start."""
    return ToolTimeoutError(
        f"The call's deadline of {deadline:g} s passed before the tool '{name}' could run.",
        timeout=deadline,
        details={"attempts": 0, "deadline": deadline},
    )


def refusal_result(
    name: str,
    error: ToolError,
    context: ToolContext | None,
    call_id: str | None,
    started: float,
    *,
    instruments: Instruments | None,
) -> ToolResult:
    """The result of a call refused before the tool body ran: classified, redacted and
    logged once, like every failure; a refusal of the runner's own policies is an event of
    its ``instruments`` (None for a refusal of the call itself: an unknown tool...)."""
    if instruments is not None and error.kind in REFUSAL_KINDS:  # (not an unknown tool's)
        instruments.emit(Refused(name, error.kind))
    return failure_result(
        name,
        error,
        call_id=call_id,
        context=context,
        attempts=0,
        started=started,
        include_stacktrace=False,
    )
