"""Spans that end while a test runs, for ``tdk_secrets`` (extra ``testing``: the OTel SDK).

tdk records spans only when the application has set a tracer provider, and OpenTelemetry's
public setter works once per process. So for the length of one block:

- when a provider with ``add_span_processor`` (the SDK's) is set, a forwarding processor is
  added to it (once per provider; it forwards only while a block listens);
- when none is set, an SDK ``TracerProvider`` is put into the API's own global
  (``opentelemetry.trace._TRACER_PROVIDER``, with its ``_TRACER_PROVIDER_SET_ONCE`` guard;
  checked on opentelemetry-api 1.45.2) and the previous values are put back afterwards. A
  ``ProxyTracer`` (what ``trace.get_tracer()`` returns at import time, in a tool module or in
  the ``mcp`` SDK) keeps the first real tracer it sees for good: those bound to the block's
  provider are unbound at the end (``_real_tracer``), so that nothing records into it later.

Either way the block gets False when the SDK is not installed, or the provider set cannot
take a processor: spans are then not watched. OpenTelemetry is imported by
:func:`captured_spans` (first use only), never by importing this module.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["captured_spans"]

#: The forwarding processor added to each provider an application set, by provider.
_FORWARDERS: Final[weakref.WeakKeyDictionary[Any, Any]] = weakref.WeakKeyDictionary()


class _Listeners:
    """Who hears the spans that end (a processor's ``on_end``), while anyone listens."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[Any], None]] = []

    def on_end(self, span: Any) -> None:
        for listener in list(self.listeners):
            listener(span)


def _processor(listeners: _Listeners) -> Any:
    """An SDK span processor that forwards each ended span to ``listeners``."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Forward(SpanProcessor):
        def on_end(self, span: Any) -> None:
            listeners.on_end(span)

    return Forward()


@contextlib.contextmanager
def captured_spans(on_end: Callable[[Any], None]) -> Iterator[bool]:
    """While the block runs, ``on_end(span)`` for each span that ends (an SDK
    ``ReadableSpan``); the block gets whether spans are watched at all."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        yield False
        return
    current = getattr(trace, "_TRACER_PROVIDER", None)
    if current is not None or not hasattr(trace, "_TRACER_PROVIDER_SET_ONCE"):
        with _listening_to(current, on_end) as watched:
            yield watched
        return
    listeners = _Listeners()
    listeners.listeners.append(on_end)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(_processor(listeners))
    saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER = provider
    trace._TRACER_PROVIDER_SET_ONCE = _used_guard()
    try:
        yield True
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        listeners.listeners.clear()
        _unbind_proxy_tracers(provider)
        provider.shutdown()


@contextlib.contextmanager
def _listening_to(provider: Any, on_end: Callable[[Any], None]) -> Iterator[bool]:
    """Listen to the spans of the provider an application set, if it takes processors."""
    if provider is None or not hasattr(provider, "add_span_processor"):
        yield False
        return
    listeners = _FORWARDERS.get(provider)
    if listeners is None:
        listeners = _FORWARDERS[provider] = _Listeners()
        provider.add_span_processor(_processor(listeners))
    listeners.listeners.append(on_end)
    try:
        yield True
    finally:
        listeners.listeners.remove(on_end)


def _used_guard() -> Any:
    """A ``_TRACER_PROVIDER_SET_ONCE`` guard already used, as after the public setter: a
    stray ``set_tracer_provider`` warns while the block's provider is in place."""
    from opentelemetry.util._once import Once

    guard = Once()
    guard.do_once(lambda: None)
    return guard


def _unbind_proxy_tracers(provider: Any) -> None:
    """Forget the real tracer each ``ProxyTracer`` took from ``provider``."""
    from opentelemetry.trace import ProxyTracer

    processor = getattr(provider, "_active_span_processor", None)
    for each in gc.get_objects():
        if type(each) is ProxyTracer:
            real = getattr(each, "_real_tracer", None)
            if real is not None and getattr(real, "span_processor", None) is processor:
                each._real_tracer = None
