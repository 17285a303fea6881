"""``RedisStore``: limiter and circuit state shared by runners in many processes, on Redis.

tdk's own state changes (the limiter's ``admit``, the circuit's ``acquire``, ``record`` and
``peek``) run as Lua scripts (see ``_redis_scripts``), one round trip each, registered once and
run with ``EVALSHA``, timed by the server's ``TIME``. Any other change (a plain function, as
:meth:`StateStore.update` allows) is applied optimistically: ``WATCH`` the key, read its
state (JSON), apply the change here, write it back in ``MULTI``/``EXEC``, and try again on a
conflict, a bounded number of times.

Keys are ``{<prefix>:<scope>}:<policy>``: the part in braces is Redis Cluster's hash tag, so
that the state of one scope lives in one slot. Each write renews a time to live of the
period (limiter), or twice the reset timeout or probe lifetime (circuit), plus a second:
idle state goes away.

Redis unreachable or slow never fails a call. A command that fails or takes longer than
``timeout`` switches the store to per-process state (the same rules, in this process, with
the runner's clock), logs one WARNING for the outage, and leaves Redis alone for
``retry_interval`` seconds before trying again; the first command that succeeds logs the
return (INFO) and the store is shared again. :attr:`RedisStore.status` says which.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import secrets
import time
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from tdk._redact import encodable, redact_text
from tdk.runner._breaker import (
    FAILURE,
    NEUTRAL,
    SUCCESS,
    CircuitState,
    Outcome,
    acquire,
    peek,
    record,
)
from tdk.runner._limiter import admit
from tdk.runner._policies import CircuitBreaker, RateLimit
from tdk.runner._redis_scripts import ACQUIRE, ADMIT, PEEK, RECORD
from tdk.runner._store import InMemoryStore

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError, WatchError
except ImportError as missing:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "tdk.runner.RedisStore needs the redis package: pip install 'tdk-tools[redis]'"
    ) from missing

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
_QUIET: Final = (_CLOSED, _CLOSED, 0)


class RedisStore:
    """Runner state on Redis, shared by every runner that uses the same server and prefix.

    ::

        store = RedisStore("redis://localhost:6379/0")
        runner = ToolRunner(toolkit, rate_limit=RateLimit(10, 1.0, scope="github"), store=store)

    ``url_or_client`` is a ``redis://`` URL or a ``redis.asyncio`` client, ``Redis`` or
    ``RedisCluster`` (which the store then uses as it is: keys are hash-tagged, and each
    script touches one key). ``prefix`` starts every key. ``timeout`` bounds each command (and,
    for a URL, connecting): past it, the call goes on with per-process state.
    ``retry_interval`` is how long an outage leaves Redis alone before the next try.

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
        client: aioredis.Redis | aioredis.RedisCluster
        if not prefix.isprintable() or encodable(prefix) != prefix:
            raise ValueError(f"prefix must be printable UTF-8 text, not {prefix!r}")
        if isinstance(url_or_client, str):
            # A pool that waits (up to the timeout) for a free connection, rather than fail
            # at once: a burst of calls is no outage. A dropped connection (an idle one a
            # proxy closed) is tried once more on a fresh one before it counts as one.
            pool = aioredis.BlockingConnectionPool.from_url(
                url_or_client,
                timeout=timeout,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 1),
                retry_on_error=[RedisConnectionError],
            )
            client = aioredis.Redis.from_pool(pool)  # (closed with the client)
        elif isinstance(url_or_client, aioredis.Redis | aioredis.RedisCluster):
            client = url_or_client
        else:
            raise TypeError(
                f"RedisStore takes a redis:// URL or a redis.asyncio client, not "
                f"{type(url_or_client).__name__}"
            )
        self.client: Final = client
        """The ``redis.asyncio`` client the store talks through."""
        self.prefix: Final = prefix
        self.timeout: Final = float(timeout)
        self.retry_interval: Final = float(retry_interval)
        self._admit = client.register_script(ADMIT)
        self._acquire = client.register_script(ACQUIRE)
        self._record = client.register_script(RECORD)
        self._peek = client.register_script(PEEK)
        self._fallback = InMemoryStore()
        self._quiet: dict[str, int | None] = {}
        """Circuit key -> the generation in which this store last admitted an attempt into a
        closed circuit without failures (see ``_shared``)."""
        self._down_until: float | None = None
        """While Redis is out: the monotonic time of the next try."""

    @property
    def status(self) -> Literal["shared", "fallback"]:
        """``"shared"`` while state lives on Redis, ``"fallback"`` during an outage (state
        is then per process)."""
        return "shared" if self._down_until is None else "fallback"

    def key(self, key: str) -> str:
        """The Redis key of a state key: a runner's (``tdk:circuit:scope:github`` ->
        ``{tdk:scope:github}:circuit``), or any other (``jobs:1`` ->
        ``{tdk:custom:jobs:1}``). Distinct keys stay distinct."""
        if not key.isascii():  # (a lone surrogate of a user id cannot be sent as it is)
            key = key.encode("utf-8", "backslashreplace").decode()
        parts = key.split(":", 2)
        if len(parts) == 3 and parts[0] == "tdk" and parts[1] in _POLICIES:
            return f"{{{self.prefix}:{parts[2]}}}:{parts[1]}"
        return f"{{{self.prefix}:custom:{key}}}"

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        """Apply ``change`` to the state under ``key`` atomically (see
        :meth:`StateStore.update <tdk.runner.StateStore.update>`): on Redis while it
        answers, in this process during an outage."""
        down_until = self._down_until
        if down_until is not None:
            now = time.monotonic()
            if now < down_until:
                return self._fallback.apply(key, change, *args)
            self._down_until = now + self.retry_interval  # this call tries; the others wait
        try:
            answer: _R = await self._shared(self.key(key), change, args)
        except _ContentionError:
            raise
        except (RedisError, OSError, TimeoutError, RuntimeError) as failure:
            # (RuntimeError: the client used from another event loop than its own)
            self._went_down(failure)
            return self._fallback.apply(key, change, *args)
        if down_until is not None:
            self._down_until = None
            logger.info("Redis answers again: runner state is shared again")
        return answer

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()

    def _went_down(self, failure: BaseException) -> None:
        if self._down_until is None:  # one WARNING per outage, whatever the calls in flight
            detail = redact_text(str(failure), limit=200)
            logger.warning(
                "Redis failed (%s): runner state is per process until it answers",
                f"{type(failure).__name__}: {detail}" if detail else type(failure).__name__,
            )
        self._down_until = time.monotonic() + self.retry_interval

    async def _shared(self, key: str, change: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if change is record and args[3] is SUCCESS and self._quiet.get(key) == args[2]:
            # A success admitted by a circuit that was closed and clean: it has nothing to
            # reset (a failure another worker reported since is newer than this success,
            # which began before it), so no round trip; the answer is the circuit as this
            # store last saw it.
            return _QUIET
        if change not in _SCRIPTED:
            return await self._optimistic(key, change, args)
        try:
            async with asyncio.timeout(self.timeout):
                if change is admit:
                    return await self._admitted(key, args[0])
                if change is peek:
                    return bool(await self._peek(keys=[key], args=_peek_args(args[0])))
                if change is acquire:
                    probe_lifetime = args[2] if len(args) > 2 else None
                    verdict = await self._acquired(key, args[0], probe_lifetime)
                    generation, after, failures = verdict[0], verdict[2], verdict[3]
                    answer: Any = verdict
                else:
                    answer = await self._recorded(key, args[0], args[2], args[3])
                    generation, after, failures = args[2], answer[1], answer[2]
        except (TypeError, ValueError, IndexError) as bad:  # a reply of another shape (a proxy,
            # a server that is not Redis): no answer, as an outage is
            raise RedisError(f"unexpected reply to a tdk script ({type(bad).__name__})") from bad
        if after is _CLOSED and failures == 0:
            if len(self._quiet) >= _MAX_QUIET:  # (per-user scopes: bounded, forgets all)
                self._quiet.clear()
            self._quiet[key] = generation
        else:
            self._quiet.pop(key, None)
        return answer

    async def _admitted(self, key: str, limit: RateLimit) -> float:
        period_us = _us(limit.period)
        nonce = secrets.token_hex(4)
        wait = await self._admit(
            keys=[key], args=[limit.calls, period_us, nonce, _ttl_ms(limit.period)]
        )
        waited = int(wait)
        if not 0 <= waited <= period_us:  # (the script never answers another: no answer)
            raise ValueError(waited)
        return waited / _SECOND_US

    async def _acquired(
        self, key: str, policy: CircuitBreaker, probe_lifetime: float | None
    ) -> tuple[int | None, CircuitState, CircuitState, int, float | None]:
        lifetime = policy.reset_timeout if probe_lifetime is None else probe_lifetime
        ticket, before, after, failures, wait = await self._acquire(
            keys=[key],
            args=[
                _us(policy.reset_timeout),
                policy.half_open_max_calls,
                _us(lifetime),
                _ttl_ms(2 * max(policy.reset_timeout, lifetime)),
            ],
        )
        return (
            None if int(ticket) < 0 else int(ticket),
            _state(before),
            _state(after),
            int(failures),
            None if int(wait) < 0 else int(wait) / _SECOND_US,
        )

    async def _recorded(
        self, key: str, policy: CircuitBreaker, generation: int, outcome: Outcome
    ) -> tuple[CircuitState, CircuitState, int]:
        before, after, failures = await self._record(
            keys=[key],
            args=[
                generation,
                _OUTCOMES[outcome],
                policy.failure_threshold,
                _ttl_ms(2 * policy.reset_timeout),
            ],
        )
        return _state(before), _state(after), int(failures)

    async def _optimistic(
        self, key: str, change: Callable[..., tuple[Any, _R]], args: tuple[Any, ...]
    ) -> _R:
        """``change`` applied with ``WATCH``/``MULTI``: the state as JSON, tried again after
        a short jittered pause on a conflict, at most ``_MAX_CONFLICTS`` times (then a
        ``RuntimeError``: contention is no outage)."""
        pause = 0.001
        for _ in range(_MAX_CONFLICTS):
            try:
                async with (
                    asyncio.timeout(self.timeout),  # (the pipeline's UNWATCH on exit too)
                    self.client.pipeline(transaction=True) as pipe,
                ):
                    await pipe.watch(key)
                    stored = await pipe.get(key)
                    old = None if stored is None else json.loads(stored)
                    state, answer = change(old, *args)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(key, json.dumps(state, default=_json_value))
                    await pipe.execute()
                return answer
            except WatchError:  # another worker wrote first: again, after a pause
                await asyncio.sleep(random.uniform(0, pause))  # noqa: S311 (jitter)
                pause = min(pause * 2, 0.1)
        raise _ContentionError(
            f"the state under {key!r} changed {_MAX_CONFLICTS} times while this change was "
            "applied: too many workers change it at once"
        )


#: The longest duration sent to Redis: a century (a policy may say 1e300 s, and Redis refuses
#: an expiry past its clock's range, which would send every key to the fallback).
_LONGEST_SECONDS: Final = 100 * 365 * 86_400


def _us(seconds: float) -> int:
    return max(1, math.ceil(min(seconds, _LONGEST_SECONDS) * _SECOND_US))


def _ttl_ms(seconds: float) -> int:
    return math.ceil(min(seconds, _LONGEST_SECONDS) * 1000) + _TTL_MARGIN_MS


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
