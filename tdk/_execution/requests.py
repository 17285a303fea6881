"""What a tool can ask the user: :class:`Confirm`, :class:`Choose`, :class:`Form` and
:class:`OpenUrl`, and how an answer is checked against what was asked.

A request is plain data: its JSON form (:meth:`Confirm.to_dict` and the others) is what a
pending result holds, what the sealed token carries, and what hosts render (an MCP form or URL
elicitation, a dialog of the application's own). An answer is checked twice, both times before
the tool body sees it: against the sealed JSON form when the call is resumed
(:func:`check_answer`), and against the request the body asks again (:meth:`Confirm.answer`
and the others), so that an answer that does not fit is refused naming its key.

Answers: a ``Confirm`` takes ``True`` or ``False``; a ``Choose`` one of its options; a ``Form``
an object of its fields; an ``OpenUrl`` ``True`` (or None) once the user is done there.
``False`` declines any request: a ``Confirm`` hands the body ``False``, any other request ends
the call as declined (``TOOL_RUNTIME_APPROVAL_DENIED``).
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

__all__ = [
    "MAX_MESSAGE_CHARS",
    "Choose",
    "Confirm",
    "Form",
    "OpenUrl",
    "Request",
    "UnfitAnswerError",
    "check_answer",
]

M = TypeVar("M", bound=BaseModel)

#: Longest message, option, URL or text answer a request holds (what a user reads; the token
#: that carries it is bounded too).
MAX_MESSAGE_CHARS: Final = 2000
MAX_OPTIONS: Final = 100
MAX_FORM_FIELDS: Final = 50
MAX_URL_CHARS: Final = 4000


class UnfitAnswerError(ValueError):
    """An answer that does not fit its request: the text says why, without the answer."""


def _checked_text(value: object, what: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{what} must be a non-blank str, not {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{what} must be at most {limit} characters, not {len(value)}")
    return value


def _declined(raw: object) -> bool:
    return raw is False


@dataclass(frozen=True, slots=True)
class Confirm:
    """Ask the user a yes-or-no question: the answer is ``True`` or ``False``.

    ::

        if not await context.ask("delete", tdk.Confirm(f"Delete branch {name}?")):
            return "Left as it is."

    .. versionadded:: 0.1.0
    """

    message: str
    """The question, as the user reads it."""

    def __post_init__(self) -> None:
        _checked_text(self.message, "Confirm's message")

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON data: ``{"type": "confirm", "message": ...}``."""
        return {"type": "confirm", "message": self.message}

    def answer(self, raw: object) -> bool:
        """The answer handed to the tool; :class:`UnfitAnswerError` when ``raw`` is not a bool."""
        if type(raw) is not bool:
            raise UnfitAnswerError("a confirmation is answered with true or false")
        return raw


