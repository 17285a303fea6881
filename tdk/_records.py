"""Results and errors made from values tdk has already checked, without validating them again.

Every call makes a :class:`~tdk.ToolResult`, and every failed one an
:class:`~tdk.errors.ErrorInfo`, from values tdk produced itself and checked on the way (a
validated output, a tool name, a kind from the table, texts it redacted, fields read by their
types). Validating them again costs more than the rest of a call's bookkeeping: 0.8 us for a
result and 1.3 us for an error. pydantic's ``model_construct``, which skips validation, walks
every field in Python and measures slower still (2.5 and 4.7 us). :func:`maker` gives the
instance exactly what validation would: its ``__dict__`` (every field, in declaration order)
and the three attributes pydantic documents on every model (``__pydantic_fields_set__``,
``__pydantic_extra__`` and ``__pydantic_private__``), set through the slots' own
descriptors, in about 0.3 us.

The values must be complete, in field order and of the fields' types: each caller builds them
so, and ``tests/test_records.py`` compares what it makes, for every caller, with what
validation makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["maker"]

_M = TypeVar("_M", bound=BaseModel)

_new = object.__new__
# The setters of BaseModel's four slots: a slot's own descriptor sets it in about half the
# time ``object.__setattr__`` takes to find it.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def maker(model: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """A function making ``model`` instances from complete dicts of valid field values, in
    field order (see the module docstring). Refuses (``TypeError``) a model for which that
    would differ from validation: one with validators, private attributes or extra fields."""
    decorators = model.__pydantic_decorators__
    if (
        model.__private_attributes__
        or model.model_config.get("extra") == "allow"
        or decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.model_validators
    ):
        raise TypeError(f"{model.__name__} has validators, private attributes or extra fields")
    fields_set = set(model.model_fields).copy  # a set of its own per instance, as validation

    def make(values: dict[str, Any]) -> _M:
        instance = _new(model)
        _set_dict(instance, values)
        _set_fields_set(instance, fields_set())
        _set_extra(instance, None)
        _set_private(instance, None)
        return instance

    return make
