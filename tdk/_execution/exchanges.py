"""What the requests of the current attempt of a call may have done upstream.

A failure of a tool that may write is repeatable (by a runner, or offered as retryable to
the model) only where the upstream certainly did not act: a rate limit (the upstream
refused), or a connection that failed before its request left (see :mod:`tdk._execution.writes`).
That is only certain when no other request of the same attempt may have reached an
upstream: a write whose answer timed out, a redirect followed, a request still in flight
beside the one that failed. tdk's HTTP hooks note each request here, and execution asks.

For a client tdk is installed on (:func:`tdk.http.install`), a request counts from the moment
its ``request`` event fires (just before it is sent: that alone does not prove it left) until
it is known not to have left: a connect that failed (:data:`NOT_SENT`) takes it back, and so
does a rate-limit refusal (the upstream answered that it did nothing). Any other end (an
answer, a read timeout, a reset connection, a cancellation while in flight) leaves it counted:
the upstream may have acted. A response hook added by hand (without ``install``) sees only
answers: each counts when it arrives.

The count lives in a context variable, one :class:`Exchanges` per attempt, so the tasks and
tdk's worker threads of a tool share it; a request is marked with the record that counted it,
so that a late report of an attempt that ended goes to that attempt, not the next.

A request made where no attempt is current (a thread the tool started itself, a job of
``loop.run_in_executor``: neither copies the caller's context) cannot be told apart from the
requests of other attempts: it counts for every attempt watched at the time (:data:`LIVE`),
the safe side (a write of another call is not repeated after a refused connect while such a
request was out; it never goes out twice). Only tdk's
HTTP hooks note requests: until they are loaded (:data:`NOTING`), a record could only stay
empty, and execution makes none (a call that writes nothing over HTTP pays nothing).
"""

from __future__ import annotations

import contextlib
import threading
from contextvars import ContextVar, Token
from typing import Any, Final

__all__ = [
    "CURRENT",
    "LIVE",
    "NOTHING_NOTED",
    "NOTING",
    "NOT_SENT",
    "Exchanges",
    "Noting",
    "never_sent",
    "note_failure",
    "note_refusal",
    "note_response",
    "note_sending",
    "note_unauthorized",
    "unwatch",
    "watch",
]


class Exchanges:
    """The requests of one attempt of a call that may have reached an upstream."""

    __slots__ = ("reached", "unauthorized")

    def __init__(self) -> None:
        self.reached = 0
        """Requests sent (or whose sending is not known to have failed) and not refused."""
        self.unauthorized = 0
        """401 answers tdk's hook saw (the credentials refused: nothing was done)."""

    def add(self, other: Exchanges) -> None:
        """Count the requests of ``other`` (a call made from inside this attempt, watched on
        its own) as this attempt's own: the outer call acted when the inner one did."""
        self.reached += other.reached
        self.unauthorized += other.unauthorized


#: The record of a call whose requests nothing could note (tdk's HTTP hooks not loaded):
#: empty for good (it is never made current).
NOTHING_NOTED: Final = Exchanges()

#: The record of the attempt running in this context, while one is watched.
CURRENT: Final[ContextVar[Exchanges | None]] = ContextVar("tdk_exchanges", default=None)


class Noting:
    """Whether a request can be noted at all in this process."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False
        """Set when tdk's HTTP hooks (the only code that notes requests) are loaded."""


#: Whether tdk's HTTP hooks are loaded: before that, nothing can be noted, and execution
#: watches no call (a record would stay empty).
NOTING: Final = Noting()


class Live:
    """The records of the attempts watched now, in any thread: where a request made outside
    every attempt's context counts."""

    __slots__ = ("_lock", "_records")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: set[Exchanges] = set()

    def add(self, exchanges: Exchanges) -> None:
        """An attempt's watch began."""
        with self._lock:
            self._records.add(exchanges)

    def discard(self, exchanges: Exchanges) -> None:
        """An attempt's watch ended."""
        with self._lock:
            self._records.discard(exchanges)

    def now(self) -> tuple[Exchanges, ...]:
        """The records watched now."""
        if not self._records:  # (the common case, read without the lock)
            return ()
        with self._lock:
            return tuple(self._records)


#: The attempts watched now, in this process.
LIVE: Final = Live()


def watch(exchanges: Exchanges) -> Token[Exchanges | None]:
    """Begin the watch of an attempt: its requests are noted in ``exchanges`` (the current
    record of this context, and one of :data:`LIVE`) until :func:`unwatch`."""
    LIVE.add(exchanges)
    return CURRENT.set(exchanges)


