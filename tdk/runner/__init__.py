"""The runner: retries, rate limits, circuit breakers and bulkheads, driven by the errors.

:class:`ToolRunner` runs a toolkit's tools under the policies :class:`RetryPolicy`,
:class:`RateLimit`, :class:`CircuitBreaker` and :class:`Bulkhead` (the first five names are
also importable from ``tdk``). Limiter and circuit state lives in a :class:`StateStore`; the
default :class:`InMemoryStore` serves one process. See ``docs/runner.md``.
"""

from tdk._call import ToolCall
from tdk.runner._breaker import CircuitState
from tdk.runner._config import Policies
from tdk.runner._policies import Bulkhead, CircuitBreaker, RateLimit, RetryPolicy
from tdk.runner._runner import ToolRunner
from tdk.runner._stats import RunnerStats
from tdk.runner._store import InMemoryStore, StateStore

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
