"""The plan of a tool's calls: its policies resolved once, and where their state lives.

A runner resolves a tool's policies (the base settings and every matching ``configure``
layer, :mod:`tdk.runner._config`) on the tool's first call, into a :class:`Plan`: the
policies, the state keys of its limiter and circuit, its bulkhead compartment and, with the
in-process store, the live state objects themselves. Later calls read the plan as it is, until
``configure`` drops every plan.

A scope that names context fields (``"github:{user_id}"``) keeps its state per value: each
call then runs under the plan of its formatted scopes, made on first use and kept (at most
:data:`MAX_SCOPED_PLANS` per tool; past that they are dropped, and so is the in-process state
no call needs any more, see :meth:`~tdk.runner.InMemoryStore.forget_idle`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit
from tdk._execution.context import ToolContext
from tdk._execution.default import DEFAULT, Default
from tdk.errors import ToolError, ToolNotFoundError
from tdk.runner._breaker import Circuit, CircuitState
from tdk.runner._bulkhead import Compartment
from tdk.runner._config import Layers, Policies
from tdk.runner._policies import Bulkhead, CircuitBreaker, RateLimit
from tdk.runner._refusals import scope_fields_missing
from tdk.runner._scopes import context_values, scope_fields, scope_key
from tdk.runner._store import InMemoryStore

__all__ = ["MAX_SCOPED_PLANS", "Plan", "Plans", "ScopeFields"]

#: Plans of formatted scopes a tool keeps at most (then they are made again).
MAX_SCOPED_PLANS: Final = 4096


class ScopeFields(NamedTuple):
    """The context fields a tool's scopes name (none for a fixed scope, or none at all)."""

    limiter: tuple[str, ...] = ()
    breaker: tuple[str, ...] = ()


_UNSCOPED: Final = ScopeFields()


@dataclass(slots=True)
class Plan:
    """What the runner needs on every call of one tool, resolved once per configuration."""

    tool: Tool[..., Any]
    name: str
    policies: Policies
    compartment: Compartment | None
    attempt_timeout: float | Default
    """The ``timeout=`` of each attempt without a deadline."""
    own_timeout: float | None
    """The per-attempt limit that a deadline may shorten; also how long a half-open probe
    may take before it counts as lost."""
    limiter_key: str
    breaker_key: str
    threaded: bool
    """Whether the body runs in a worker thread (and may outlive its attempt)."""
    repeatable: bool
    """Whether the tool is read-only or idempotent: any retryable failure may be retried.
    Otherwise only failures where the upstream certainly did not act are; and the requests
    each attempt sends are noted (see :mod:`tdk._execution.exchanges`) to tell which."""
    attempts_allowed: int
    """Attempts a call may make at most (its retry policy's ``max_attempts``; 1 without),
    as log lines count them: "attempt 2 of 3"."""
    keyed: bool
    """Whether the tool reads its context: each call then gets its idempotency key here,
    the same for all its attempts."""
    scoped_by: ScopeFields = _UNSCOPED
    """The context fields the limiter's and the breaker's scopes name: when any, each call
    runs under the plan of its formatted scopes (:meth:`Plans.scoped`)."""
    circuit: Circuit | None = None
    """With the in-process store: the live circuit state, changed in place."""
    log: deque[float] | None = None
    """With the in-process store: the live limiter log, changed in place."""
    scoped: dict[tuple[tuple[str, str], ...], Plan] = field(default_factory=dict)
    """The plans of formatted scopes, by the values of the fields (a few thousand at most)."""
    by_context: bool = False
    """Whether any scope names context fields (``scoped_by`` is not empty)."""
    context_fields: tuple[str, ...] = ()
    """Every field the two scopes name, each once."""


