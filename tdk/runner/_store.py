"""Where policy state lives: a small store interface, and the in-process default.

The limiter and the circuit breaker keep their state (recent call times; a circuit's failures
and state) in a :class:`StateStore` under one key per tool. The store does one thing: apply a
state change atomically. The changes themselves are plain functions of ``tdk.runner``
(``(state, *args) -> (new_state, answer)``), so a store shared by many worker processes (Redis,
say) runs exactly the same rules as the in-process one: it only has to make read-change-write
atomic, for example optimistically (read, change, compare-and-set, retry on conflict).

The runner asks for four changes by name: :meth:`StateStore.admit` (the limiter),
:meth:`~StateStore.acquire`, :meth:`~StateStore.record` and :meth:`~StateStore.peek` (the
circuit). Each defaults to :meth:`~StateStore.update` with the rule of the same name, so a store
needs only ``update``; a store that knows a faster way (``RedisStore``: a script each) overrides
them. A store that does not subclass :class:`StateStore` gets the defaults through
:func:`named_operations`. A fifth, :meth:`~StateStore.enter`, is ``acquire`` then ``admit``
for an attempt that has both policies: a shared store may answer both in one round trip
(``RedisStore``: one script); the runner asks it of a store that has it, and asks the two
one after the other of any other.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

from tdk.runner import _breaker, _limiter
from tdk.runner._breaker import CircuitState, Outcome, Transition, Verdict
from tdk.runner._policies import CircuitBreaker, RateLimit

__all__ = [
    "CALL_DEADLINE",
    "CallDeadline",
    "Entry",
    "InMemoryStore",
    "StateStore",
    "UpdateStore",
    "applied_in_process",
    "consume_once",
    "named_operations",
]

_R = TypeVar("_R")
_S = TypeVar("_S")
_CLOSED: Final = CircuitState.CLOSED


@dataclass(slots=True)
class CallDeadline:
    """The deadline of the runner's call in progress, as a shared store sees it.

    A shared store waits for its server at most half of what is left of it for each change
    (the attempt, or the retry, keeps the other half; the report of how an attempt ended
    may take a tenth of the deadline even when it is spent, so that a server that answers
    gets it), and goes on with per-process state past that: no outage, the call's own
    business. Once it has, the call's other changes go there too (its circuit's ticket came
    from there), without waiting.
    """

    ends_at: float
    """The event loop's time (``loop.time()``) at which the call's deadline passes."""
    length: float
    """The deadline's length, in seconds: a tenth of it is what a report may take past it."""
    fell_back: bool = False
    """Whether a change of this call went on without the shared state."""


CALL_DEADLINE: Final[ContextVar[CallDeadline | None]] = ContextVar(
    "tdk_call_deadline", default=None
)
"""Set by the runner for the length of a call with a deadline on a store that is not the
in-process one (see :class:`CallDeadline`)."""


class Entry(NamedTuple):
    """The answer of :meth:`StateStore.enter`: the circuit's verdict on an attempt and, when
    it gives a ticket, the limiter's answer."""

    verdict: Verdict
    """The circuit's verdict (its ``ticket`` is None: refused, and the limiter not asked)."""
    wait: float | None
    """The limiter's answer: 0.0 (admitted), or the seconds until it would admit the
    attempt; None when the circuit refused it."""


