"""Scopes: the state a policy shares between tools, and between the users of a tool.

``RateLimit(..., scope="github")`` and ``CircuitBreaker(..., scope="github")`` on several
tools give them one quota and one circuit. A scope may name fields of the call's
:class:`~tdk.ToolContext` in braces, formatted per call: ``{user_id}`` and any ``metadata``
key (``"github:{user_id}"``, ``"tenant:{org}"``). Without a scope, each tool has its own.
"""

from __future__ import annotations

import string
from typing import Final

from tdk._context import ToolContext

__all__ = ["MAX_SCOPE_VALUE", "check_scope", "scope_fields", "scope_key"]

#: Longest value of a field a formatted scope keeps (a key of a store, not a document).
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


def scope_key(scope: str, fields: tuple[str, ...], context: ToolContext | None) -> str | list[str]:
    """``scope`` formatted for a call with ``context``; or the fields it lacks (``user_id``
    when the context has none, metadata keys it does not hold)."""
    if not fields:
        return scope
    values: dict[str, str] = {}
    missing: list[str] = []
    for field in fields:
        if (field == "user_id" and (context is None or context.user_id is None)) or (
            field != "user_id" and (context is None or field not in context.metadata)
        ):
            missing.append(field)
            continue
        assert context is not None
        value = context.user_id if field == "user_id" else context.metadata[field]
        try:
            values[field] = str(value)[:MAX_SCOPE_VALUE]
        except Exception:  # a metadata value whose str() fails: no key can be made of it
            missing.append(field)
    if missing:
        return missing
    return scope.format_map(values)
