"""tdk's default instruments of the runner: its log records, its OpenTelemetry events and
metrics, and the call's progress (:mod:`tdk.runner._events` says what they hear)."""

from __future__ import annotations

import logging
from typing import Final

from tdk._execution.call_scope import logged_call_id
from tdk._execution.context import secrets_of
from tdk._execution.progress import listened, report
from tdk._execution.telemetry import circuit_changed, counted, event
from tdk.errors import ErrorCategory, ErrorInfo
from tdk.runner._breaker import CircuitState
from tdk.runner._events import (
    CircuitChanged,
    Event,
    Queued,
    Refused,
    RetryScheduled,
    RetryStopped,
    Waiting,
)
from tdk.runner._limiter import wait_ms

__all__ = ["DEFAULT_INSTRUMENTS", "log_lines", "otel_events", "progress_reports"]

logger: Final = logging.getLogger("tdk.runner")
"""One INFO record per retry decision and per circuit transition."""


def log_lines(happened: Event) -> None:
    """One INFO record per retry decision (``tdk_retry``) and per circuit transition
    (``tdk_circuit``), built only when the logger is enabled for INFO."""
    if type(happened) is CircuitChanged:
        _log_transition(happened)
    elif type(happened) is RetryScheduled or type(happened) is RetryStopped:
        _log_decision(happened)


def otel_events(happened: Event) -> None:
    """Events on the call's span and counts in its metrics, when the call is traced or
    measured (each function checks the call's telemetry, and does nothing without it)."""
    if type(happened) is RetryScheduled:
        kind = happened.error.kind.value
        event("tdk.retry", {"tdk.wait_ms": wait_ms(happened.wait), "error.type": kind})
        counted("retries", happened.tool)
    elif type(happened) is Refused:
        event("tdk.refused", {"error.type": happened.kind.value})
        counted("refusals", happened.tool, **{"error.type": happened.kind.value})
    elif type(happened) is CircuitChanged:
        circuit_changed(happened.tool, happened.before.value, happened.after.value)
    elif type(happened) is Waiting:
        event("tdk.rate_limit.wait", {"tdk.wait_ms": wait_ms(happened.wait)})
    elif type(happened) is Queued:
        event("tdk.bulkhead.wait", {"tdk.wait_ms": wait_ms(happened.wait)})


def progress_reports(happened: Event) -> None:
    """A wait of the call, as a progress report saying why (``rate limited upstream:
    retrying in 28 s, attempt 2 of 3``), for a host that carries progress to its client
    (one that resets its timeout on progress keeps the call alive). Nothing is made when
    no one listens."""
    if not listened():
        return
    if type(happened) is RetryScheduled:
        text = (
            f"{_why(happened.error)}: retrying in {_spoken(happened.wait)}, "
            f"attempt {happened.attempt + 1} of {happened.of}"
        )
    elif type(happened) is Waiting:
        text = f"rate limited here: waiting {_spoken(happened.wait)} for a turn"
    elif type(happened) is Queued:
        text = f"busy: waiting up to {_spoken(happened.wait)} for a free slot"
    else:
        return
    report(None, None, text)


#: The instruments every runner has: OpenTelemetry first (a circuit's change is an event of
#: the span before it is a log line, as it always was), then the log, then the progress.
DEFAULT_INSTRUMENTS: Final = (otel_events, log_lines, progress_reports)


def _why(error: ErrorInfo) -> str:
    """Why an attempt failed, in a few words for a user watching the call."""
    if error.category is ErrorCategory.RATE_LIMIT:
        return "rate limited upstream"
    if error.status_code is not None:
        return f"upstream answered {error.status_code}"
    if error.category is ErrorCategory.TIMEOUT:
        return "the attempt timed out"
    if error.category is ErrorCategory.CONNECTION:
        return "the upstream could not be reached"
    return f"the attempt failed ({error.kind.value})"


def _spoken(wait: float) -> str:
    """A wait as a user reads it: ``28 s``, ``0.5 s``."""
    return f"{wait:.0f} s" if wait >= 9.5 else f"{wait:.1g} s" if wait < 1 else f"{wait:.1f} s"


def _log_decision(decided: RetryScheduled | RetryStopped) -> None:
    """The record of a retry decision after attempt ``attempt`` (of ``of``) of a call failed:
    a retry after ``wait`` seconds, or none (``reason`` says why). The call's id is redacted
    with its context's secrets; ``tdk_retry`` holds the same facts as a dict."""
    if not logger.isEnabledFor(logging.INFO):
        return
    shown = logged_call_id(decided.call_id, secrets_of(decided.context))
    name, number, of, kind = decided.tool, decided.attempt, decided.of, decided.error.kind.value
    who = name if shown is None else f"{name} (call {shown})"
    retrying = type(decided) is RetryScheduled
    if retrying:
        text = "tool %s: attempt %d of %d failed with %s; retrying in %.3f s (%s)"
        args: tuple[object, ...] = (who, number, of, kind, decided.wait, decided.reason)
    else:
        text = "tool %s: attempt %d of %d failed with %s; not retrying (%s)"
        args = (who, number, of, kind, decided.reason)
    facts = {
        "tool": name,
        "call_id": shown,
        "attempt": number,
        "max_attempts": of,
        "kind": kind,
        "retrying": retrying,
        "wait": decided.wait,
        "reason": decided.reason,
    }
    logger.info(text, *args, extra={"tdk_retry": facts})


def _log_transition(changed: CircuitChanged) -> None:
    """The record of a circuit that changed state; ``tdk_circuit`` holds the facts."""
    if not logger.isEnabledFor(logging.INFO):
        return
    name, before, after = changed.tool, changed.before.value, changed.after.value
    facts = {"tool": name, "from": before, "to": after, "failure_count": changed.failures}
    text = "circuit of tool %s: %s -> %s"
    args: tuple[object, ...] = (name, before, after)
    if changed.after is CircuitState.OPEN:
        text += " (after %d consecutive failures)"
        args += (changed.failures,)
    logger.info(text, *args, extra={"tdk_circuit": facts})
