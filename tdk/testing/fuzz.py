"""``tdk.testing.fuzz(toolkit)``: every tool called with what hypothesis draws from its input
schema, hostile values included; every outcome must be a ``ToolResult`` of a known kind with
no secret in it.

::

    def test_fuzz():
        report = tdk.testing.fuzz(toolkit)
        assert report.examples == 100

For each drawn call (:mod:`tdk.testing.strategies`), the tool runs (through ``runner=`` when
given, else the toolkit) with a context holding a canary for every secret the tools require,
and:

- the result is a ``ToolResult`` whose kind is one of ``kinds`` (default: every run-time kind
  of :class:`~tdk.errors.ErrorKind`, not ``UNKNOWN`` nor a definition or load kind), whose
  ``to_dict()`` is JSON and whose ``for_model()`` is text;
- no canary is in the result, nor in any log record or span made during the call
  (``tdk_secrets``'s sinks);
- a failure does not echo the arguments: the marker text drawn among string values
  (:data:`~tdk.testing.canaries.ECHO_MARKER`) is in no field of an invalid-arguments error,
  nor in what the model reads of any other failure (its ``message`` and guidance).

It is bounded and deterministic: by default 100 examples, derandomized, no example database,
no deadline (a first call may be slow); pass ``settings=hypothesis.settings(...)`` to choose
your own (yours is used as it is). A failure raises ``AssertionError`` with the smallest
example hypothesis found.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from tdk._define.toolkit import Toolkit
from tdk._execution.result import ToolResult
from tdk.errors import ErrorKind
from tdk.runner import ToolRunner
from tdk.testing.canaries import ECHO_MARKER, Canaries

__all__ = ["RUNTIME_KINDS", "FuzzReport", "fuzz"]

#: The kinds a run may end with: every kind but ``UNKNOWN`` and those of definitions.
RUNTIME_KINDS: Final = frozenset(
    kind
    for kind in ErrorKind
    if kind is not ErrorKind.UNKNOWN
    and kind is not ErrorKind.TOOLKIT_LOAD_FAILED
    and not kind.value.startswith("TOOL_DEFINITION")
)


@dataclass
class FuzzReport:
    """What the fuzz run saw."""

    examples: int = 0
    """How many calls were made."""
    kinds: Counter[str] = field(default_factory=Counter)
    """How many calls ended with each kind (``success`` for a success)."""


def _echo_text(result: ToolResult) -> str:
    """Where an argument must not come back: the whole error of invalid arguments (tdk
    echoes no submitted value), and what the model reads of any other failure (an upstream
    error's redacted URL, built from arguments, is in its ``details``: that is allowed)."""
    error = result.error
    assert error is not None
    if error.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE:
        return json.dumps(error.to_dict(), ensure_ascii=False)
    return f"{error.message}\n{error.additional_prompt_content or ''}"


def _outcome_problem(
    result: object, kinds: frozenset[ErrorKind], canaries: Canaries, before: int
) -> str | None:
    """What is wrong with one outcome, or None."""
    if not isinstance(result, ToolResult):
        return f"the call gave {type(result).__name__}, not a ToolResult"
    json.dumps(result.to_dict())  # (raises if it is not JSON)
    if not isinstance(result.for_model(), str):
        return "for_model() is not text"
    if result.error is not None:
        if result.error.kind not in kinds:
            return f"the kind {result.error.kind.value} is not one of those allowed"
        if ECHO_MARKER in _echo_text(result):
            return "the error echoes an argument (the marker text drawn is in it)"
    canaries.check(result, sink="result", where=result.tool)
    if len(canaries.leaks) > before:
        return canaries.report(canaries.leaks[before:])
    return None


def fuzz(
    toolkit: Toolkit,
    *,
    runner: ToolRunner | None = None,
    tools: list[str] | None = None,
    kinds: frozenset[ErrorKind] | set[ErrorKind] | None = None,
    settings: Any = None,
    max_examples: int = 100,
) -> FuzzReport:
    """Call the tools of ``toolkit`` (``tools``: only these names) with drawn arguments and
    check every outcome (see the module). Must not be called from a running event loop."""
    try:
        import hypothesis
        from hypothesis import strategies as st

        from tdk.testing.strategies import arguments
    except ImportError as missing:
        raise ImportError("fuzz() needs hypothesis: pip install 'tdk-tools[testing]'") from missing
    definitions = [d for d in toolkit.definitions() if tools is None or d.name in tools]
    if not definitions:
        raise ValueError("fuzz() has no tool to call")
    allowed = frozenset(RUNTIME_KINDS if kinds is None else kinds)
    calls = st.one_of([st.tuples(st.just(d.name), arguments(d.input_schema)) for d in definitions])
    chosen: hypothesis.settings = settings or hypothesis.settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        print_blob=False,
    )
    report = FuzzReport()
    target = runner if runner is not None else toolkit
    with asyncio.Runner() as loop, Canaries() as canaries:
        context = canaries.context(toolkit)

        @chosen
        @hypothesis.given(calls)
        def one(call: tuple[str, Any]) -> None:
            name, drawn = call
            before = len(canaries.leaks)
            result = loop.run(target.run(name, drawn, context=context))
            report.examples += 1
            report.kinds[result.error.kind.value if result.error else "success"] += 1
            problem = _outcome_problem(result, allowed, canaries, before)
            if problem is not None:
                raise AssertionError(f"fuzz: {name}: {problem}")

        one()
    return report
