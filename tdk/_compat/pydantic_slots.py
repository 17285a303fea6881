"""pydantic models made from checked values by setting their slots (``BaseModel.__dict__``).

A model instance validated from complete values holds exactly four things: its ``__dict__``
(every field, in declaration order) and the three attributes pydantic documents on every
model, ``__pydantic_fields_set__``, ``__pydantic_extra__`` and ``__pydantic_private__``.
``BaseModel`` keeps the four in slots; setting them through the slots' own descriptors makes
the same instance as validation, without validating again (``tdk._failures.records`` says when that
is allowed), and faster than ``model_construct``, which walks every field in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeVar

from pydantic import BaseModel

__all__ = ["SLOTS", "Slots", "construct_maker", "has_validators", "model_slots", "slot_maker"]

_M = TypeVar("_M", bound=BaseModel)

_Set = Callable[[object, Any], None]

#: The four slots, in the order :func:`model_slots` reads them.
_SLOT_NAMES: Final = (
    "__dict__",
    "__pydantic_fields_set__",
    "__pydantic_extra__",
    "__pydantic_private__",
)


class Slots(NamedTuple):
    """The setters of ``BaseModel``'s four slots."""

    fields: _Set
    """Sets the instance's ``__dict__``."""
    fields_set: _Set
    """Sets ``__pydantic_fields_set__``."""
    extra: _Set
    """Sets ``__pydantic_extra__``."""
    private: _Set
    """Sets ``__pydantic_private__``."""


def model_slots() -> Slots | None:
    """The ``__set__`` of each slot descriptor in ``BaseModel.__dict__`` (the four of
    :data:`_SLOT_NAMES`; checked on pydantic 2.14.4 with pydantic-core 2.50.5). None when
    ``BaseModel`` keeps them otherwise (no longer slots, a fifth slot): makers then use
    :func:`construct_maker`."""
    own = BaseModel.__dict__
    if tuple(sorted(own.get("__slots__", ()))) != tuple(sorted(_SLOT_NAMES)):
        return None
    setters: list[_Set] = []
    for name in _SLOT_NAMES:
        setter = getattr(own.get(name), "__set__", None)
        if not callable(setter):
            return None
        setters.append(setter)
    return Slots(*setters)


SLOTS: Final = model_slots()
"""BaseModel's slot setters, or None when its layout is not the one checked."""


def slot_maker(model: type[_M], slots: Slots) -> Callable[[dict[str, Any]], _M]:
    """Makes ``model`` instances from complete dicts of valid values, in field order, by
    setting the four ``slots`` (see ``bench/README.md#results-without-validating-again``)."""
    new = object.__new__
    set_fields, set_fields_set, set_extra, set_private = slots
    fields_set = set(model.model_fields).copy  # a set of its own per instance, as validation

    def make(values: dict[str, Any]) -> _M:
        instance = new(model)
        set_fields(instance, values)
        set_fields_set(instance, fields_set())
        set_extra(instance, None)
        set_private(instance, None)
        return instance

    return make


def construct_maker(model: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """The public fallback of :func:`slot_maker`: ``model.model_construct`` (the same instance
    for complete values of a model without private attributes or extra fields)."""

    def make(values: dict[str, Any]) -> _M:
        return model.model_construct(**values)

    return make


def has_validators(model: type[BaseModel]) -> bool | None:
    """Whether ``model`` has validators of its own: read from ``__pydantic_decorators__``
    (its ``validators``, ``field_validators``, ``root_validators`` and ``model_validators``,
    checked on pydantic 2.14.4). None when that record is missing or shaped otherwise: the
    caller cannot tell, and validates."""
    decorators = getattr(model, "__pydantic_decorators__", None)
    kinds = ("validators", "field_validators", "root_validators", "model_validators")
    found = [getattr(decorators, kind, None) for kind in kinds]
    if not all(isinstance(each, dict) for each in found):
        return None
    return any(found)
