"""Copies of ``details`` that JSON takes, whatever a tool body put there, and their redaction.

A tool may raise an error whose ``details`` hold anything: keys that are not text, containers
that contain themselves, objects whose iteration fails, subclasses of ``str`` or ``int`` whose
methods lie, integers too long to write. :func:`clean_details` (what every ``ToolError`` does
with the ``details`` it is given) and :func:`json_safe` copy such a value into plain JSON
data, bounded in size and depth, and never raise. Types are read with ``type()``, never
``isinstance()``: an object may lie about its ``__class__``. :func:`redact_json` then scrubs
the copy an ``ErrorInfo`` carries.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar, cast

from tdk._failures.redact import REDACTED, credential_key, redact_text

__all__ = ["clean_details", "json_safe", "json_safe_mapping", "redact_json"]

#: Values (container items included) kept in ``details`` at most; the rest is cut.
MAX_DETAILS_ITEMS: Final = 10_000
#: Integers in ``details`` beyond this are named, not kept: Python will not even write them out
#: past 4,300 digits, and no reader of ``details`` needs one that long.
LARGEST_DETAIL_INT: Final = 10**100


def clean_details(value: Mapping[Any, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``details``: as it is for the common case (text and small numbers
    under text keys), else cleaned by :func:`json_safe_mapping`."""
    if type(value) is dict and len(value) <= MAX_DETAILS_ITEMS and _flat_and_plain(value):
        return dict(value)
    return json_safe_mapping(value)


def _flat_and_plain(value: dict[Any, Any]) -> bool:
    """Whether every key is a ``str`` and every value a ``str``, ``bool``, None, a finite
    ``float`` or an ``int`` that cleaning would keep as it is."""
    for key, item in value.items():
        kind = type(item)
        if type(key) is not str or not (
            kind is str
            or item is None
            or kind is bool
            or (kind is int and -LARGEST_DETAIL_INT < item < LARGEST_DETAIL_INT)
            or (kind is float and math.isfinite(item))
        ):
            return False
    return True


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


#: Types of JSON values that hold no text.
_NOT_TEXT: Final = frozenset({int, float, bool, type(None)})


def redact_json(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-safe already) with every string in it redacted, and the whole value of
    every credential-named key (``Authorization``, ``api_key``, ``Cookie``...) replaced."""
    if type(value) in _NOT_TEXT:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        redacted: dict[str, Any] = {}
        for key, item in value.items():
            shown = redact_text(key, secrets)  # a key may itself be a secret value
            base, n = shown, 1
            while shown in redacted:  # keys that differed only by a secret: each kept
                n += 1
                shown = f"{base} ({n})"
            redacted[shown] = (
                REDACTED
                if credential_key(key)
                else redact_text(item, secrets)
                if type(item) is str
                else redact_json(item, secrets)
            )
        return redacted
    if isinstance(value, list):
        if len(value) == 2 and _is_credential_pair(value):  # ("x-api-key", "...") as a list
            return [redact_text(value[0], secrets), REDACTED]
        return [
            redact_text(item, secrets) if type(item) is str else redact_json(item, secrets)
            for item in value
        ]
    return value


def _is_credential_pair(pair: list[Any]) -> bool:
    """A (name, value) pair of a credential, as ``list(headers.items())`` gives them."""
    name, value = pair
    return type(name) is str and type(value) is str and credential_key(name)
