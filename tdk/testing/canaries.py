"""``tdk_secrets``: canary secrets planted where a tool reads its secrets, and every place one
of them reached.

A canary is a random value standing in for a secret: in a :class:`~tdk.ToolContext`
(:meth:`Canaries.context`, for every secret the tools require, and its ``auth_token``) or in
the environment (:meth:`Canaries.env`, as ``tdk serve`` reads them). While the test runs,
the canaries are looked for in every sink a secret must never reach:

- **log record**: every record any logger writes (the root logger is set to DEBUG for the
  test, so that a leak at any level shows): its message, exception text and extra fields;
- **span**: every OpenTelemetry span that ends (name, attributes, events, status), when the
  OTel SDK is installed (see :mod:`tdk._compat.otel_capture`);
- **result**: each ``ToolResult`` run by :meth:`Canaries.run`, or given to
  :meth:`Canaries.check`;
- **MCP answer**: each answer the ``tdk_mcp`` client got;
- **model request**: what the ``scripted_model`` fake API was sent back (tool results);
- and whatever a test hands to :meth:`Canaries.check` with a sink name of its own.

The fixture fails the test naming every sink a canary reached (not only the first), each
with where in it and which secret's canary it was.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
import logging
import os
import secrets as random_values
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from tdk._compat.otel_capture import captured_spans
from tdk._define.definition import ToolDefinition
from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit
from tdk._execution.context import ToolContext
from tdk._execution.result import ToolResult
from tdk.runner import ToolRunner

__all__ = ["ECHO_MARKER", "Canaries", "Leak", "witness"]

#: A text ``fuzz()`` draws among string arguments: it must never come back in an error.
ECHO_MARKER: Final = "tdk-echo-marker-7f3c"

#: The name under which the canary of ``ToolContext.auth_token`` is reported.
AUTH_TOKEN: Final = "auth_token"  # noqa: S105 (a name, not a value)
#: How many places in one value are named (the first ones found).
_MAX_PLACES: Final = 3
#: How deep :func:`_places` looks into nested data.
_MAX_DEPTH: Final = 64
#: The attributes every log record has; any other is an ``extra`` field, and is looked at.
_RECORD_FIELDS: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}

#: What :meth:`Canaries.context` and :meth:`Canaries.env` take: secret names, or tools whose
#: required secrets are meant.
Source = str | Toolkit | ToolRunner | Tool[..., Any] | ToolDefinition


@dataclass(frozen=True, slots=True)
class Leak:
    """A canary found in a sink."""

    sink: str
    """Where it was found: ``log record``, ``span``, ``result``, ``MCP answer``..."""
    where: str
    """Which one, and where in it."""
    secret: str
    """The name of the secret whose canary it was."""

    def __str__(self) -> str:
        return f"{self.sink}: {self.where} (the canary of {self.secret})"


#: The canaries listening now (a test's ``tdk_secrets``): where the kit's other parts report
#: what they see (:func:`witness`).
_LISTENING: list[Canaries] = []


def witness(sink: str, where: str, value: object) -> None:
    """Show ``value`` (seen in ``sink``) to every :class:`Canaries` listening now: the other
    fixtures call this with the MCP answers and model requests they see."""
    for canaries in list(_LISTENING):
        canaries.check(value, sink=sink, where=where)


def _names(sources: Iterable[Source]) -> list[str]:
    """The secret names ``sources`` mean: names as given, the secrets tools require."""
    names: list[str] = []
    for source in sources:
        if isinstance(source, str):
            found = [source]
        else:
            found = [
                name
                for definition in _definitions_of(source)
                for name in definition.requirements.secrets
            ]
        names.extend(name for name in found if name not in names)
    return names


def _definitions_of(source: Source) -> list[ToolDefinition]:
    if isinstance(source, ToolRunner):
        return source.toolkit.definitions()
    if isinstance(source, Toolkit):
        return source.definitions()
    if isinstance(source, Tool):
        return [source.definition]
    if isinstance(source, ToolDefinition):
        return [source]
    raise TypeError(f"expected a secret name, a tool or a toolkit, got {type(source).__name__}")


def _text_of(value: object) -> str:
    """``value`` as text to search: JSON of plain data, of a ``ToolResult`` (with what the
    model reads) or of a pydantic model; ``repr`` of anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, ToolResult):
        return json.dumps(value.to_dict(), ensure_ascii=False) + "\n" + value.for_model()
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value)
        except RecursionError:  # (too deep to show: nothing to search)
            return ""


