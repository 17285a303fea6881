"""Definition problems: their kinds, how they are worded, collected and raised all at once.

``@tool`` never stops at the first thing wrong with a function: every check adds a
:class:`Problem` to one :class:`Problems` list, and when the definition is complete
:func:`raise_problems` raises them all in one :class:`~tdk.errors.ToolDefinitionError` (or
its input/output subclass). The helpers at the end word problem texts the same way
everywhere: values quoted short, types named as written in code, exceptions cut to one line.
"""

from __future__ import annotations

import enum
import re
import reprlib
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, NamedTuple, NoReturn, get_args, get_origin

from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError

from tdk._execution.seconds import shown
from tdk.errors import ToolDefinitionError, ToolInputSchemaError, ToolOutputSchemaError

#: The fix for a type pydantic cannot validate, serialise or describe.
TYPE_HINT: Final = (
    "use a JSON-friendly type: str, int, float, bool, None, an Enum or Literal, "
    "list/tuple/set/dict[str, T] of those, a pydantic model, a dataclass or a TypedDict"
)
_MAX_QUOTED: Final = 160


class Scope(enum.Enum):
    """Which part of a definition a problem is in; decides the class of the error."""

    DEFINITION = "definition"
    INPUT = "input"
    OUTPUT = "output"


class ProblemKind(enum.StrEnum):
    """Stable names of the definition problems ``@tool`` detects (``docs/problems.md``)."""

    NOT_A_FUNCTION = "not_a_function"
    METHOD = "method"
    ALREADY_A_TOOL = "already_a_tool"
    GENERATOR_FUNCTION = "generator_function"
    INVALID_NAME = "invalid_name"
    MISSING_DESCRIPTION = "missing_description"
    INVALID_REQUIREMENT = "invalid_requirement"
    DUPLICATE_REQUIREMENT = "duplicate_requirement"
    INVALID_TIMEOUT = "invalid_timeout"
    INVALID_DEPRECATION = "invalid_deprecation"
    INVALID_INLINE = "invalid_inline"
    INVALID_MARK = "invalid_mark"
    CONTRADICTING_MARKS = "contradicting_marks"
    INVALID_SCOPE = "invalid_scope"
    INVALID_APPROVAL = "invalid_approval"
    INVALID_AUTH = "invalid_auth"

    MISSING_ANNOTATION = "missing_annotation"
    UNRESOLVED_ANNOTATION = "unresolved_annotation"
    UNSUPPORTED_TYPE = "unsupported_type"
    MISSING_PARAMETER_DESCRIPTION = "missing_parameter_description"
    UNKNOWN_DOCUMENTED_PARAMETER = "unknown_documented_parameter"
    VARIADIC_PARAMETER = "variadic_parameter"
    POSITIONAL_ONLY_PARAMETER = "positional_only_parameter"
    MULTIPLE_CONTEXT_PARAMETERS = "multiple_context_parameters"
    INVALID_DEFAULT = "invalid_default"
    INVALID_DEFAULT_FACTORY = "invalid_default_factory"
    TOO_MANY_ANNOTATED_STRINGS = "too_many_annotated_strings"
    INVALID_RENAME = "invalid_rename"
    DUPLICATE_PARAMETER_NAME = "duplicate_parameter_name"

    MISSING_RETURN_ANNOTATION = "missing_return_annotation"
    UNRESOLVED_RETURN_ANNOTATION = "unresolved_return_annotation"
    UNSUPPORTED_RETURN_TYPE = "unsupported_return_type"

    @property
    def scope(self) -> Scope:
        """Whether this kind is a definition, input or output problem."""
        if self in _DEFINITION_KINDS:
            return Scope.DEFINITION
        return Scope.OUTPUT if self in _OUTPUT_KINDS else Scope.INPUT


_P = ProblemKind
#: Problems of the tool as a whole; the output kinds below; every other kind is an input kind.
_DEFINITION_KINDS: Final = frozenset(
    {
        _P.NOT_A_FUNCTION,
        _P.METHOD,
        _P.ALREADY_A_TOOL,
        _P.GENERATOR_FUNCTION,
        _P.INVALID_NAME,
        _P.MISSING_DESCRIPTION,
        _P.INVALID_REQUIREMENT,
        _P.DUPLICATE_REQUIREMENT,
        _P.INVALID_TIMEOUT,
        _P.INVALID_DEPRECATION,
        _P.INVALID_INLINE,
        _P.INVALID_MARK,
        _P.CONTRADICTING_MARKS,
        _P.INVALID_SCOPE,
        _P.INVALID_APPROVAL,
        _P.INVALID_AUTH,
    }
)
_OUTPUT_KINDS: Final = frozenset(
    {_P.MISSING_RETURN_ANNOTATION, _P.UNRESOLVED_RETURN_ANNOTATION, _P.UNSUPPORTED_RETURN_TYPE}
)
del _P


