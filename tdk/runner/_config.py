"""Which policies apply to which tool: the runner's settings and the ``configure`` layers.

The runner's constructor gives the base :class:`Policies`. Each ``configure(pattern, ...)``
call adds a layer holding only the arguments it was given. A tool's settings are the base with
every matching layer applied in the order they were added, so later calls win and arguments
not passed are inherited. Patterns are tool names or globs (``fnmatch``: ``*``, ``?``,
``[...]``), compared ignoring case, like the toolkit's lookup.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from tdk._execution.default import DEFAULT
from tdk.runner._policies import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    check_optional_seconds,
)

__all__ = ["Layers", "Policies", "check_policies"]

_POLICY_TYPES: Final[dict[str, type]] = {
    "retry": RetryPolicy,
    "rate_limit": RateLimit,
    "circuit_breaker": CircuitBreaker,
    "bulkhead": Bulkhead,
}


@dataclass(frozen=True, slots=True)
class Policies:
    """The policies that apply to one tool (from :meth:`ToolRunner.policies
    <tdk.ToolRunner.policies>`); None means off.

    .. versionadded:: 0.1.0
    """

    timeout: float | None = None
    """Time limit of each attempt, in seconds (None: the tool's own limit)."""
    deadline: float | None = None
    """Time limit of the whole call, attempts and waits, in seconds."""
    retry: RetryPolicy | None = None
    rate_limit: RateLimit | None = None
    circuit_breaker: CircuitBreaker | None = None
    bulkhead: Bulkhead | None = None


def check_policies(given: dict[str, Any]) -> dict[str, Any]:
    """The given policies, checked: seconds as floats, policies of the right type."""
    checked: dict[str, Any] = {}
    for name, value in given.items():
        if value is DEFAULT:  # not given: inherited
            continue
        if name in ("timeout", "deadline"):
            checked[name] = check_optional_seconds(name, value)
            continue
        expected = _POLICY_TYPES[name]
        if value is not None and not isinstance(value, expected):
            raise TypeError(f"{name} must be a {expected.__name__} or None, got {value!r}")
        checked[name] = value
    return checked


class Layers:
    """The base settings and the ``configure`` layers, resolved per tool name."""

    __slots__ = ("_base", "_layers")

    def __init__(self, base: Policies) -> None:
        self._base = base
        self._layers: list[tuple[str, dict[str, Any]]] = []

    def add(self, pattern: str, changes: dict[str, Any]) -> None:
        """Add a layer for the tools whose names match ``pattern``."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError(f"the pattern must be a tool name or a glob, not {pattern!r}")
        self._layers.append((pattern.lower(), changes))

    def resolve(self, tool_name: str) -> Policies:
        """The settings of the tool called ``tool_name``."""
        settings = self._base
        key = tool_name.lower()
        for pattern, changes in self._layers:
            if changes and fnmatchcase(key, pattern):
                settings = dataclasses.replace(settings, **changes)
        return settings