def unwatch(token: Token[Exchanges | None], exchanges: Exchanges) -> None:
    """End the watch ``token`` began (``CURRENT.set(exchanges)``), and count the requests of
    ``exchanges`` for the attempt around it, if any: a tool that calls another (directly or
    through a runner) acted when the inner one did."""
    LIVE.discard(exchanges)
    outer = token.old_value  # (the record around this one, whatever context this ends in)
    if type(outer) is Exchanges:
        outer.add(exchanges)
    try:  # (a plain try, on every watched call: bench/README.md#a-plain-try)
        CURRENT.reset(token)
    except ValueError:  # ended in another context (a future-like object of the body's own
        return  # woke its task outside the task's context): nothing to undo here


#: httpx exception classes (by name, for ``httpx2`` too) raised before a request left: no
#: connection was made (refused, unresolvable, a connect timeout, no connection free in the
#: pool in time) or its URL cannot be sent. Shared with the exception table
#: (``request_sent: False``).
NOT_SENT: Final = frozenset(
    {"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"}
)

#: The key under which a request carries the record that counted it, and the request's own
#: ``id()`` (httpx copies a request's extensions to its redirects, which are counted anew).
_COUNTED: Final = "tdk.exchanges"


def never_sent(exc: BaseException) -> bool:
    """Whether ``exc`` (an httpx or httpx2 exception, or a subclass) was raised before its
    request left."""
    return any(cls.__name__ in NOT_SENT for cls in type(exc).__mro__)


def note_sending(request: Any) -> None:
    """A request of the current attempt is about to be sent (an installed ``request`` hook);
    outside every attempt's context, one of any attempt watched now."""
    exchanges = CURRENT.get()
    records = (exchanges,) if exchanges is not None else LIVE.now()
    if records:
        for each in records:
            each.reached += 1
        # Marked, so that a failed connect can take it back (odd extensions that refuse the
        # mark: counted for good, the safe side).
        with contextlib.suppress(Exception):
            request.extensions[_COUNTED] = (records, id(request))


def note_response(response: Any) -> None:
    """An upstream answered a request (a response hook): counted now, unless its ``request``
    event counted it already."""
    if _mark_of(_request_of(response)) is not None:
        return
    exchanges = CURRENT.get()
    for each in (exchanges,) if exchanges is not None else LIVE.now():
        each.reached += 1


def note_refusal(response: Any) -> None:
    """The upstream refused a request with a rate limit (a response hook, after
    :func:`note_response`): it did nothing, and the request no longer counts."""
    request = _request_of(response)
    if _mark_of(request) is not None:
        _take_back(request)
        return
    exchanges = CURRENT.get()  # counted by note_response() of this same answer (outside
    if exchanges is not None:  # every attempt: counted for good, the safe side)
        exchanges.reached -= 1


def note_unauthorized(response: Any) -> None:
    """The upstream refused a request's credentials with a 401 (a response hook): it did
    nothing, as for a rate limit, and the attempt saw a 401 (a runner acting as the user may
    refresh the token and run it once more; a 401 no hook saw is the body's failure alone).
    It is the current attempt's only: outside every attempt's context (a thread of the
    tool's own) it is no attempt's, the safe side (nothing is run again)."""
    mark = _mark_of(_request_of(response))
    exchanges = CURRENT.get()
    if exchanges is not None and (mark is None or exchanges in mark[0]):
        exchanges.unauthorized += 1
    note_refusal(response)


def note_failure(request: Any, exc: BaseException) -> None:
    """Sending ``request`` failed with ``exc``: a request that never left (the one ``exc``
    names, else ``request``) no longer counts."""
    if never_sent(exc):
        named = _request_of(exc)
        _take_back(request if named is None else named)


def _mark_of(request: Any) -> tuple[tuple[Exchanges, ...], int] | None:
    """The records that counted ``request`` when its ``request`` event fired, if any (a mark
    copied from the request a redirect was made from is not its own)."""
    if request is None:
        return None
    try:
        mark = request.extensions.get(_COUNTED)
    except Exception:  # odd extensions: not ours
        return None
    if type(mark) is tuple and mark[1] == id(request):
        return mark
    return None


def _take_back(request: Any) -> None:
    mark = _mark_of(request)
    if mark is None:
        return
    try:
        del request.extensions[_COUNTED]
    except Exception:  # odd extensions: leave the count as it is (the safe side)
        return
    for each in mark[0]:
        each.reached -= 1


def _request_of(holder: Any) -> Any:
    """The request of a response or an httpx exception; None when it has none."""
    try:
        return holder.request  # (httpx raises RuntimeError when none was set)
    except Exception:
        return None