class Problem(NamedTuple):
    """One thing wrong with a tool definition, and how to fix it."""

    kind: ProblemKind
    parameter: str | None
    """The parameter concerned, ``"return"`` for the return annotation, None for the tool."""
    problem: str
    hint: str

    def to_dict(self) -> dict[str, str | None]:
        """The entry of ``details["problems"]``."""
        return {
            "parameter": self.parameter,
            "problem": self.problem,
            "kind": self.kind.value,
            "hint": self.hint,
        }


class Problems:
    """The problems found so far in one definition, in the order they were found."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: list[Problem] = []

    def __len__(self) -> int:
        return len(self.found)

    def add(self, kind: ProblemKind, parameter: str | None, problem: str, hint: str) -> None:
        """Record a problem; its texts are folded onto one line."""
        self.found.append(Problem(kind, parameter, _one_line(problem), _one_line(hint)))


_ERROR_CLASSES: Final[Mapping[frozenset[Scope], type[ToolDefinitionError]]] = {
    frozenset({Scope.INPUT}): ToolInputSchemaError,
    frozenset({Scope.OUTPUT}): ToolOutputSchemaError,
}


def raise_problems(tool_name: str | None, where: str, problems: list[Problem]) -> NoReturn:
    """Raise every problem of one definition as one error of the class the rule picks:
    all input -> ``ToolInputSchemaError``, all output -> ``ToolOutputSchemaError``, else
    ``ToolDefinitionError``. ``where`` names the function for the developer message."""
    error_class = _ERROR_CLASSES.get(frozenset(p.kind.scope for p in problems), ToolDefinitionError)
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    message = f"{count}: " + "; ".join(f"{p.problem} ({p.hint})" for p in problems)
    developer = f"@tool found {count} in {where}:\n" + "\n".join(
        f"- {p.kind.value}: {p.problem}. Fix: {p.hint}." for p in problems
    )
    raise error_class(
        message,
        problems=[p.to_dict() for p in problems],
        tool_name=tool_name,
        developer_message=developer,
    )


def in_signature_order(problems: list[Problem], parameters: Iterable[str]) -> list[Problem]:
    """Problems of the tool first, then by parameter in signature order, the return last
    (stable, so problems of one parameter keep the order they were found in)."""
    position = {name: index for index, name in enumerate(parameters)}
    last = len(position) + 1

    def key(problem: Problem) -> int:
        if problem.parameter is None:
            return -1
        if problem.parameter == "return":
            return last + 1
        return position.get(problem.parameter, last)

    return sorted(problems, key=key)


# -- wording ------------------------------------------------------------------------------

_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60


def quote(value: object) -> str:
    """A value as a problem text shows it: its repr, shortened (or what ``shown`` makes of a
    value whose repr fails, such as an int of more than 4,300 digits)."""
    try:
        return _short_repr.repr(value)
    except Exception:
        return shown(value)


_CLASS_REPR: Final = re.compile(r"<class '(?:[\w<>]+\.)*(\w+)'>")
_QUALIFIER: Final = re.compile(r"\b(?:[A-Za-z_]\w*\.|<locals>\.)+(?=[A-Za-z_])")


def type_text(annotation: Any) -> str:
    """How a message names a type: as written in code, without module paths."""
    if get_origin(annotation) is Annotated:
        annotation = annotation.__origin__
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return _QUALIFIER.sub("", repr(annotation))


def type_trouble(exc: Exception, verb: str) -> str:
    """Why pydantic could not use a type, in the words of a problem text."""
    if isinstance(exc, PydanticSchemaGenerationError):
        return f"pydantic cannot {verb}"
    if isinstance(exc, PydanticInvalidForJsonSchema):
        return "cannot be described as JSON Schema"
    return f"pydantic rejects: {first_sentence(exc)}"


def first_sentence(exc: BaseException) -> str:
    """The first line of an exception's text (``<class 'pkg.mod.X'>`` shortened to ``X``)."""
    text = _CLASS_REPR.sub(r"\1", str(exc).strip().split("\n", 1)[0].strip())
    if not text:
        return type(exc).__name__
    return text if len(text) <= _MAX_QUOTED else text[: _MAX_QUOTED - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())