@dataclass(frozen=True, slots=True)
class Choose:
    """Ask the user to pick one of ``options`` (strings): the answer is the option picked.

    .. versionadded:: 0.1.0
    """

    message: str
    """The question, as the user reads it."""
    options: Sequence[str]
    """What the user may pick, in the order shown (at least one, each once)."""

    def __post_init__(self) -> None:
        _checked_text(self.message, "Choose's message")
        if isinstance(self.options, str) or not isinstance(self.options, Sequence):
            raise TypeError("Choose's options must be a list of str")
        options = tuple(_checked_text(o, "each option", 200) for o in self.options)
        if not options or len(options) > MAX_OPTIONS or len(set(options)) != len(options):
            raise ValueError(f"Choose needs 1 to {MAX_OPTIONS} options, each listed once")
        object.__setattr__(self, "options", options)

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON data: ``{"type": "choose", "message": ..., "options": [...]}``."""
        return {"type": "choose", "message": self.message, "options": list(self.options)}

    def answer(self, raw: object) -> str:
        """The option picked; :class:`UnfitAnswerError` when ``raw`` is not one of the options."""
        if type(raw) is not str or raw not in self.options:
            raise UnfitAnswerError("the answer is not one of the options offered")
        return raw


@dataclass(frozen=True, slots=True)
class Form(Generic[M]):
    """Ask the user to fill in ``model``, a pydantic model of flat primitive fields (text,
    integers, numbers, booleans, and text from a ``Literal`` or a string ``Enum``, each
    optional or not), as MCP form elicitation allows: the answer is an instance of it.

    .. versionadded:: 0.1.0
    """

    message: str
    """What the form is for, as the user reads it."""
    model: type[M]
    """The fields asked for; the answer is validated by it."""
    schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    """The form as a flat JSON Schema object (MCP's ``requestedSchema``)."""

    def __post_init__(self) -> None:
        _checked_text(self.message, "Form's message")
        if not (isinstance(self.model, type) and issubclass(self.model, BaseModel)):
            raise TypeError(f"Form takes a pydantic model class, not {self.model!r}")
        object.__setattr__(self, "schema", _flat_schema(self.model))

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON data: ``{"type": "form", "message": ..., "schema": {...}}``."""
        return {"type": "form", "message": self.message, "schema": self.schema}

    def answer(self, raw: object) -> M:
        """The form filled in, as a model instance; :class:`UnfitAnswerError` when ``raw``
        has keys the form does not ask for, or does not validate."""
        if not isinstance(raw, Mapping):
            raise UnfitAnswerError("a form is answered with an object of its fields")
        _check_form(self.schema, raw)
        try:
            return self.model.model_validate(dict(raw))
        except ValidationError as invalid:
            fields = sorted({str(e["loc"][0]) for e in invalid.errors() if e["loc"]})
            shown = ", ".join(fields) or "its value"
            raise UnfitAnswerError(f"the form does not validate: {shown}") from None


@dataclass(frozen=True, slots=True)
class OpenUrl:
    """Ask the user to open ``url`` (an ``https``, or ``http``, address without credentials:
    a sign-in page, a payment) and come back: the answer is None once they are done.

    .. versionadded:: 0.1.0
    """

    message: str
    """Why the user should open it, as the user reads it."""
    url: str
    """The address to open."""

    def __post_init__(self) -> None:
        _checked_text(self.message, "OpenUrl's message")
        parts = urlsplit(_checked_text(self.url, "OpenUrl's url", MAX_URL_CHARS))
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError("OpenUrl's url must be an http or https address")
        if parts.username is not None or parts.password is not None:
            raise ValueError("OpenUrl's url must not hold credentials")

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON data: ``{"type": "open_url", "message": ..., "url": ...}``."""
        return {"type": "open_url", "message": self.message, "url": self.url}

    def answer(self, raw: object) -> None:
        """None; :class:`UnfitAnswerError` for anything but ``True`` or None (done)."""
        if raw is not None and raw is not True:
            raise UnfitAnswerError("an address to open is answered with true once done")


#: What ``context.ask()`` takes.
Request = Confirm | Choose | Form[Any] | OpenUrl


def check_answer(request: Mapping[str, Any], raw: object) -> None:
    """Check ``raw`` against ``request``, a request's JSON form (from a sealed token), before
    anything runs; :class:`UnfitAnswerError` saying why it does not fit. ``False`` (declined) fits
    every request."""
    if _declined(raw):
        return
    kind = request.get("type")
    if kind == "confirm":
        if type(raw) is not bool:
            raise UnfitAnswerError("a confirmation is answered with true or false")
    elif kind == "choose":
        if type(raw) is not str or raw not in request.get("options", ()):
            raise UnfitAnswerError("the answer is not one of the options offered")
    elif kind == "form":
        if not isinstance(raw, Mapping):
            raise UnfitAnswerError("a form is answered with an object of its fields")
        _check_form(request.get("schema", {}), raw)
    elif kind == "open_url":
        if raw is not None and raw is not True:
            raise UnfitAnswerError("an address to open is answered with true once done")
    else:  # (only tdk makes the requests a token carries)
        raise UnfitAnswerError("the request is not one tdk knows")


def _check_form(schema: Mapping[str, Any], raw: Mapping[Any, Any]) -> None:
    """The keys and value types of a form's answer against its flat schema."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = sorted(str(k)[:64] for k in raw if k not in properties)
    if extra:
        raise UnfitAnswerError(f"the form does not ask for {', '.join(extra[:5])}")
    missing = [name for name in schema.get("required", ()) if raw.get(name) is None]
    if missing:
        raise UnfitAnswerError(f"the form needs {', '.join(missing)}")
    for name, value in raw.items():
        if value is not None and not _fits(properties[name], value):
            raise UnfitAnswerError(f"the form's field {name} does not validate")


_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _fits(prop: Mapping[str, Any], value: object) -> bool:
    types_ = _JSON_TYPES.get(prop.get("type", ""), ())
    if type(value) is bool and prop.get("type") != "boolean":
        return False
    if not isinstance(value, types_):
        return False
    if isinstance(value, str) and len(value) > MAX_MESSAGE_CHARS:
        return False
    enum_values = prop.get("enum")
    return enum_values is None or value in enum_values


def _flat_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model`` as MCP's flat form schema; ``TypeError`` naming a field it cannot carry."""
    fields = model.model_fields
    if not fields or len(fields) > MAX_FORM_FIELDS:
        raise ValueError(f"a Form's model needs 1 to {MAX_FORM_FIELDS} fields")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, info in fields.items():
        key = info.alias or name
        annotation, optional = _unwrap_optional(info.annotation)
        prop = _primitive(annotation)
        if prop is None:
            raise TypeError(
                f"Form field {name!r} of {model.__name__} is not text, a number, a boolean "
                "or a choice of text: MCP forms are flat"
            )
        if info.title:
            prop["title"] = info.title
        if info.description:
            prop["description"] = info.description
        if info.is_required() and not optional:
            required.append(key)
        elif isinstance(info.default, str | int | float | bool):
            prop["default"] = getattr(info.default, "value", info.default)
        properties[key] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0], True
    return annotation, False


def _primitive(annotation: Any) -> dict[str, Any] | None:
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if get_origin(annotation) is Literal:
        literals = get_args(annotation)
        if literals and all(type(v) is str for v in literals):
            return {"type": "string", "enum": list(literals)}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        if values and all(type(v) is str for v in values):
            return {"type": "string", "enum": values}
    return None