class UpdateStore(Protocol):
    """What a store must have: :meth:`StateStore.update` alone. ``ToolRunner(store=...)``
    takes any such object (a store written before the named operations, say), and asks it
    the named operations through ``update``."""

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """See :meth:`StateStore.update`."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """The state of the rate limiters and circuit breakers of one or many runners.

    Implement :meth:`update` to share that state between processes: it is the one method a
    store must have (``isinstance(store, StateStore)`` asks for it alone). The named
    operations (:meth:`admit`, :meth:`acquire`, :meth:`record`, :meth:`peek`) are what the
    runner calls; each defaults to :meth:`update` with tdk's rule of the same name, and a
    store may override them (subclass ``StateStore`` to inherit the defaults). States are
    small plain objects (a ``collections.deque`` of floats for a limiter, a dataclass of
    scalars for a circuit) that a shared store serialises. Runners sharing a store share the
    state of equally named tools, and should share a clock too (pass ``clock=time.time``:
    monotonic clocks differ between processes).

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Atomically replace the state under ``key`` with ``change(state, *args)[0]`` and
        return ``change(state, *args)[1]``.

        ``state`` is None when the key holds nothing yet. ``change`` may modify the state it
        receives in place and return it. A store may call ``change`` more than once (an
        optimistic store retries after a conflict), each time with a fresh copy of the state;
        it has no other side effects.
        """
        ...

    async def admit(self, key: str, limit: RateLimit, now: float) -> float:
        """The limiter: admit an attempt at ``now`` (answer 0.0), or answer the seconds until
        one would be admitted (the rule of :func:`tdk.runner._limiter.admit`)."""
        wait: float = await self.update(key, _limiter.admit, limit, now)
        return wait

    async def acquire(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        probe_lifetime: float | None = None,
    ) -> Verdict:
        """The circuit: admit an attempt (its ticket) or refuse it (the rule of
        :func:`tdk.runner._breaker.acquire`)."""
        verdict: Verdict = await self.update(key, _breaker.acquire, policy, clock, probe_lifetime)
        return verdict

    async def record(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        ticket: int,
        outcome: Outcome,
    ) -> Transition:
        """The circuit: report how the attempt admitted with ``ticket`` ended (the rule of
        :func:`tdk.runner._breaker.record`)."""
        moved: Transition = await self.update(key, _breaker.record, policy, clock, ticket, outcome)
        return moved

    async def peek(self, key: str, policy: CircuitBreaker, clock: Callable[[], float]) -> bool:
        """The circuit: whether it would refuse a call now; changes nothing."""
        refuses: bool = await self.update(key, _breaker.peek, policy, clock)
        return refuses

    async def consume(self, key: str, ttl: float) -> bool:
        """Mark ``key`` used for ``ttl`` seconds: True the first time, False while it is
        marked (the rule of :func:`consumed`). One step: of two replicas that consume the
        same key at once, one gets True. A runner consumes a resume token's nonce with it
        (``docs/asks.md``); a store that cannot answer must raise, never answer True."""
        first: bool = await self.update(key, consumed, time.time(), time.time() + ttl)
        return first

    async def enter(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        probe_lifetime: float | None = None,
        *,
        limiter_key: str,
        limit: RateLimit,
    ) -> Entry:
        """An attempt with a circuit (under ``key``) and a limiter (under ``limiter_key``):
        :meth:`acquire`, then, when the circuit gives a ticket, :meth:`admit` at ``clock()``.
        A shared store may do both in one step (``RedisStore``: one round trip); a refusal
        of the circuit leaves the limiter untouched either way."""
        verdict = await self.acquire(key, policy, clock, probe_lifetime)
        if verdict.ticket is None:
            return Entry(verdict, None)
        return Entry(verdict, await self.admit(limiter_key, limit, clock()))

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        """A class with an ``update`` method is a store: the named operations have defaults
        (``collections.abc`` asks for the required methods alone the same way)."""
        if cls is StateStore and any(callable(vars(k).get("update")) for k in other.__mro__):
            return True
        return cast(bool, NotImplemented)  # (the usual checks decide)


def consumed(state: float | None, now: float, until: float) -> tuple[float, bool]:
    """The rule of :meth:`StateStore.consume`: ``state`` is the wall time until which the
    key is marked used (None: never marked); answers whether this is the first use."""
    if state is not None and state > now:
        return state, False
    return until, True


async def consume_once(store: UpdateStore, key: str, ttl: float) -> bool:
    """``store.consume(key, ttl)``, or its rule through ``update`` for a store without it."""
    consume = getattr(store, "consume", None)
    if callable(consume):
        first: bool = await consume(key, ttl)
        return first
    marked: bool = await store.update(key, consumed, time.time(), time.time() + ttl)
    return marked


class _ThroughUpdate:
    """A store that implements :meth:`StateStore.update` alone, asked by the names of the
    operations. (Each hands back the store's own ``update`` coroutine: no further await.)"""

    __slots__ = ("update",)

    def __init__(self, store: UpdateStore) -> None:
        self.update: Final = store.update
        """The wrapped store's own ``update``."""

    def admit(self, key: str, limit: RateLimit, now: float) -> Awaitable[float]:
        """:meth:`StateStore.admit` through ``update``."""
        return self.update(key, _limiter.admit, limit, now)

    def acquire(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        probe_lifetime: float | None = None,
    ) -> Awaitable[Verdict]:
        """:meth:`StateStore.acquire` through ``update``."""
        return self.update(key, _breaker.acquire, policy, clock, probe_lifetime)

    def record(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        ticket: int,
        outcome: Outcome,
    ) -> Awaitable[Transition]:
        """:meth:`StateStore.record` through ``update``."""
        return self.update(key, _breaker.record, policy, clock, ticket, outcome)

    def peek(self, key: str, policy: CircuitBreaker, clock: Callable[[], float]) -> Awaitable[bool]:
        """:meth:`StateStore.peek` through ``update``."""
        return self.update(key, _breaker.peek, policy, clock)


#: The operations the runner calls on a store by name.
_NAMED: Final = ("admit", "acquire", "record", "peek")


def named_operations(store: UpdateStore) -> StateStore:
    """``store`` itself when it has every named operation (it subclasses
    :class:`StateStore`, or writes its own); else ``store`` seen through :meth:`update`."""
    if all(callable(getattr(store, name, None)) for name in _NAMED):
        return cast(StateStore, store)
    return cast(StateStore, _ThroughUpdate(store))


def applied_in_process(store: UpdateStore) -> InMemoryStore | None:
    """``store`` when the runner may hold its state objects live and apply tdk's changes to
    them itself (skipping its operations): an :class:`InMemoryStore` whose class keeps every
    operation of its own. A subclass that overrides one (to log, count or share its state)
    has each change go through it, as any other store's does."""
    if not isinstance(store, InMemoryStore):
        return None
    kind = type(store)
    if kind is not InMemoryStore and any(
        getattr(kind, name, None) is not getattr(InMemoryStore, name)
        for name in (*_NAMED, "update", "apply")
    ):
        return None
    return store


#: Marks of used tokens an in-memory store holds before it sweeps the expired ones.
_SWEEP_MARKS_AT: Final = 4096


class InMemoryStore(StateStore):
    """The default store: a dict in this process, for the runners of one event loop.

    Changes run synchronously between two awaits of the loop, so each is atomic without a
    lock. Not for sharing between threads that run event loops of their own.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_consumed", "_states", "_sweep_marks_at")

    def __init__(self) -> None:
        self._states: dict[str, Any] = {}
        self._consumed: dict[str, float] = {}
        """Key -> the wall time until which it is marked used (see :meth:`consume`)."""
        self._sweep_marks_at = _SWEEP_MARKS_AT

    async def consume(self, key: str, ttl: float) -> bool:
        """Mark ``key`` used (see :meth:`StateStore.consume`); expired marks are swept as
        new ones come, so the marks stay as many as the tokens still valid."""
        now = time.time()
        marks = self._consumed
        until = marks.get(key)
        if until is not None and until > now:
            return False
        if len(marks) >= self._sweep_marks_at:  # (then when they have doubled since)
            for old in [k for k, v in marks.items() if v <= now]:
                del marks[old]
            self._sweep_marks_at = max(_SWEEP_MARKS_AT, 2 * len(marks))
        marks[key] = now + ttl
        return True

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Apply ``change`` to the state under ``key`` (see :meth:`StateStore.update`)."""
        return self.apply(key, change, *args)

    def apply(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """:meth:`update` without the await."""
        state, answer = change(self._states.get(key), *args)
        if state is None:  # (a question about a key that holds nothing keeps nothing)
            self._states.pop(key, None)
        else:
            self._states[key] = state
        return answer

    @property
    def size(self) -> int:
        """How many keys hold a state."""
        return len(self._states)

    def get(self, key: str) -> Any:
        """The state under ``key``, or None; nothing is made."""
        return self._states.get(key)

    def forget(self, key: str) -> None:
        """Drop the state under ``key`` (the runner does so for idle per-scope state)."""
        self._states.pop(key, None)

    def forget_idle(self, kept: dict[str, RateLimit | CircuitBreaker], now: float) -> None:
        """Drop the states under the keys of ``kept`` (key -> the policy whose state it holds)
        that are as good as none at ``now`` (the clock of the runners' policies): a limiter
        log with nothing left in its window, a closed circuit without failures. Their keys
        leave ``kept`` too. State kept per user (or per anything) would otherwise grow with
        every user ever seen."""
        states = self._states
        for key, policy in list(kept.items()):
            state = states.get(key)
            if isinstance(policy, RateLimit):
                idle = not state or state[-1] <= now - policy.period
            else:
                idle = state is None or (state.state is _CLOSED and not state.failures)
            if idle:
                states.pop(key, None)
                del kept[key]

    def live(self, key: str, factory: Callable[[], _S]) -> _S:
        """The state object under ``key`` itself (made by ``factory()`` if there is none).

        tdk's own changes modify the state they are given and return it, so the runner keeps
        this object and applies them to it directly, skipping the ``update`` round trip on
        its hot path. The rules are the same ones a shared store applies.
        """
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = factory()
        return cast(_S, state)
