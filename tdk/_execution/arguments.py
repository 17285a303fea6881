"""Arguments: what a model sends, validated, and described when they are wrong.

The description is tdk's own text, made safe piece by piece (see :func:`invalid_arguments`):
it never goes through the whole-text scan of ``ErrorInfo.from_exception``, which keeps the
invalid-arguments path about as cheap as a successful call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, cast, get_args

from pydantic import BaseModel, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticKnownError, PydanticUseDefault
from pydantic_core.core_schema import ErrorType

from tdk._failures.info import make_error_info
from tdk._failures.redact import redact_text
from tdk.errors import ErrorInfo, ToolInputError

if TYPE_CHECKING:
    from tdk._define.definition import ToolSpec

Arguments = Mapping[str, Any] | str | bytes | None
"""What a model sends: a mapping, or a JSON object as text. None and blank text mean ``{}``."""

#: pydantic error types whose messages are templates over the schema, never over the input.
#: Others may quote the input or carry the text of an arbitrary exception (custom validators'
#: ``value_error``, ``union_tag_invalid``, the ``{error}`` of ``iteration_error``...), so the
#: model is told only that the field is not valid.
_QUOTES_INPUT: Final = frozenset(
    {
        "value_error",
        "assertion_error",
        "union_tag_invalid",
        "iteration_error",
        "mapping_type",
        "get_attribute_error",
        "no_such_attribute",
        "datetime_object_invalid",
        "bytes_invalid_encoding",
    }
)
_TEMPLATED_ERRORS: Final = frozenset(get_args(ErrorType)) - _QUOTES_INPUT
#: Problems listed at most (a model may send thousands of unknown keys); the message says how
#: many more there were.
MAX_LISTED_PROBLEMS: Final = 20
#: Longest field path shown (a model may send a 64 KB key): cut, after redaction.
MAX_FIELD_CHARS: Final = 100


def _rendered(
    error_type: str, context: dict[str, Any] | None, input_type: Literal["python", "json"]
) -> str:
    """pydantic's own message for ``error_type`` with ``context``, worded for Python or JSON
    input (they differ: "a valid list" / "a valid array"). TypeError when the context does
    not fit the type's template."""
    if input_type == "python":
        return PydanticKnownError(cast(ErrorType, error_type), context).message()
    line: InitErrorDetails = {"type": cast(ErrorType, error_type), "loc": (), "input": None}
    if context is not None:
        line["ctx"] = context
    return ValidationError.from_exception_data("", [line], input_type="json").errors()[0]["msg"]


def _fixed_messages() -> dict[str, frozenset[str]]:
    """The messages of each templated error type that takes no context, in both wordings. A
    message among its type's is pydantic's own and quotes nothing; any other (a custom error
    may borrow a type's name) is checked against the template with its context."""
    fixed = {}
    for error_type in _TEMPLATED_ERRORS:
        try:
            fixed[error_type] = frozenset(
                (_rendered(error_type, None, "python"), _rendered(error_type, None, "json"))
            )
        except TypeError:  # the type's template needs context
            continue
    return fixed


_FIXED_MESSAGES: Final = _fixed_messages()


def validate_arguments(model: type[BaseModel], arguments: Arguments) -> BaseModel:
    """``arguments`` validated by ``model``, from any form but a plain dict (which callers
    give the validator directly); raises pydantic's ``ValidationError``."""
    if isinstance(arguments, (str, bytes)):
        if not arguments.strip():
            return model.model_validate({})
        return model.model_validate_json(arguments)
    validated: BaseModel = model.__pydantic_validator__.validate_python(
        {} if arguments is None else arguments
    )
    return validated


def few_unknown_keys(spec: ToolSpec, arguments: dict[Any, Any]) -> tuple[dict[Any, Any], int]:
    """``arguments`` holding more keys than the tool has parameters and an input error can
    list (``spec.most_keys``), cut to their known keys and the first unknown ones (one more
    than an error lists), and the number of unknown keys cut. An input error then costs the
    same whatever the flood of keys a client sends (pydantic builds an error for each)."""
    known = frozenset(spec.parameter_names)
    kept: dict[Any, Any] = {}
    unknown = 0
    for key, value in arguments.items():
        if key in known:
            kept[key] = value
        elif unknown <= MAX_LISTED_PROBLEMS:
            kept[key] = value
            unknown += 1
    return kept, len(arguments) - len(kept)


def null_failed(names: frozenset[str], found: list[ErrorDetails]) -> bool:
    """Whether validation failed on an argument of ``names`` (``ToolSpec.null_defaults``):
    it may have been a ``null`` meaning "not given" (a union reports one failure per member,
    at ``(name, member)``)."""
    return any((location := error["loc"]) and location[0] in names for error in found)


