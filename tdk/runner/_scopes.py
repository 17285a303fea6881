"""Scopes: the state a policy shares between tools, and between the users of a tool.

``RateLimit(..., scope="github")`` and ``CircuitBreaker(..., scope="github")`` on several
tools give them one quota and one circuit. A scope may name fields of the call's
:class:`~tdk.ToolContext` in braces, formatted per call: ``{user_id}`` and any ``metadata``
key (``"github:{user_id}"``, ``"tenant:{org}"``). Without a scope, each tool has its own.
"""

from __future__ import annotations

import hashlib
import string
from typing import Final

from tdk._execution.context import ToolContext

__all__ = [
    "MAX_SCOPE_VALUE",
    "check_scope",
    "context_values",
    "scope_fields",
    "scope_key",
]

#: Longest value of a field a scope's key keeps as it is; a longer one is hashed.
MAX_SCOPE_VALUE: Final = 200
_FORMATTER: Final = string.Formatter()


def check_scope(scope: object) -> tuple[str, ...]:
    """The fields ``scope`` names, or ``ValueError`` saying what is wrong with it (not a
    non-empty string; a field that is not a plain name: ``{user.id}``, ``{0}``, ``{x!r}``)."""
    if not isinstance(scope, str) or not scope.strip():
        raise ValueError(f"scope must be a non-empty string or None, got {scope!r}")
    fields: list[str] = []
    try:
        parsed = list(_FORMATTER.parse(scope))
    except ValueError as bad:
        raise ValueError(f"scope {scope!r} is not a valid template: {bad}") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ValueError(
                f"scope {scope!r}: {{{field}}} must name a context field (user_id or a "
                "metadata key), without attributes, indexes, conversions or format specs"
            )
        fields.append(field)
    return tuple(dict.fromkeys(fields))


def scope_fields(scope: str | None) -> tuple[str, ...]:
    """The fields a (checked) scope names: none for a fixed scope or None."""
    return () if scope is None else check_scope(scope)


def context_values(
    fields: tuple[str, ...], context: ToolContext | None
) -> tuple[tuple[str, str], ...] | list[str]:
    """The values of ``fields`` in ``context``, each as (type name, text); or the fields the
    context lacks (``user_id`` when it has none, a metadata key it does not hold or holds as
    None, a value without text)."""
    values: list[tuple[str, str]] = []
    missing: list[str] = []
    for field in fields:
        if field == "user_id":
            value: object = None if context is None else context.user_id
        else:
            value = None if context is None else context.metadata.get(field)
        text = _text(value)
        if text is None:
            missing.append(field)
        elif len(text) > MAX_SCOPE_VALUE:  # its digest, marked as one in the type's place
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            values.append((f"{_type_name(value)}#sha256", digest))
        else:
            values.append((_type_name(value), text))
    return missing or tuple(values)


def scope_key(
    base: str, fields: tuple[str, ...], named: tuple[str, ...], values: tuple[tuple[str, str], ...]
) -> str:
    """The state key of a call under a scope naming ``fields`` (``base``: the scope's own
    key), given the ``values`` of the fields ``named`` (:func:`context_values`).

    The values are appended as the ``repr()`` of a tuple of (type name, text) pairs (quoted
    and escaped by Python, in C), so that no two different values share a key (``"a:b"``
    and ``"a"``, ``1`` and ``"1"``); a value too long to keep is replaced by its SHA-256: a
    scope's state is per value, whatever the values."""
    if not fields:
        return base
    mine = tuple(values[named.index(field)] for field in fields)
    return f"{base}:{mine!r}"


def _text(value: object) -> str | None:
    """``value`` as plain text; None for None or a value whose ``str()`` fails."""
    if value is None:
        return None
    try:  # (plain text: no method of a str subclass is called on it later)
        text = str.__str__(value) if isinstance(value, str) else str.__str__(str(value))
    except Exception:  # a hostile __str__, or one that returns no text
        return None
    return text


def _type_name(value: object) -> str:
    """The name of ``value``'s type as plain text (a metaclass may give any object)."""
    name = getattr(type(value), "__name__", None)
    return str.__str__(name) if isinstance(name, str) else "object"
