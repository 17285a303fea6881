"""The runner: retries, rate limits, circuit breakers and bulkheads, driven by the errors.

:class:`ToolRunner` runs a toolkit's tools under the policies :class:`RetryPolicy`,
:class:`RateLimit`, :class:`CircuitBreaker` and :class:`Bulkhead` (the first five names are
also importable from ``tdk``). Limiter and circuit state lives in a :class:`StateStore`; the
default :class:`InMemoryStore` serves one process; :class:`RedisStore` (extra
``tdk-tools[redis]``, imported on first use) shares it between processes. See
``docs/runner.md`` and ``docs/scaling.md``.
"""

from typing import TYPE_CHECKING

from tdk._execution.call import ToolCall
from tdk.runner._breaker import CircuitState
from tdk.runner._config import Policies
from tdk.runner._policies import Bulkhead, CircuitBreaker, RateLimit, RetryPolicy
from tdk.runner._runner import ToolRunner
from tdk.runner._stats import RunnerStats
from tdk.runner._store import InMemoryStore, StateStore

if TYPE_CHECKING:
    from tdk.runner._redis import RedisStore as RedisStore


def __getattr__(name: str) -> object:
    # ``RedisStore`` imports redis: loaded on first use, and left out of ``__all__`` (so that
    # ``from tdk.runner import *`` works without the extra).
    if name == "RedisStore":
        from tdk.runner._redis import RedisStore as RedisStore

        globals()[name] = RedisStore
        return RedisStore
    raise AttributeError(f"module 'tdk.runner' has no attribute {name!r}")


__all__ = [
    "Bulkhead",
    "CircuitBreaker",
    "CircuitState",
    "InMemoryStore",
    "Policies",
    "RateLimit",
    "RetryPolicy",
    "RunnerStats",
    "StateStore",
    "ToolCall",
    "ToolRunner",
]
