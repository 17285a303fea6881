"""Copies of ``details`` that JSON takes, whatever a tool body put there.

A tool may raise an error whose ``details`` hold anything: keys that are not text, containers
that contain themselves, objects whose iteration fails, subclasses of ``str`` or ``int`` whose
methods lie, integers too long to write. :func:`json_safe` copies such a value into plain
JSON data, bounded in size and depth, and never raises. Types are read with ``type()``, never
``isinstance()``: an object may lie about its ``__class__``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar, cast

from tdk._redact import encodable
from tdk.errors import LARGEST_DETAIL_INT, MAX_DETAILS_ITEMS

#: How deep containers in ``details`` are copied; deeper ones are named.
_MAX_DETAILS_DEPTH: Final = 8
_Container = TypeVar("_Container")


def json_safe(value: object) -> Any:
    """A JSON-safe copy of ``value``: containers copied (at most ``MAX_DETAILS_ITEMS`` values,
    at most ``_MAX_DETAILS_DEPTH`` deep, cycles cut), subclasses of ``str``/``int``/``float``
    as plain values, non-finite floats, huge integers and unknown objects named. Never raises:
    the object may come from a tool body and be hostile."""
    return _clean(value, _Budget(), 0)


def json_safe_mapping(value: Mapping[Any, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``details`` (see :func:`json_safe`); a mapping whose copy is not a
    mapping (one that fails to iterate) is kept under ``"details"``."""
    cleaned = _clean(value, _Budget(), 0)
    return cleaned if isinstance(cleaned, dict) else {"details": cleaned}


class _Budget:
    """What one cleaning may still copy, and the containers it is inside of (cycles)."""

    __slots__ = ("inside", "left")

    def __init__(self) -> None:
        self.left = MAX_DETAILS_ITEMS
        self.inside: set[int] = set()


def _clean(value: object, budget: _Budget, depth: int) -> Any:
    """:func:`json_safe` of ``value``, ``depth`` containers down, within ``budget``."""
    kind = type(value)
    if kind is str or kind is bool or value is None:  # the common cases first
        return value
    if kind is int:
        return (
            value
            if -LARGEST_DETAIL_INT < value < LARGEST_DETAIL_INT  # type: ignore[operator]
            else f"<int of {value.bit_length()} bits>"  # type: ignore[attr-defined]
        )
    if kind is float:
        return value if math.isfinite(value) else repr(value)  # type: ignore[arg-type]
    if depth >= _MAX_DETAILS_DEPTH:
        return "<nested too deeply>"
    # By type, never isinstance(): an object may lie about its __class__.
    if issubclass(kind, enum.Enum):
        return _clean(value.value, budget, depth + 1)  # type: ignore[attr-defined]
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):  # bool has no subclasses: an int subclass (IntFlag...)
        return _clean(int.__index__(value), budget, depth)  # type: ignore[arg-type]
    if issubclass(kind, float):
        return _clean(float.__float__(value), budget, depth)  # type: ignore[arg-type]
    if kind is not list and issubclass(kind, Mapping):
        return _copied(cast(Mapping[Any, Any], value), budget, depth, _copy_mapping)
    if issubclass(kind, list | tuple | set | frozenset):
        return _copied(cast(Iterable[Any], value), budget, depth, _copy_items)
    return f"<{kind.__name__[:200]}>"


def _copied(
    value: _Container, budget: _Budget, depth: int, copy: Callable[[_Container, _Budget, int], Any]
) -> Any:
    """``copy(value, ...)``, unless ``value`` contains itself; never raising."""
    if id(value) in budget.inside:
        return "<cycle>"
    budget.inside.add(id(value))
    try:
        return copy(value, budget, depth)
    except Exception:  # a container whose iteration fails
        return f"<unreadable {type(value).__name__[:200]}>"
    finally:
        budget.inside.discard(id(value))


def _copy_mapping(value: Mapping[Any, Any], budget: _Budget, depth: int) -> dict[str, Any]:
    copy: dict[str, Any] = {}
    for key, item in value.items():
        if budget.left <= 0:
            copy["..."] = "<cut: too many values>"
            break
        budget.left -= 1
        copy[_json_key(key)] = _clean(item, budget, depth + 1)
    return copy


def _copy_items(value: Iterable[Any], budget: _Budget, depth: int) -> list[Any]:
    copy: list[Any] = []
    for item in value:
        if budget.left <= 0:
            copy.append("<cut: too many values>")
            break
        budget.left -= 1
        copy.append(_clean(item, budget, depth + 1))
    return copy


def _json_key(key: object) -> str:
    """A mapping key as JSON text: a ``str`` as it is, a number as JSON writes it, anything
    else by its ``str()`` (whole, as a ``str`` key is: the redaction that follows must see
    every secret in it), or its type's name when that fails."""
    if type(key) is str:
        return key
    cleaned = _clean(key, _Budget(), _MAX_DETAILS_DEPTH - 1)  # (a str subclass: plain)
    if isinstance(cleaned, str):
        return cleaned
    if cleaned is None or isinstance(cleaned, bool | int | float):
        return str(cleaned)  # as str() has always named them: "1", "True", "None"
    try:
        text = str(key)
        return text if type(text) is str else str.__str__(text)  # (a subclass: plain)
    except Exception:
        return f"<{type(key).__name__[:200]}>"


def utf8_copy(value: Any) -> Any:
    """A copy of JSON data (a tool's validated value) in which every text (key or value)
    encodes as UTF-8: each lone surrogate, as a name read with ``surrogateescape`` holds,
    becomes U+FFFD. Only called for a value that failed to encode, so it never runs on the
    way of a call that succeeds."""
    kind = type(value)
    if kind is str:
        return encodable(value)
    if kind is dict:
        return {utf8_copy(key): utf8_copy(item) for key, item in value.items()}
    if kind is list:
        return [utf8_copy(item) for item in value]
    return value