def _places(value: object, canary: str, path: str = "", depth: int = 0) -> Iterator[str]:
    """The paths (``error.developer_message``, ``content[0].text``) of the strings and keys in
    ``value`` that hold ``canary`` (to a depth of :data:`_MAX_DEPTH`)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, ToolResult):
        value = {**value.to_dict(), "for_model()": value.for_model()}
    elif callable(getattr(value, "model_dump", None)):
        value = value.model_dump(mode="json")  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if canary in str(key):
                yield f"{inner} (a key)"
            yield from _places(item, canary, inner, depth + 1)
    elif isinstance(value, list | tuple):
        for number, item in enumerate(value):
            yield from _places(item, canary, f"{path}[{number}]", depth + 1)
    elif canary in (value if isinstance(value, str) else repr(value)):
        yield path or "the value"


class Canaries:
    """Canary secrets, and the leaks found so far (the ``tdk_secrets`` fixture; outside
    pytest, use it as a context manager and read :attr:`leaks`)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        """Secret name -> its canary."""
        self.leaks: list[Leak] = []
        """Every leak found, in order."""
        self.reported = 0
        """How many of :attr:`leaks` the test was already told about."""
        self.spans_watched = False
        """Whether spans are watched (the OTel SDK is installed, and the provider set, if
        any, takes processors)."""
        self._environ: dict[str, str | None] = {}
        self._handler = _Records(self)
        self._root_level: int | None = None
        self._spans: Any = None

    def canary(self, name: str) -> str:
        """The canary of the secret ``name`` (made the first time it is asked for)."""
        if name not in self.values:
            self.values[name] = f"tdk-canary-{random_values.token_hex(8)}"
        return self.values[name]

    def context(
        self,
        *sources: Source,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> ToolContext:
        """A ``ToolContext`` with a canary for each secret ``sources`` name or require (every
        tool's, for a toolkit or runner) and one as its ``auth_token``."""
        return ToolContext(
            secrets={name: self.canary(name) for name in _names(sources)},
            metadata=dict(metadata or {}),
            user_id=user_id,
            auth_token=self.canary(AUTH_TOKEN),
        )

    def env(self, *sources: Source) -> dict[str, str]:
        """Put a canary in the environment variable of each secret ``sources`` name or
        require (until the test ends); the variables set."""
        planted = {}
        for name in _names(sources):
            if name not in self._environ:
                self._environ[name] = os.environ.get(name)
            os.environ[name] = planted[name] = self.canary(name)
        return planted

    async def run(
        self,
        target: Toolkit | ToolRunner,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        **options: Any,
    ) -> ToolResult:
        """Run ``name`` with the canary context of ``target`` (unless ``context=`` is given)
        and look for the canaries in its result."""
        options.setdefault("context", self.context(target))
        result = await target.run(name, arguments, **options)
        self.check(result, sink="result", where=f"{result.tool} (call {result.call_id!r})")
        return result

    def check(self, value: object, *, sink: str = "result", where: str = "") -> None:
        """Look for every canary in ``value``, seen in ``sink`` (``where`` names it)."""
        if not self.values:
            return
        text = _text_of(value)
        for secret, canary in self.values.items():
            if canary in text:
                places = list(_places(value, canary))[:_MAX_PLACES] or ["its text"]
                shown = f"{where}: {', '.join(places)}" if where else ", ".join(places)
                self.leaks.append(Leak(sink, shown, secret))

    def report(self, leaks: list[Leak] | None = None) -> str | None:
        """The failure message naming every leak (``leaks``; default all), or None."""
        found = self.leaks if leaks is None else leaks
        if not found:
            return None
        sinks = sorted({leak.sink for leak in found})
        lines = [
            f"tdk_secrets: a canary secret reached {len(sinks)} sink(s) "
            f"({', '.join(sinks)}); a secret must reach none:"
        ]
        lines += [f"  - {leak}" for leak in found]
        return "\n".join(lines)

    def __enter__(self) -> Canaries:
        root = logging.getLogger()
        self._root_level = root.level
        root.setLevel(logging.DEBUG)
        root.addHandler(self._handler)
        self._spans = captured_spans(self._span_ended)
        self.spans_watched = self._spans.__enter__()
        _LISTENING.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _LISTENING.remove(self)
        self._spans.__exit__(None, None, None)
        root = logging.getLogger()
        root.removeHandler(self._handler)
        if self._root_level is not None:
            root.setLevel(self._root_level)
        for name, before in self._environ.items():
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before
        self._environ.clear()

    def _span_ended(self, span: Any) -> None:
        """A span ended: its name, attributes, events and status."""
        seen = {
            "name": span.name,
            "attributes": dict(span.attributes or {}),
            "events": [
                {"name": event.name, "attributes": dict(event.attributes or {})}
                for event in span.events
            ],
            "status": span.status.description,
        }
        self.check(seen, sink="span", where=repr(span.name))

    def record_seen(self, record: logging.LogRecord) -> None:
        """A log record was written: its message, exception text and extra fields."""
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: both, as they are
            message = f"{record.msg!r} % {record.args!r}"
        seen: dict[str, Any] = {"message": message}
        if record.exc_info:
            seen["exception"] = logging.Formatter().formatException(record.exc_info)
        if record.stack_info:
            seen["stack"] = record.stack_info
        extra = {k: repr(v) for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        if extra:
            seen["extra"] = extra
        where = f"logger {record.name!r} {record.levelname} at {record.module}:{record.lineno}"
        self.check(seen, sink="log record", where=where)


class _Records(logging.Handler):
    """Hands every log record to its :class:`Canaries`."""

    def __init__(self, canaries: Canaries) -> None:
        super().__init__(logging.NOTSET)
        self._canaries = canaries

    def emit(self, record: logging.LogRecord) -> None:
        self._canaries.record_seen(record)
