"""Results and errors made from values tdk has already checked, without validating them again.

Every call makes a :class:`~tdk.ToolResult`, and every failed one an
:class:`~tdk.errors.ErrorInfo`, from values tdk produced itself and checked on the way (a
validated output, a tool name, a kind from the table, texts it redacted, fields read by their
types). Validating them again would cost more than the rest of a call's bookkeeping, and
pydantic's ``model_construct`` more still (``bench/README.md#results-without-validating-again``
has the figures). :func:`maker` gives the instance exactly what validation would, by setting
the model's slots (:mod:`tdk._compat.pydantic_slots`, with its public fallback).

The values must be complete, in field order and of the fields' types: each caller builds them
so, and ``tests/failures/test_records.py`` compares what it makes, for every caller, with what
validation makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from tdk._compat.pydantic_slots import SLOTS, construct_maker, has_validators, slot_maker

__all__ = ["maker"]

_M = TypeVar("_M", bound=BaseModel)


def maker(model: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """A function making ``model`` instances from complete dicts of valid field values, in
    field order (see the module docstring). Refuses (``TypeError``) a model for which that
    would differ from validation: one with validators, private attributes or extra fields.
    Where pydantic no longer says whether a model has validators, its instances are
    validated (slower, the same)."""
    validators = has_validators(model)
    if validators or model.__private_attributes__ or model.model_config.get("extra") == "allow":
        raise TypeError(f"{model.__name__} has validators, private attributes or extra fields")
    if validators is None:
        return model.model_validate
    return slot_maker(model, SLOTS) if SLOTS is not None else construct_maker(model)
