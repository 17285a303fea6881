"""Every read of another library's internals, in one place.

tdk reads a few private names of the libraries it runs on, each to make the path of every
call cheaper than the public API allows (and one, for the testing kit, to watch spans without
setting a provider for good). Each read lives in one module here, one library's
internal per module (so that ``import tdk`` and its core modules never import an extra):

- :mod:`~tdk._compat.running_task`: asyncio's table of the running tasks (Python 3.11);
- :mod:`~tdk._compat.pydantic_slots`: the slots of pydantic's ``BaseModel``, set through
  their own descriptors, and the decorators a model records;
- :mod:`~tdk._compat.httpx_auth`: the auth class httpx wraps a plain callable in;
- :mod:`~tdk._compat.otel_globals`: where OpenTelemetry's API keeps the providers set, and
  its stand-in meter provider (extra ``otel``: imported on first use only);
- :mod:`~tdk._compat.frames`: the frame that applied a decorator (``sys._getframe``);
- :mod:`~tdk._compat.otel_capture`: OpenTelemetry's global tracer provider, swapped for the
  length of a ``tdk_secrets`` test (``tdk.testing``; extra ``testing``), and the proxy tracers
  bound to it.

Every accessor's docstring names the internal it reads, the versions it was checked on, and its
public fallback: when a new version moves or drops the internal, the accessor answers through
the public API, slower but the same. ``tests/project/test_compat.py`` fails when an internal
moves or changes meaning (so the fallback is never taken silently in the versions tdk is tested
on), and runs each fallback; ``tests/project/test_structure.py`` fails when a module outside
this package reads another library's private name. What each internal saves is measured in
``bench/README.md`` ("Where the microseconds went").
"""
