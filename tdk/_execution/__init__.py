"""Execution: one call of a tool, from the arguments a model sent to its :class:`~tdk.ToolResult`.

The path of a call, in the order it meets these modules:

- :mod:`~tdk._execution.call_scope`: the front door of every call (a tool, a toolkit, the
  runner, a host): it makes each result, and every failure result, in one place.
- :mod:`~tdk._execution.arguments`: the arguments validated, and described when wrong.
- :mod:`~tdk._execution.execute`: the body run, its value checked and serialised.
- :mod:`~tdk._execution.threads` and :mod:`~tdk._execution.time_limit`: sync bodies in
  worker threads, and the time limit on every body.
- :mod:`~tdk._execution.exchanges` and :mod:`~tdk._execution.writes`: what the body's
  requests may have done upstream, and whether a failure may be repeated.
- :mod:`~tdk._execution.result` and :mod:`~tdk._execution.model_text`: the result and what a
  model reads of it.
- :mod:`~tdk._execution.telemetry`: the span and metrics of the call (extra ``otel``).
- :mod:`~tdk._execution.loop`: the event loops of the sync API.

The records a call carries: :mod:`~tdk._execution.context` (``ToolContext``),
:mod:`~tdk._execution.call` (``ToolCall``), :mod:`~tdk._execution.default` (``DEFAULT``) and
:mod:`~tdk._execution.seconds` (durations given by users). This file imports nothing.
"""
