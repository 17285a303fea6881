"""Where policy state lives: a small store interface, and the in-process default.

The limiter and the circuit breaker keep their state (recent call times; a circuit's failures
and state) in a :class:`StateStore` under one key per tool. The store does one thing: apply a
state change atomically. The changes themselves are plain functions of ``tdk.runner``
(``(state, *args) -> (new_state, answer)``), so a store shared by many worker processes (Redis,
say) runs exactly the same rules as the in-process one: it only has to make read-change-write
atomic, for example optimistically (read, change, compare-and-set, retry on conflict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

__all__ = ["InMemoryStore", "StateStore"]

_R = TypeVar("_R")
_S = TypeVar("_S")


@runtime_checkable
class StateStore(Protocol):
    """The state of the rate limiters and circuit breakers of one or many runners.

    Implement :meth:`update` to share that state between processes. States are small plain
    objects (a ``collections.deque`` of floats for a limiter, a dataclass of scalars for a
    circuit) that a shared store serialises. Runners sharing a store share the state of
    equally named tools, and should share a clock too (pass ``clock=time.time``: monotonic
    clocks differ between processes).

    .. versionadded:: 0.1.0
    """

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Atomically replace the state under ``key`` with ``change(state, *args)[0]`` and
        return ``change(state, *args)[1]``.

        ``state`` is None when the key holds nothing yet. ``change`` may modify the state it
        receives in place and return it. A store may call ``change`` more than once (an
        optimistic store retries after a conflict), each time with a fresh copy of the state;
        it has no other side effects.
        """
        ...


class InMemoryStore:
    """The default store: a dict in this process, for the runners of one event loop.

    Changes run synchronously between two awaits of the loop, so each is atomic without a
    lock. Not for sharing between threads that run event loops of their own.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_states",)

    def __init__(self) -> None:
        self._states: dict[str, Any] = {}

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Apply ``change`` to the state under ``key`` (see :meth:`StateStore.update`)."""
        return self.apply(key, change, *args)

    def apply(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """:meth:`update` without the await."""
        state, answer = change(self._states.get(key), *args)
        self._states[key] = state
        return answer

    def get(self, key: str) -> Any:
        """The state under ``key``, or None; nothing is made."""
        return self._states.get(key)

    def forget(self, key: str) -> None:
        """Drop the state under ``key`` (the runner does so for idle per-scope state)."""
        self._states.pop(key, None)

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
