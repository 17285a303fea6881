"""``RedisStore``: limiter and circuit state shared by runners in many processes, on Redis.

The store's named operations (the limiter's ``admit``, the circuit's ``acquire``, ``record``
and ``peek``, and ``enter``, ``acquire`` and ``admit`` together) run as Lua scripts (see
``_redis_scripts``), one round trip each, registered once and run with ``EVALSHA``, timed by
the server's ``TIME``. A call with a limiter and a circuit so enters in one round trip, and
its success in a closed circuit without failures costs none (see :meth:`RedisStore.record`).
Any other change (a plain function, as :meth:`StateStore.update` allows) is applied
optimistically: ``WATCH`` the key, read its state (JSON), apply the change here, write it back
in ``MULTI``/``EXEC``, and try again on a conflict, a bounded number of times.

Keys are ``{<prefix>:<scope>}:<policy>``: the part in braces is Redis Cluster's hash tag, so
that the state of one scope lives in one slot. Each write renews a time to live of the
period (limiter), or twice the reset timeout or probe lifetime (circuit), plus a second:
idle state goes away.

Redis unreachable or slow never fails a call. A command that fails or takes longer than
``timeout`` switches the store to per-process state (the same rules, in this process, with
the runner's clock), logs one WARNING for the outage, and leaves Redis alone for
``retry_interval`` seconds before trying again; the first command that succeeds logs the
return (INFO) and the store is shared again. :attr:`RedisStore.status` says which. The
per-process state is swept as the in-memory store's is: idle states go.

What concerns one key is no outage. A key of another type, or a log longer than its limit,
is replaced by the script itself (one WARNING per key), and a custom key that holds no JSON
state is written afresh; every other key stays shared. Errors of the server as a whole
(unreachable, out of memory, a read-only replica, busy with a script) are outages; a script
the server lost (``NOSCRIPT``) is loaded again, and a dropped connection tried once more.

A runner's call with a deadline waits for Redis within it (a report of how an attempt ended
may take a tenth of it more), and goes on in process past that, without an outage: see
:class:`~tdk.runner._store.CallDeadline`. A store made from a URL keeps one client per event
loop (connections belong to the loop they were opened in), and closes it when
``asyncio.run()`` ends that loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypeVar, cast

from tdk._failures.redact import encodable, redact_text
from tdk.runner._breaker import (
    FAILURE,
    NEUTRAL,
    SUCCESS,
    CircuitState,
    Outcome,
    Transition,
    Verdict,
    acquire,
    peek,
    record,
)
from tdk.runner._limiter import admit
from tdk.runner._policies import CircuitBreaker, RateLimit
from tdk.runner._store import CALL_DEADLINE, Entry, InMemoryStore, StateStore

try:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError, ResponseError, WatchError
except ImportError as missing:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "tdk.runner.RedisStore needs the redis package: pip install 'tdk-tools[redis]'"
    ) from missing

from tdk.runner._redis_links import Client, Link, client_from

__all__ = ["RedisStore"]


class _ContentionError(RuntimeError):
    """A custom change that lost to other writers too many times in a row (no outage)."""


logger = logging.getLogger("tdk.runner")

_R = TypeVar("_R")

#: Added to every time to live: state outlives its period by this much before it goes.
_TTL_MARGIN_MS: Final = 1000
#: How many times an optimistic change is tried before it gives up (a ``RuntimeError``).
_MAX_CONFLICTS: Final = 32
_OUTCOMES: Final = {SUCCESS: "success", FAILURE: "failure", NEUTRAL: "neutral"}
_STATES: Final = {state.value: state for state in CircuitState}
_SECOND_US: Final = 1_000_000
#: At most this many circuits remembered as closed and clean (then all are forgotten).
_MAX_QUIET: Final = 4096
_CLOSED: Final = CircuitState.CLOSED
_POLICIES: Final = frozenset({"rate_limit", "circuit"})
_SCRIPTED: Final = (admit, acquire, record, peek)
#: What ``record`` answers for a success that a quiet closed circuit has nothing to do with.
_QUIET: Final = Transition(_CLOSED, _CLOSED, 0)
#: The per-process state is swept of idle states once it holds more than this many (and
#: then when it has doubled since the last sweep).
_SWEEP_AT: Final = 4096
#: At most this many Redis keys remembered as made (then all are forgotten).
_MAX_KEYS: Final = 4096
#: At most this many replaced keys remembered as warned about (then all are forgotten).
_MAX_WARNED: Final = 4096


class RedisStore(StateStore):
    """Runner state on Redis, shared by every runner that uses the same server and prefix.

    ::

        store = RedisStore("redis://localhost:6379/0")
        runner = ToolRunner(toolkit, rate_limit=RateLimit(10, 1.0, scope="github"), store=store)

    ``url_or_client`` is a ``redis://`` URL or a ``redis.asyncio`` client, ``Redis`` or
    ``RedisCluster`` (which the store then uses as it is: keys are hash-tagged, and each
    script touches one key). ``prefix`` starts every key. ``timeout`` bounds each command (and,
    for a URL, connecting): past it, the call goes on with per-process state.
    ``retry_interval`` is how long an outage leaves Redis alone before the next try.

    Made from a URL, the store serves one event loop after another (``asyncio.run()`` per
    request): it opens a client for each loop and closes it when ``asyncio.run()`` ends the
    loop. A client given is bound to the loop it is used in, as ``redis.asyncio`` clients are.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        url_or_client: str | aioredis.Redis | aioredis.RedisCluster,
        *,
        prefix: str = "tdk",
        timeout: float = 0.25,
        retry_interval: float = 1.0,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must be non-empty and without braces, not {prefix!r}")
        for name, value in (("timeout", timeout), ("retry_interval", retry_interval)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")
        if not prefix.isprintable() or encodable(prefix) != prefix:
            raise ValueError(f"prefix must be printable UTF-8 text, not {prefix!r}")
        self._url: Final = url_or_client if isinstance(url_or_client, str) else None
        """The URL the store makes a client of for each event loop (None: a client given)."""
        if isinstance(url_or_client, str):
            client: Client = client_from(url_or_client, timeout)
        elif isinstance(url_or_client, aioredis.Redis | aioredis.RedisCluster):
            client = url_or_client
        else:
            raise TypeError(
                f"RedisStore takes a redis:// URL or a redis.asyncio client, not "
                f"{type(url_or_client).__name__}"
            )
        self.prefix: Final = prefix
        self.timeout: Final = float(timeout)
        self.retry_interval: Final = float(retry_interval)
        self._link = Link(client)
        self._fallback = InMemoryStore()
        self._kept: dict[str, RateLimit | CircuitBreaker] = {}
        """The keys of runner state in ``_fallback`` -> its policy, for sweeping idle ones."""
        self._sweep_at = _SWEEP_AT
        self._quiet: dict[str, int | None] = {}
        """Circuit key -> the generation in which this store last admitted an attempt into a
        closed circuit without failures (see ``_shared``)."""
        self._keys: dict[str, str] = {}
        """State key -> its Redis key, as :meth:`key` made it (each call asks it)."""
        self._warned: set[str] = set()
        """Redis keys replaced, and warned about, by this store."""
        self._down_until: float | None = None
        """While Redis is out: the monotonic time of the next try."""

    @property
    def client(self) -> Client:
        """The ``redis.asyncio`` client the store talks through in the running event loop
        (the one given, or the one the store made from its URL for this loop)."""
        return self._here().client

    @property
    def fallback_states(self) -> int:
        """How many states the store keeps in this process: those changed while Redis was
        out (or while a call's deadline could not wait for it). Idle ones are swept as the
        in-memory store's are, so this stays bounded however many users were served."""
        return self._fallback.size

    @property
    def status(self) -> Literal["shared", "fallback"]:
        """``"shared"`` while state lives on Redis, ``"fallback"`` during an outage (state
        is then per process)."""
        return "shared" if self._down_until is None else "fallback"

    def key(self, key: str) -> str:
        """The Redis key of a state key: a runner's (``tdk:circuit:scope:github`` ->
        ``{tdk:scope:github}:circuit``), or any other (``jobs:1`` ->
        ``{tdk:custom:jobs:1}``). Distinct keys stay distinct."""
        known = self._keys.get(key)
        if known is not None:
            return known
        text = key
        if not text.isascii():  # (a lone surrogate of a user id cannot be sent as it is)
            text = text.encode("utf-8", "backslashreplace").decode()
        parts = text.split(":", 2)
        if len(parts) == 3 and parts[0] == "tdk" and parts[1] in _POLICIES:
            shared = f"{{{self.prefix}:{parts[2]}}}:{parts[1]}"
        else:
            shared = f"{{{self.prefix}:custom:{text}}}"
        if len(self._keys) >= _MAX_KEYS:  # (per-user scopes: bounded, forgets all)
            self._keys.clear()
        self._keys[key] = shared
        return shared

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Apply ``change`` to the state under ``key`` atomically (see
        :meth:`StateStore.update <tdk.runner.StateStore.update>`): on Redis while it
        answers (for a runner's call with a deadline: in time), in this process otherwise.
        tdk's own changes run as their named operations (a script each); any other is
        applied optimistically."""
        answer: Any
        if change is admit:
            answer = await self.admit(key, *args)
        elif change is acquire:
            answer = await self.acquire(key, *args)
        elif change is record:
            answer = await self.record(key, *args)
        elif change is peek:
            answer = await self.peek(key, *args)
        else:

            async def optimistic(link: Link, shared_key: str, timeout: float) -> _R:
                answer, held = await _optimistic(link, shared_key, change, args, timeout)
                self._replaced(shared_key, held)
                return answer

            answer = await self._change(
                key, lambda: self._in_process(key, change, args), optimistic
            )
        return cast(_R, answer)

    async def admit(self, key: str, limit: RateLimit, now: float) -> float:
        """The limiter's admission (see :meth:`StateStore.admit
        <tdk.runner.StateStore.admit>`), one script on Redis."""

        async def shared(link: Link, shared_key: str, timeout: float) -> float:
            return await _scripted(timeout, self._admitted(link, shared_key, limit))

        return await self._change(key, lambda: self._in_process(key, admit, (limit, now)), shared)

    async def acquire(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        probe_lifetime: float | None = None,
    ) -> Verdict:
        """The circuit's ticket or refusal (see :meth:`StateStore.acquire
        <tdk.runner.StateStore.acquire>`), one script on Redis."""

        async def shared(link: Link, shared_key: str, timeout: float) -> Verdict:
            scripted = self._acquired(link, shared_key, policy, probe_lifetime)
            verdict = await _scripted(timeout, scripted)
            self._saw(shared_key, verdict.ticket, verdict.after, verdict.failures)
            return verdict

        args = (policy, clock, probe_lifetime)
        return await self._change(key, lambda: self._in_process(key, acquire, args), shared)

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
        """The circuit's ticket and the limiter's admission of an attempt (see
        :meth:`StateStore.enter <tdk.runner.StateStore.enter>`): one script on Redis, so an
        admitted call costs one round trip. On a Redis Cluster the two keys lie in different
        slots, and the store asks them one after the other."""
        if isinstance(self._link.client, aioredis.RedisCluster):
            return await super().enter(
                key, policy, clock, probe_lifetime, limiter_key=limiter_key, limit=limit
            )

        async def shared(link: Link, shared_key: str, timeout: float) -> Entry:
            log_key = self.key(limiter_key)
            scripted = self._entered(
                link, shared_key, policy, probe_lifetime, log_key=log_key, limit=limit
            )
            entry = await _scripted(timeout, scripted)
            verdict = entry.verdict
            self._saw(shared_key, verdict.ticket, verdict.after, verdict.failures)
            return entry

        def local() -> Entry:
            verdict = self._in_process(key, acquire, (policy, clock, probe_lifetime))
            if verdict.ticket is None:
                return Entry(verdict, None)
            return Entry(verdict, self._in_process(limiter_key, admit, (limit, clock())))

        return await self._change(key, local, shared)

    async def record(
        self,
        key: str,
        policy: CircuitBreaker,
        clock: Callable[[], float],
        ticket: int,
        outcome: Outcome,
    ) -> Transition:
        """The report of how an attempt ended (see :meth:`StateStore.record
        <tdk.runner.StateStore.record>`), one script on Redis, or none for a success in a
        circuit this store saw closed and clean."""
        if outcome is not FAILURE and self._down_until is None:  # (see shared() below)
            call = CALL_DEADLINE.get()
            if (call is None or not call.fell_back) and self._quiet.get(self.key(key)) == ticket:
                return _QUIET

        async def shared(link: Link, shared_key: str, timeout: float) -> Transition:
            if outcome is not FAILURE and self._quiet.get(shared_key) == ticket:
                # A success admitted by a circuit that was closed and clean: it has nothing
                # to reset (a failure another worker reported since is newer than this
                # success, which began before it), so no round trip; the answer is the
                # circuit as this store last saw it. A neutral report of such an attempt
                # (the limiter refused it, the tool failed with a bad argument) changes no
                # closed circuit, nor one that moved on since (a later generation): none
                # either.
                return _QUIET
            scripted = self._recorded(link, shared_key, policy, ticket, outcome)
            moved = await _scripted(timeout, scripted)
            self._saw(shared_key, ticket, moved.after, moved.failures)
            return moved

        args = (policy, clock, ticket, outcome)
        return await self._change(
            key, lambda: self._in_process(key, record, args), shared, report=True
        )

    async def peek(self, key: str, policy: CircuitBreaker, clock: Callable[[], float]) -> bool:
        """Whether the circuit would refuse a call now (see :meth:`StateStore.peek
        <tdk.runner.StateStore.peek>`), one script on Redis that writes nothing."""

        async def shared(link: Link, shared_key: str, timeout: float) -> bool:
            return await _scripted(timeout, self._peeked(link, shared_key, policy))

        return await self._change(key, lambda: self._in_process(key, peek, (policy, clock)), shared)

    async def consume(self, key: str, ttl: float) -> bool:
        """Mark ``key`` used for ``ttl`` seconds (see :meth:`StateStore.consume
        <tdk.runner.StateStore.consume>`): one ``SET NX PX`` on Redis, atomic across every
        replica. Unlike the policies' operations it never falls back to this process: Redis
        unreachable or slow raises, and the resume that asked is refused (asks fail closed)."""
        link = self._here()
        expires_ms = max(1, math.ceil(ttl * 1000))
        first = await asyncio.wait_for(
            link.client.set(self.key(key), b"1", nx=True, px=expires_ms), self.timeout
        )
        return bool(first)

    async def _change(
        self,
        key: str,
        local: Callable[[], _R],
        shared: Callable[[Link, str, float], Awaitable[_R]],
        *,
        report: bool = False,
    ) -> _R:
        """``shared`` (the change of ``key`` on Redis, within a timeout) while Redis answers
        in time; else ``local()``, the change applied to this process's state. ``report``: a
        report of how an attempt ended, which may take a tenth of a call's deadline past
        it."""
        timeout = self.timeout
        call = CALL_DEADLINE.get()  # (a runner's call with a deadline, in progress)
        if call is not None:
            if call.fell_back:  # (its circuit's ticket, say, came from this process)
                return local()
            # Half of what the deadline leaves at most: the attempt (or the retry) keeps the
            # other half. A report of how an attempt ended gets a tenth of the deadline even
            # when it is spent: a server that answers gets it (an attempt that ran into the
            # deadline is a failure the circuit is for), one that does not costs little.
            half = (call.ends_at - asyncio.get_running_loop().time()) / 2
            timeout = min(timeout, max(half, call.length / 10) if report else half)
            if timeout <= 0:
                call.fell_back = True
                return local()
        down_until = self._down_until
        if down_until is not None:
            now = time.monotonic()
            if now < down_until:
                return local()
            self._down_until = now + self.retry_interval  # this call tries; the others wait
        try:
            answer = await shared(self._here(), self.key(key), timeout)
        except _ContentionError:
            raise
        except (RedisError, OSError, RuntimeError) as failure:
            # (RuntimeError: a client given, used from another event loop than its own)
            if call is not None and timeout < self.timeout and type(failure) is TimeoutError:
                call.fell_back = True  # the call's deadline, not the store's timeout: no outage
            else:
                self._went_down(failure)
            return local()
        if down_until is not None:
            self._down_until = None
            logger.info("Redis answers again: runner state is shared again")
        return answer

    async def aclose(self) -> None:
        """Close the client's connections (a client the store made closes by itself when
        ``asyncio.run()`` ends its loop)."""
        link = self._link
        if self._url is None:
            await link.client.aclose()
        elif link.holder is not None and link.loop is asyncio.get_running_loop():
            await link.holder.aclose()  # (which closes the client)
            self._link = Link(client_from(self._url, self.timeout))  # for the next use

    def _here(self) -> Link:
        """The store's client and scripts for the running event loop: the one given, or one
        made from the URL for each loop (connections belong to the loop they were opened in)."""
        link = self._link
        if self._url is None:
            return link
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (outside any loop: the last one's)
            return link
        if link.loop is not loop:
            if link.loop is not None:  # another loop's: this loop gets a client of its own
                link = self._link = Link(client_from(self._url, self.timeout))
            link.bind(loop)
        return link

    def _in_process(self, key: str, change: Callable[..., tuple[Any, _R]], args: Any) -> _R:
        """``change`` applied to this process's state (during an outage, or for a call whose
        deadline could not wait), which is swept of idle states as the in-memory store is."""
        fallback = self._fallback
        answer = fallback.apply(key, change, *args)
        kept = self._kept
        if change in _SCRIPTED and key not in kept and fallback.get(key) is not None:
            kept[key] = args[0]
            if len(kept) > self._sweep_at:
                now = args[1] if change is admit else args[1]()  # (the runner's clock)
                fallback.forget_idle(kept, now)
                self._sweep_at = max(_SWEEP_AT, 2 * len(kept))
        return answer

    def _replaced(self, key: str, held: bytes | str) -> None:
        """Note that a script replaced ``key``, which held ``held`` (nothing: it did not):
        one WARNING per key."""
        if not held or key in self._warned:
            return
        if len(self._warned) >= _MAX_WARNED:
            self._warned.clear()
        self._warned.add(key)
        text = held.decode(errors="replace") if isinstance(held, bytes) else held
        logger.warning(
            "Redis key %s held no state of this store (%s): replaced; the other keys stay shared",
            redact_text(key, limit=200),
            redact_text(text, limit=60),
        )

    def _went_down(self, failure: BaseException) -> None:
        if self._down_until is None:  # one WARNING per outage, whatever the calls in flight
            detail = redact_text(str(failure), limit=200)
            logger.warning(
                "Redis failed (%s): runner state is per process until it answers",
                f"{type(failure).__name__}: {detail}" if detail else type(failure).__name__,
            )
        self._down_until = time.monotonic() + self.retry_interval

    def _saw(self, key: str, ticket: int | None, after: CircuitState, failures: int) -> None:
        """Remember whether the circuit under ``key`` is closed and clean as of ``ticket``
        (a success reported in that generation then needs no round trip)."""
        if after is _CLOSED and failures == 0:
            if len(self._quiet) >= _MAX_QUIET:  # (per-user scopes: bounded, forgets all)
                self._quiet.clear()
            self._quiet[key] = ticket
        else:
            self._quiet.pop(key, None)

    async def _peeked(self, link: Link, key: str, policy: CircuitBreaker) -> bool:
        refuses, held = await link.peek(keys=[key], args=_peek_args(policy))
        self._replaced(key, held)
        return bool(refuses)

    async def _admitted(self, link: Link, key: str, limit: RateLimit) -> float:
        answer = await link.admit(keys=[key], args=_admit_args(limit))
        return self._wait(key, limit, answer)

    async def _acquired(
        self, link: Link, key: str, policy: CircuitBreaker, probe_lifetime: float | None
    ) -> Verdict:
        answer = await link.acquire(keys=[key], args=_acquire_args(policy, probe_lifetime))
        return self._verdict(key, answer)

    async def _entered(
        self,
        link: Link,
        key: str,
        policy: CircuitBreaker,
        probe_lifetime: float | None,
        *,
        log_key: str,
        limit: RateLimit,
    ) -> Entry:
        args = [_acquire_spec(policy, probe_lifetime), _admit_spec(limit), secrets.token_hex(4)]
        answer = await link.enter(keys=[key, log_key], args=args)
        if len(answer) == 2:  # the common answer: a closed circuit's ticket, admitted
            ticket, failures = answer
            return Entry(Verdict(int(ticket), _CLOSED, _CLOSED, int(failures), None), 0.0)
        verdict = self._verdict(key, answer[:6])
        if verdict.ticket is None:
            return Entry(verdict, None)
        return Entry(verdict, self._wait(log_key, limit, answer[6:]))

    def _wait(self, key: str, limit: RateLimit, answer: list[Any]) -> float:
        """The limiter's answer, in seconds, from a script's ``{wait (us), replaced}``."""
        wait, held = answer
        self._replaced(key, held)
        waited = int(wait)
        if not 0 <= waited <= _us(limit.period):  # (the script never answers another)
            raise ValueError(waited)
        return waited / _SECOND_US

    def _verdict(self, key: str, answer: list[Any]) -> Verdict:
        """The circuit's verdict from a script's ``{ticket, before, after, failures,
        retry_after (us), replaced}``."""
        ticket, before, after, failures, wait, held = answer
        self._replaced(key, held)
        return Verdict(
            None if int(ticket) < 0 else int(ticket),
            _state(before),
            _state(after),
            int(failures),
            None if int(wait) < 0 else int(wait) / _SECOND_US,
        )

    async def _recorded(
        self, link: Link, key: str, policy: CircuitBreaker, generation: int, outcome: Outcome
    ) -> Transition:
        before, after, failures, held = await link.record(
            keys=[key],
            args=[
                generation,
                _OUTCOMES[outcome],
                policy.failure_threshold,
                _ttl_ms(2 * policy.reset_timeout),
            ],
        )
        self._replaced(key, held)
        return Transition(_state(before), _state(after), int(failures))


async def _optimistic(
    link: Link,
    key: str,
    change: Callable[..., tuple[Any, _R]],
    args: tuple[Any, ...],
    timeout: float,
) -> tuple[_R, str]:
    """``change`` applied with ``WATCH``/``MULTI``: the state as JSON, tried again after a
    short jittered pause on a conflict, at most ``_MAX_CONFLICTS`` times (then a
    ``RuntimeError``: contention is no outage). A key that holds no JSON (a value of another
    type, or text JSON cannot read) is read as no state, and written afresh. The answer, and
    what the key held instead of a state ('' when it held one, or nothing)."""
    pause = 0.001
    for _ in range(_MAX_CONFLICTS):
        try:
            async with (
                asyncio.timeout(timeout),  # (the pipeline's UNWATCH on exit too)
                link.client.pipeline(transaction=True) as pipe,
            ):
                await pipe.watch(key)
                old, held = await _json_state(pipe, key)
                state, answer = change(old, *args)
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.set(key, json.dumps(state, default=_json_value))
                await pipe.execute()
            return answer, held
        except WatchError:  # another worker wrote first: again, after a pause
            await asyncio.sleep(random.uniform(0, pause))  # noqa: S311 (jitter)
            pause = min(pause * 2, 0.1)
    raise _ContentionError(
        f"the state under {key!r} changed {_MAX_CONFLICTS} times while this change was "
        "applied: too many workers change it at once"
    )


async def _scripted(timeout: float, script: Awaitable[_R]) -> _R:
    """The answer of a tdk script within ``timeout``; a reply of another shape (a proxy, a
    server that is not Redis) is no answer, as an outage is."""
    try:
        async with asyncio.timeout(timeout):
            return await script
    except (TypeError, ValueError, IndexError) as bad:
        raise RedisError(f"unexpected reply to a tdk script ({type(bad).__name__})") from bad


async def _json_state(pipe: Any, key: str) -> tuple[Any, str]:
    """The JSON state under ``key``, read through a pipeline that watches it, and what the
    key held instead ('' when it held JSON or nothing: None is no state)."""
    try:
        stored = await pipe.get(key)
    except ResponseError as refused:
        if not str(refused).startswith("WRONGTYPE"):
            raise
        return None, "another type"
    if stored is None:
        return None, ""
    try:
        return json.loads(stored), ""
    except (ValueError, RecursionError):  # (not JSON, not UTF-8, or nested past reading)
        return None, "text, not JSON"


#: The longest duration sent to Redis: a century (a policy may say 1e300 s, and Redis refuses
#: an expiry past its clock's range, which would send every key to the fallback).
_LONGEST_SECONDS: Final = 100 * 365 * 86_400


def _us(seconds: float) -> int:
    return max(1, math.ceil(min(seconds, _LONGEST_SECONDS) * _SECOND_US))


def _ttl_ms(seconds: float) -> int:
    return math.ceil(min(seconds, _LONGEST_SECONDS) * 1000) + _TTL_MARGIN_MS


def _admit_args(limit: RateLimit) -> list[int | str]:
    """ADMIT's arguments: calls, period (us), a unique member suffix, time to live (ms)."""
    return [limit.calls, _us(limit.period), secrets.token_hex(4), _ttl_ms(limit.period)]


def _acquire_args(policy: CircuitBreaker, probe_lifetime: float | None) -> list[int]:
    """ACQUIRE's arguments: reset timeout (us), probes at most, probe lifetime (us), time to
    live (ms)."""
    lifetime = policy.reset_timeout if probe_lifetime is None else probe_lifetime
    return [
        _us(policy.reset_timeout),
        policy.half_open_max_calls,
        _us(lifetime),
        _ttl_ms(2 * max(policy.reset_timeout, lifetime)),
    ]


@functools.lru_cache(maxsize=256)
def _acquire_spec(policy: CircuitBreaker, probe_lifetime: float | None) -> str:
    """ACQUIRE's arguments as ENTER takes them: one text (the same for every call)."""
    return ":".join(map(str, _acquire_args(policy, probe_lifetime)))


@functools.lru_cache(maxsize=256)
def _admit_spec(limit: RateLimit) -> str:
    """ADMIT's calls, period (us) and time to live (ms), as ENTER takes them: one text."""
    return f"{limit.calls}:{_us(limit.period)}:{_ttl_ms(limit.period)}"


def _peek_args(policy: CircuitBreaker) -> list[int]:
    return [_us(policy.reset_timeout), policy.half_open_max_calls]


def _state(name: bytes | str) -> CircuitState:
    text = name.decode() if isinstance(name, bytes) else name
    return _STATES.get(text, CircuitState.CLOSED)


def _json_value(value: object) -> Any:
    """What JSON writes for a state part it has no rule for: a sequence (a ``deque``) as a
    list, a dataclass by its fields."""
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return {name: getattr(value, name) for name in fields}
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"a {type(value).__name__} cannot be stored as JSON") from None