def validate_with_null_defaults(
    model: type[BaseModel], names: frozenset[str], arguments: Arguments
) -> BaseModel:
    """``arguments`` validated again, in the same mode (JSON text as JSON), by a variant of
    ``model`` in which a ``null`` for one of ``names`` means "not given": the default
    applies. The variant is made on the first call that needs it (most tools never do)."""
    variant = model.__dict__.get("_tdk_null_variant")
    if variant is None:
        fields = [
            field for field, info in model.model_fields.items() if (info.alias or field) in names
        ]
        rule = field_validator(*fields, mode="before")(_null_means_default)
        variant = create_model(model.__name__, __base__=model, __validators__={"_tdk_null": rule})
        type.__setattr__(model, "_tdk_null_variant", variant)  # (dies with the model)
    return validate_arguments(variant, arguments)


def _null_means_default(value: Any) -> Any:
    if value is None:
        raise PydanticUseDefault
    return value


def invalid_arguments(
    found: list[ErrorDetails],
    spec: ToolSpec,
    name: str,
    secrets: tuple[str, ...],
    unlisted: int = 0,
) -> ErrorInfo:
    """The error for arguments that did not validate: every field and what it expects.

    The text is made safe here, piece by piece, instead of scanned whole afterwards. pydantic's
    message is kept only when it is pydantic's own rendering of a template over the schema
    (see :func:`_field_problem`); a custom error that borrows a templated type's name, and may quote
    the value, is told as "is not valid". A field path is kept as it is only when it names a
    parameter; any other path may carry what the model sent (an unknown key, a key of a
    mapping), so it is redacted (and cut), as is every message but pydantic's fixed texts. At
    most :data:`MAX_LISTED_PROBLEMS` problems are described; the message counts the rest
    (and the ``unlisted`` unknown keys that :func:`few_unknown_keys` cut before validating).
    ``found`` is the ``ValidationError``'s ``errors()``; the error itself is dropped: its text
    quotes the submitted values.
    """
    errors = []
    listed = []
    parameters = spec.parameter_names
    for error in found if len(found) <= MAX_LISTED_PROBLEMS else found[:MAX_LISTED_PROBLEMS]:
        loc = error["loc"]
        if len(loc) == 1 and loc[0] in parameters:
            field = str(loc[0])
        else:
            field = redact_text(".".join(map(str, loc)), secrets, limit=MAX_FIELD_CHARS)
        error_type, text = error["type"], error["msg"]
        if text in _FIXED_MESSAGES.get(error_type, ()):
            problem = _field_problem(error_type, text, field)
        else:
            own = error_type in _TEMPLATED_ERRORS and _renders(error_type, error.get("ctx"), text)
            problem = redact_text(_field_problem(error_type, text if own else None, field), secrets)
        errors.append({"field": field, "problem": problem})
        listed.append(f"'{field}' {problem}" if field else problem)
    more = len(found) - len(errors) + unlisted
    if more:
        listed.append(f"and {more} more problems")
    message = (
        f"Invalid arguments: {'; '.join(listed)}. "
        f"Parameters: {', '.join(parameters) or 'none'}. "
        "Fix the arguments and call the tool again."
    )
    return make_error_info(ToolInputError, message, name, details={"errors": errors})


def unreadable_arguments(exc: Exception, spec: ToolSpec, name: str) -> ErrorInfo:
    """The error for arguments whose reading itself failed (a mapping whose items raise, a
    hostile ``__getitem__``): the caller sent something that is not a JSON object. Only the
    exception's type is named; its text may quote anything."""
    problem = f"The arguments could not be read ({type(exc).__name__[:100]}): send one JSON object"
    message = (
        f"Invalid arguments: {problem}. "
        f"Parameters: {', '.join(spec.parameter_names) or 'none'}. "
        "Fix the arguments and call the tool again."
    )
    return make_error_info(
        ToolInputError, message, name, details={"errors": [{"field": "", "problem": problem}]}
    )


def _renders(error_type: str, context: dict[str, Any] | None, text: str) -> bool:
    """Whether ``text`` is pydantic's own message for ``error_type`` with ``context``, for
    Python or JSON input."""
    try:
        if text == _rendered(error_type, context, "python"):
            return True
        return text == _rendered(error_type, context, "json")
    except TypeError:  # a context that does not fit the type's template: a custom error
        return False


def _field_problem(error_type: str, message: str | None, field: str) -> str:
    """What the model is told about one field; ``message`` is pydantic's own text for a
    templated type, or None when the text is not known to be pydantic's."""
    if error_type == "missing":
        return "is required but was not given"
    if error_type == "extra_forbidden":
        return "is not a parameter of this tool"
    if error_type == "json_invalid":
        return "The arguments are not valid JSON: send one JSON object"
    if error_type in ("model_type", "model_attributes_type", "dict_type") and not field:
        return "The arguments must be a JSON object"
    if message is not None and error_type in _TEMPLATED_ERRORS:
        return message.removeprefix("Input ") if message.startswith("Input should") else message
    return f"is not valid ({error_type})"
