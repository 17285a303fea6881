"""Any exception -> one tdk error: the single mapping table of ``docs/errors.md``.

tdk's own errors pass through unchanged. Foreign exceptions are looked up along their MRO, so
the most specific class wins: the builtin rows here, the httpx rows in
:mod:`tdk._failures.httpx_rows` (keyed by class name, which makes the same rows serve
``httpx2``, whose classes share the names but not the base classes). Those are loaded the
first time an httpx exception is met: they use the classifier of :mod:`tdk.http` (which
imports nothing of this package), and defining or running tools must not load httpx.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Final

from tdk._failures.foreign import HTTPX_MODULES, describe, root_module
from tdk._failures.mapped import Build, Mapped
from tdk.errors import FatalToolError, ToolCancelledError, ToolError, ToolTimeoutError

__all__ = ["BUILTIN_TABLE", "map_foreign", "to_tool_error"]

#: Exception types a group's message names at most, and the longest name kept.
_MAX_GROUP_NAMES: Final = 10
_MAX_NAME: Final = 100


def _timed_out(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        ToolTimeoutError, "The tool timed out.", {"developer_message": describe(exc, secrets)}
    )


def _cancelled(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        ToolCancelledError,
        "The tool's work was cancelled.",
        {"developer_message": describe(exc, secrets)},
    )


def _group(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    try:
        names = {type(e).__name__[:_MAX_NAME] for e in exc.exceptions}  # type: ignore[attr-defined]
    except Exception:  # a group whose members cannot be read
        names = set()
    members = sorted(names)[:_MAX_GROUP_NAMES]
    listed = ", ".join(members)
    if len(names) > _MAX_GROUP_NAMES:
        listed += f" and {len(names) - _MAX_GROUP_NAMES} other types"
    return Mapped(
        FatalToolError,
        f"The tool failed with several errors at once ({listed}).",
        {"developer_message": describe(exc, secrets), "details": {"exceptions": members}},
    )


def _fatal(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        FatalToolError,
        f"An unhandled {type(exc).__name__} was raised by the tool.",
        {"developer_message": describe(exc, secrets)},
    )


#: Builtin exception class -> builder; looked up along the MRO, as the httpx rows are.
BUILTIN_TABLE: Final[Mapping[type[BaseException], Build]] = {
    TimeoutError: _timed_out,
    asyncio.CancelledError: _cancelled,
    BaseExceptionGroup: _group,
}


def to_tool_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ToolError:
    """The tdk error for ``exc``: itself when it is one, else the mapped error chained to it."""
    if isinstance(exc, ToolError):
        return exc
    mapped = map_foreign(exc, secrets)
    error = mapped.build() if isinstance(mapped, Mapped) else mapped
    error.__cause__ = exc
    return error


def map_foreign(exc: BaseException, secrets: Iterable[str]) -> Mapped | ToolError:
    """The row of the table for ``exc`` (not a tdk error), applied: texts are redacted with
    ``secrets`` and the requests ``exc`` carries."""
    return _builder_for(exc)(exc, secrets)


#: Exception type -> its row, remembered after the first MRO walk (bounded: cleared when full).
_ROW_OF_TYPE: dict[type[BaseException], Build] = {}
_MAX_REMEMBERED_TYPES: Final = 512


def _builder_for(exc: BaseException) -> Build:
    exc_type = type(exc)
    build = _ROW_OF_TYPE.get(exc_type)
    if build is None:
        build = _walk_mro(exc_type)
        if len(_ROW_OF_TYPE) >= _MAX_REMEMBERED_TYPES:
            _ROW_OF_TYPE.clear()
        _ROW_OF_TYPE[exc_type] = build
    return build


def _walk_mro(exc_type: type[BaseException]) -> Build:
    for cls in exc_type.__mro__:
        if root_module(cls) in HTTPX_MODULES:
            # The httpx rows, loaded the first time an httpx exception is met (see the module
            # docstring; a walk is remembered per type: once per type at most).
            from tdk._failures.httpx_rows import HTTPX_TABLE

            build = HTTPX_TABLE.get(cls.__name__)
        else:
            build = BUILTIN_TABLE.get(cls)
        if build is not None:
            return build
    return _fatal