class Plans:
    """The plans of one runner's tools, by name as called and lowercased."""

    __slots__ = (
        "_clock",
        "_compartments",
        "_layers",
        "_local",
        "_per_context",
        "_swept",
        "_toolkit",
        "by_name",
        "circuits",
    )

    def __init__(
        self,
        toolkit: Toolkit,
        layers: Layers,
        local: InMemoryStore | None,
        clock: Callable[[], float],
        swept: InMemoryStore | None = None,
    ) -> None:
        self._toolkit = toolkit
        self._layers = layers
        self._local = local
        """The in-process store, whose state objects plans hold live (None: another store)."""
        self._swept = local if swept is None else swept
        """The in-process store whose idle per-context state this runner sweeps (``local``,
        or an in-process store whose changes go through its own operations)."""
        self._clock = clock
        self._compartments: dict[tuple[str, Bulkhead], Compartment] = {}
        self._per_context: dict[str, RateLimit | CircuitBreaker] = {}
        """In-process state kept per context value (per user): key -> its policy."""
        self.by_name: Final[dict[str, Plan]] = {}
        """The plans made, by name as called and lowercased: the runner reads it first."""
        self.circuits: Final[dict[str, Circuit]] = {}
        """The live circuits of the in-process store, by tool name."""

    def configure(self, pattern: str, changes: dict[str, Any]) -> None:
        """Add a ``configure`` layer; every plan is made again on its next call."""
        self._layers.add(pattern, changes)
        self.by_name.clear()

    def policies(self, name: str) -> Policies:
        """The policies of the tool called ``name`` (whether or not it exists)."""
        return self._layers.resolve(name)

    def find(self, name: str) -> Plan | None:
        """The plan of the tool called ``name`` (made now if need be); None for no tool."""
        plan = self.by_name.get(name) or self.by_name.get(name.lower())
        if plan is not None:
            return plan
        try:
            return self.make(name)
        except ToolNotFoundError:
            return None

    def make(self, name: str) -> Plan:
        """Resolve and remember the plan of the tool called ``name``."""
        tool = self._toolkit.get(name)
        key = tool.name.lower()
        policies = self._layers.resolve(tool.name)
        compartment = None
        if policies.bulkhead is not None:
            compartment = self._compartments.setdefault(
                (key, policies.bulkhead), Compartment(policies.bulkhead.max_concurrent)
            )
        timeout = policies.timeout
        limiter, breaker = policies.rate_limit, policies.circuit_breaker
        limiter_scope = limiter.scope if limiter is not None else None
        breaker_scope = breaker.scope if breaker is not None else None
        plan = Plan(
            tool=tool,
            name=tool.name,
            policies=policies,
            compartment=compartment,
            attempt_timeout=DEFAULT if timeout is None else timeout,
            own_timeout=tool.spec.timeout if timeout is None else timeout,
            limiter_key=_state_key("rate_limit", key, limiter_scope)
            + ("" if limiter is None else f"/{limiter.calls}/{float(limiter.period)!r}"),
            breaker_key=_state_key("circuit", key, breaker_scope),
            threaded=not (tool.spec.is_async or tool.spec.inline),
            repeatable=tool.definition.annotations.repeatable,
            attempts_allowed=1 if policies.retry is None else policies.retry.max_attempts,
            keyed=tool.spec.context_parameter is not None,
            scoped_by=ScopeFields(scope_fields(limiter_scope), scope_fields(breaker_scope)),
        )
        plan.by_context = plan.scoped_by != _UNSCOPED
        plan.context_fields = tuple(dict.fromkeys((*plan.scoped_by[0], *plan.scoped_by[1])))
        if not plan.by_context:
            self._bind_state(plan)
        self.by_name[key] = self.by_name[tool.name] = plan
        return plan

    def scoped(self, plan: Plan, context: ToolContext | None) -> Plan | ToolError:
        """The plan of a call whose scopes name context fields: its state keys formatted
        for ``context``; or the error naming the fields the context lacks."""
        named = plan.context_fields
        values = context_values(named, context)
        if isinstance(values, list):
            return scope_fields_missing(plan.name, values)
        found = plan.scoped.get(values)
        if found is not None:
            return found
        limiter_fields, breaker_fields = plan.scoped_by
        if len(plan.scoped) >= MAX_SCOPED_PLANS:
            for each in self.by_name.values():  # (no plan keeps a state forgotten here)
                each.scoped.clear()
            if self._swept is not None:
                self._swept.forget_idle(self._per_context, self._clock())
        found = dataclasses.replace(
            plan,
            limiter_key=scope_key(plan.limiter_key, limiter_fields, named, values),
            breaker_key=scope_key(plan.breaker_key, breaker_fields, named, values),
            scoped_by=_UNSCOPED,
            scoped={},
            by_context=False,
            context_fields=(),
        )
        self._bind_state(found)
        policies = plan.policies
        if self._swept is not None:  # (idle per-user state is swept in this process only)
            if limiter_fields and policies.rate_limit is not None:
                self._per_context[found.limiter_key] = policies.rate_limit
            if breaker_fields and policies.circuit_breaker is not None:
                self._per_context[found.breaker_key] = policies.circuit_breaker
        plan.scoped[values] = found
        return found

    def circuit_key(self, plan: Plan, context: ToolContext | None) -> str | None:
        """The key of the circuit a call of ``plan`` with ``context`` would ask; None when
        the context lacks a field the breaker's scope names."""
        fields = plan.scoped_by.breaker  # (a limiter's fields do not matter here)
        if not fields:
            return plan.breaker_key
        values = context_values(fields, context)
        if isinstance(values, list):
            return None
        return scope_key(plan.breaker_key, fields, fields, values)

    def _bind_state(self, plan: Plan) -> None:
        """With the in-process store: give ``plan`` its live state objects."""
        local = self._local
        if local is None:
            return
        if plan.policies.circuit_breaker is not None:
            plan.circuit = local.live(plan.breaker_key, Circuit)
            self.circuits[plan.name] = plan.circuit
        if plan.policies.rate_limit is not None:
            plan.log = local.live(plan.limiter_key, deque)

    def circuit_states(self) -> dict[str, CircuitState]:
        """The state of each live circuit of the in-process store, by tool name."""
        return {name: circuit.state for name, circuit in self.circuits.items()}


def _state_key(policy: str, tool_key: str, scope: str | None) -> str:
    """The store key of a policy's state: per tool, or per scope (to which a call appends
    the values of the fields a scope names, see :func:`scope_key`). Tool names hold no
    ``:``, so the two never meet. (A limiter's key also carries its limits: tools sharing a
    scope share one quota when their limits are equal, and only then.)"""
    return f"tdk:{policy}:{tool_key}" if scope is None else f"tdk:{policy}:scope:{scope}"
