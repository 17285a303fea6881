"""Where OpenTelemetry's API keeps the providers an application set (extra ``otel``).

tdk asks on every call whether a tracer or meter provider is set. The API's functions answer
through a stand-in that reads ``os.environ`` each time none is set; the API's own module
globals answer in two reads. OpenTelemetry is imported by :func:`unset_check` (first use
only), never by importing this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["stand_in_meters", "unset_check"]

#: The class of the meter provider ``get_meter_provider()`` returns before one is set.
_PROXY_METERS = "_ProxyMeterProvider"


def unset_check() -> Callable[[], bool] | None:
    """A function telling that neither provider is set: it reads ``_TRACER_PROVIDER`` of
    ``opentelemetry.trace`` and ``_METER_PROVIDER`` of ``opentelemetry.metrics._internal``
    (None until ``set_tracer_provider``/``set_meter_provider``; checked on opentelemetry-api
    1.45.2). None when the API is not installed or keeps them elsewhere: the caller then
    asks ``get_tracer_provider()`` and ``get_meter_provider()`` on every call (slower, the
    same answer)."""
    trace: Any = None
    metrics_state: Any = None
    with contextlib.suppress(Exception):  # not installed, installed broken, or moved
        from opentelemetry import trace
        from opentelemetry.metrics import _internal as metrics_state
    if not (hasattr(trace, "_TRACER_PROVIDER") and hasattr(metrics_state, "_METER_PROVIDER")):
        return None

    def unset() -> bool:
        return trace._TRACER_PROVIDER is None and metrics_state._METER_PROVIDER is None

    return unset


def stand_in_meters(meters: object) -> bool:
    """Whether ``meters`` is the stand-in ``get_meter_provider()`` returns while none is set
    (``opentelemetry.metrics._internal._ProxyMeterProvider``, which the API does not export;
    checked on opentelemetry-api 1.45.2). Told by its class's name: should the class be
    renamed, the stand-in is taken for a set provider, and tdk records through it instruments
    that record nothing until a provider is set (their cost, never a wrong record)."""
    return type(meters).__name__ == _PROXY_METERS
