"""Signature + docstring -> problems, the input model, the output adapter, and JSON Schemas.

Everything here runs once, when ``@tool`` decorates a function: reflection
(``inspect.signature``, ``typing.get_type_hints``, docstring parsing), building the pydantic
input model and the output ``TypeAdapter``, and rendering both JSON Schemas. Every problem found
on the way is collected as a :class:`Problem`; if there is any, :func:`raise_problems` raises
them all in one :class:`~tdk.errors.ToolDefinitionError`. The result is a public
:class:`ToolDefinition` and the internal :class:`ToolSpec` that execution reads on every call.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import math
import re
import reprlib
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Final,
    NamedTuple,
    NoReturn,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import (
    GenerateJsonSchema,
    JsonSchemaMode,
    JsonSchemaValue,
    PydanticJsonSchemaWarning,
)
from pydantic_core import CoreSchema, PydanticUndefined

from tdk._context import ToolContext
from tdk.errors import ToolDefinitionError, ToolInputSchemaError, ToolOutputSchemaError

if TYPE_CHECKING:
    from docstring_parser import DocstringMeta

#: The rule for tool names shared by OpenAI, Anthropic and MCP hosts.
TOOL_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: Configuration of every input model: unknown arguments are rejected, submitted values never
#: appear in validation error text, and any parameter name is allowed.
INPUT_MODEL_CONFIG: Final = ConfigDict(
    extra="forbid", hide_input_in_errors=True, protected_namespaces=()
)

_TYPE_HINT: Final = (
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
    """Stable names of the definition problems ``@tool`` detects (``docs/definitions.md``)."""

    NOT_A_FUNCTION = "not_a_function"
    ALREADY_A_TOOL = "already_a_tool"
    GENERATOR_FUNCTION = "generator_function"
    INVALID_NAME = "invalid_name"
    MISSING_DESCRIPTION = "missing_description"
    INVALID_REQUIREMENT = "invalid_requirement"
    DUPLICATE_REQUIREMENT = "duplicate_requirement"
    INVALID_TIMEOUT = "invalid_timeout"
    INVALID_DEPRECATION = "invalid_deprecation"

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
        _P.ALREADY_A_TOOL,
        _P.GENERATOR_FUNCTION,
        _P.INVALID_NAME,
        _P.MISSING_DESCRIPTION,
        _P.INVALID_REQUIREMENT,
        _P.DUPLICATE_REQUIREMENT,
        _P.INVALID_TIMEOUT,
        _P.INVALID_DEPRECATION,
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


class ToolRequirements(BaseModel):
    """What a tool needs from its :class:`~tdk.ToolContext` before it can run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secrets: tuple[str, ...] = ()
    """Names of the secrets the tool reads with ``context.get_secret``."""
    metadata: tuple[str, ...] = ()
    """Names of the metadata values the tool reads with ``context.get_metadata``."""


_NO_REQUIREMENTS: Final = ToolRequirements()


class ToolDefinition(BaseModel):
    """What a host shows the model about a tool: name, description and JSON Schemas.

    Built once by ``@tool``. ``input_schema`` is a JSON Schema (Draft 2020-12) object with
    ``type``, ``properties`` (each with a ``description``), ``required``,
    ``additionalProperties: false`` and, when models are involved, ``$defs``. Treat the
    schemas as read-only.

    .. versionadded:: 0.1.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The name the model calls the tool by (``^[A-Za-z0-9_-]{1,64}$``)."""
    description: str
    """What the tool does, for the model."""
    input_schema: dict[str, Any]
    """JSON Schema of the arguments object."""
    output_schema: dict[str, Any]
    """JSON Schema of the value the tool returns (serialisation mode)."""
    requirements: ToolRequirements = _NO_REQUIREMENTS
    """Secrets and metadata the tool needs from its context."""
    deprecation_message: str | None = None
    """Set when the tool is deprecated: what to use instead."""
    toolkit: str | None = None
    """Name of the toolkit the definition was listed by; None for a lone tool."""


#: The fields-set every definition built by ``@tool`` shares (all fields are given). Sharing
#: is safe because definitions are frozen and ``model_copy`` copies the set before updating
#: it; it saves a set per tool.
_DEFINITION_FIELDS: Final = set(ToolDefinition.model_fields)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Everything execution needs on each call, computed once by ``@tool``.

    Execution validates arguments with ``input_model`` (which accepts the advertised names),
    turns the validated model into keyword arguments with :meth:`arguments`, calls the
    function (awaiting it when ``is_async``), and validates the return value with
    ``output_adapter``.
    """

    input_model: type[BaseModel]
    """Validates the arguments object, by advertised name (a field's name, or its alias when the
    parameter is renamed or its name is one pydantic cannot use)."""
    output_adapter: TypeAdapter[Any]
    """Validates and serialises the return value."""
    context_parameter: str | None
    """Name of the parameter that receives the :class:`~tdk.ToolContext`, if any."""
    is_async: bool
    """True for ``async def`` tools (awaited), False for plain ones."""
    requirements: ToolRequirements
    """Secrets and metadata that must be in the context before the body runs."""
    timeout: float | None
    """The tool's own time limit in seconds; None for no limit."""
    renames: Mapping[str, str]
    """Python parameter name -> name in the input schema, for renamed parameters only; every
    other parameter is advertised under its own name (see :meth:`advertised`)."""
    field_parameters: tuple[tuple[str, str], ...] = ()
    """(model field, Python parameter) pairs for the few names pydantic cannot use as fields
    (``json``, ``schema``, ``_private``...); every other field is named like its parameter."""

    def advertised(self, parameter: str) -> str:
        """The name under which the input schema advertises a Python parameter."""
        return self.renames.get(parameter, parameter)

    def arguments(self, validated: BaseModel, context: ToolContext | None) -> dict[str, Any]:
        """Keyword arguments for the function from a validated ``input_model`` instance.

        Model-typed parameters stay model instances. The context parameter, if any, receives
        ``context`` (an empty :class:`~tdk.ToolContext` when None).
        """
        values = dict(validated.__dict__)
        for field_name, parameter in self.field_parameters:
            values[parameter] = values.pop(field_name)
        if self.context_parameter is not None:
            values[self.context_parameter] = context if context is not None else ToolContext()
        return values


class ToolOptions(NamedTuple):
    """The options given to ``@tool(...)``, as given (they are checked by :func:`define_tool`)."""

    name: object = None
    description: object = None
    requires_secrets: object = ()
    requires_metadata: object = ()
    timeout: object = None
    deprecated: object = None


def define_tool(
    fn: Callable[..., Any], options: ToolOptions, localns: Mapping[str, Any] | None
) -> tuple[ToolDefinition, ToolSpec]:
    """Check ``fn`` and build its definition and spec, or raise every problem at once.

    ``localns`` is the namespace of the scope that applied ``@tool`` when it is not the
    module (a function or class body), so annotations naming local classes resolve.
    """
    builder = _Builder(fn, options, localns)
    return builder.build()


class _Builder:
    """Collects the problems and the pieces of one definition."""

    def __init__(
        self, fn: Callable[..., Any], options: ToolOptions, localns: Mapping[str, Any] | None
    ) -> None:
        self.fn = fn
        self.options = options
        self.localns = localns
        self.problems: list[Problem] = []
        given_name = options.name
        self.name: str = given_name if isinstance(given_name, str) else fn.__name__

    def add(self, kind: ProblemKind, parameter: str | None, problem: str, hint: str) -> None:
        self.problems.append(Problem(kind, parameter, _one_line(problem), _one_line(hint)))

    def build(self) -> tuple[ToolDefinition, ToolSpec]:
        fn = self.fn
        self._check_name()
        doc = _parse_docstring(fn.__doc__)
        description = self._description(doc)
        secrets = self._requirements("requires_secrets", "secret", "API_KEY")
        metadata = self._requirements("requires_metadata", "metadata value", "tenant_id")
        timeout = self._timeout()
        deprecation = self._deprecation()
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            self.add(
                ProblemKind.GENERATOR_FUNCTION,
                None,
                f"function '{fn.__name__}' yields values instead of returning one",
                "return the complete value, for example a list, instead of yielding parts",
            )
        hints, failures = _resolve_hints(fn, self.localns)
        inputs = _Inputs(self, hints, failures, doc)
        signature = inspect.signature(fn)
        inputs.collect(signature)
        model, input_schema = inputs.build_model()
        adapter, output_schema = self._output(hints, failures)
        if self.problems:
            raise_problems(
                self.name, _where(fn), _in_signature_order(self.problems, signature.parameters)
            )
        assert model is not None
        assert input_schema is not None
        assert adapter is not None
        assert output_schema is not None
        requirements = (
            ToolRequirements(secrets=secrets, metadata=metadata)
            if secrets or metadata
            else _NO_REQUIREMENTS
        )
        definition = ToolDefinition.model_construct(
            _DEFINITION_FIELDS,
            name=self.name,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            requirements=requirements,
            deprecation_message=deprecation,
            toolkit=None,
        )
        spec = ToolSpec(
            input_model=model,
            output_adapter=adapter,
            context_parameter=inputs.context_parameter,
            is_async=inspect.iscoroutinefunction(fn),
            requirements=requirements,
            timeout=timeout,
            renames=_renames(inputs.advertised),
            field_parameters=tuple(inputs.field_parameters),
        )
        return definition, spec

    # -- the tool as a whole ---------------------------------------------------------------

    def _check_name(self) -> None:
        given = self.options.name
        if given is not None and not isinstance(given, str):
            self.add(
                ProblemKind.INVALID_NAME,
                None,
                f"name= must be a string, not {type(given).__name__}",
                "pass a name such as name='search_issues'",
            )
        elif TOOL_NAME_PATTERN.fullmatch(self.name) is None:
            source = "name=" if given is not None else "the function name"
            self.add(
                ProblemKind.INVALID_NAME,
                None,
                f"tool name {_quote(self.name)} ({source}) is not 1-64 letters, digits, '_' or '-'",
                "pass a valid name, e.g. @tool(name='search_issues')",
            )

    def _description(self, doc: _Doc) -> str:
        given = self.options.description
        if given is None:
            if doc.description:
                return doc.description
            self.add(
                ProblemKind.MISSING_DESCRIPTION,
                None,
                "the tool has no description: no docstring and no description=",
                "add a docstring saying what the tool does, or pass description='...'",
            )
        elif not isinstance(given, str) or not given.strip():
            self.add(
                ProblemKind.MISSING_DESCRIPTION,
                None,
                "description= must be a non-blank string",
                "say what the tool does, e.g. description='Search the issues of a repository'",
            )
        else:
            return inspect.cleandoc(given)
        return ""

    def _requirements(self, option: str, what: str, example: str) -> tuple[str, ...]:
        given = getattr(self.options, option)
        if isinstance(given, str) or not isinstance(given, Iterable):
            self.add(
                ProblemKind.INVALID_REQUIREMENT,
                None,
                f"{option}= must be a list of names, not {type(given).__name__}",
                f"write {option}=['{example}'] even for a single {what}",
            )
            return ()
        names: list[str] = []
        seen: dict[str, str] = {}
        for item in given:
            if not isinstance(item, str) or not item.strip():
                self.add(
                    ProblemKind.INVALID_REQUIREMENT,
                    None,
                    f"{option}= contains {_quote(item)}, which is not a non-blank name",
                    f"list each {what} by its name, e.g. {option}=['{example}']",
                )
                continue
            folded = item.casefold()
            if folded in seen:
                self.add(
                    ProblemKind.DUPLICATE_REQUIREMENT,
                    None,
                    f"{option}= names {_quote(seen[folded])} and {_quote(item)}, which are "
                    "the same ignoring case",
                    f"list each {what} once",
                )
                continue
            seen[folded] = item
            names.append(item)
        return tuple(names)

    def _timeout(self) -> float | None:
        given = self.options.timeout
        if given is None:
            return None
        if (
            isinstance(given, bool)
            or not isinstance(given, int | float)
            or not math.isfinite(given)
            or given <= 0
        ):
            self.add(
                ProblemKind.INVALID_TIMEOUT,
                None,
                f"timeout= must be a positive number of seconds, not {_quote(given)}",
                "pass e.g. timeout=30, or leave it out for no time limit",
            )
            return None
        return float(given)

    def _deprecation(self) -> str | None:
        given = self.options.deprecated
        if given is None:
            return None
        if not isinstance(given, str) or not given.strip():
            self.add(
                ProblemKind.INVALID_DEPRECATION,
                None,
                f"deprecated= must be a non-blank message, not {_quote(given)}",
                "say what to use instead, e.g. deprecated='use search_issues instead'",
            )
            return None
        return given

    def _output(
        self, hints: Mapping[str, Any], failures: Mapping[str, Exception]
    ) -> tuple[TypeAdapter[Any] | None, dict[str, Any] | None]:
        if "return" in failures:
            self.add(
                ProblemKind.UNRESOLVED_RETURN_ANNOTATION,
                "return",
                f"the return annotation {_unresolved(failures['return'])}",
                _unresolved_hint(failures["return"]),
            )
            return None, None
        if "return" not in hints:
            self.add(
                ProblemKind.MISSING_RETURN_ANNOTATION,
                "return",
                "the function has no return annotation",
                "annotate what it returns, e.g. -> str, or -> None when it returns nothing",
            )
            return None, None
        annotation = hints["return"]
        try:
            return _output_adapter(annotation)
        except Exception as exc:
            self.add(
                ProblemKind.UNSUPPORTED_RETURN_TYPE,
                "return",
                f"the return type is {_type_text(annotation)}, "
                f"which {_type_trouble(exc, 'serialise')}",
                _TYPE_HINT,
            )
            return None, None


class _Inputs:
    """The parameters of one function: problems, fields of the input model, and names."""

    def __init__(
        self,
        builder: _Builder,
        hints: Mapping[str, Any],
        failures: Mapping[str, Exception],
        doc: _Doc,
    ) -> None:
        self.builder = builder
        self.hints = hints
        self.failures = failures
        self.doc = doc
        self.context_parameter: str | None = None
        self.fields: dict[str, Any] = {}
        """model field name -> annotation (with our ``Field`` last)."""
        self.field_owner: dict[str, str] = {}
        """model field name -> Python parameter name."""
        self.advertised: dict[str, str] = {}
        self.field_parameters: list[tuple[str, str]] = []
        self.defaults: dict[str, Any] = {}
        """advertised name -> plain default, validated once the model exists."""
        self.descriptions: dict[str, str] = {}
        """advertised name -> description."""
        self.taken: set[str] = set()
        """Parameter and model field names in use."""

    def collect(self, signature: inspect.Signature) -> None:
        add = self.builder.add
        self.taken.update(signature.parameters)
        for parameter in signature.parameters.values():
            self._parameter(parameter)
        for documented in self.doc.params:
            if documented not in signature.parameters:
                add(
                    ProblemKind.UNKNOWN_DOCUMENTED_PARAMETER,
                    documented,
                    f"the docstring documents parameter '{documented}', which the function "
                    "does not have",
                    "remove the entry or fix its spelling",
                )
        owners: dict[str, str] = {}
        for owner, advertised in self.advertised.items():
            other = owners.setdefault(advertised, owner)
            if other != owner:
                add(
                    ProblemKind.DUPLICATE_PARAMETER_NAME,
                    owner,
                    f"parameters '{other}' and '{owner}' are both advertised as '{advertised}'",
                    "give each parameter a distinct name in the schema",
                )

    def _parameter(self, parameter: inspect.Parameter) -> None:
        add, name = self.builder.add, parameter.name
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            add(
                ProblemKind.VARIADIC_PARAMETER,
                name,
                f"parameter '{star}{name}' accepts any number of arguments, which a JSON "
                "Schema cannot describe",
                "replace it with named parameters, or one parameter of type list[...] / "
                "dict[str, ...]",
            )
            return
        if parameter.kind is parameter.POSITIONAL_ONLY:
            add(
                ProblemKind.POSITIONAL_ONLY_PARAMETER,
                name,
                f"parameter '{name}' is positional-only, but tools are called with keyword "
                "arguments",
                "remove the '/' from the signature",
            )
        if name in self.failures:
            add(
                ProblemKind.UNRESOLVED_ANNOTATION,
                name,
                f"the annotation of parameter '{name}' {_unresolved(self.failures[name])}",
                _unresolved_hint(self.failures[name]),
            )
            return
        if name not in self.hints:
            add(
                ProblemKind.MISSING_ANNOTATION,
                name,
                f"parameter '{name}' has no type annotation",
                f"add one, e.g. {name}: str",
            )
            if not self.doc.params.get(name):
                self._missing_description(name)
            return
        hint = self.hints[name]
        if _is_context(hint):
            if self.context_parameter is not None:
                add(
                    ProblemKind.MULTIPLE_CONTEXT_PARAMETERS,
                    name,
                    f"parameters '{self.context_parameter}' and '{name}' both ask for the "
                    "ToolContext",
                    "keep one ToolContext parameter",
                )
            else:
                self.context_parameter = name
            return
        self._field(parameter, hint)

    def _field(self, parameter: inspect.Parameter, hint: Any) -> None:
        add, name = self.builder.add, parameter.name
        base, metadata = hint, cast(tuple[Any, ...], ())
        if get_origin(hint) is Annotated:
            base, metadata = hint.__origin__, hint.__metadata__
        strings = [item for item in metadata if isinstance(item, str)]
        kept = [item for item in metadata if not isinstance(item, str)]
        default: Any = parameter.default
        if isinstance(default, FieldInfo):  # ``x: int = Field(3, description=...)``
            kept.append(default)
            default = parameter.empty
        infos = [item for item in kept if isinstance(item, FieldInfo)]

        ok = True
        if len(strings) > 2:
            add(
                ProblemKind.TOO_MANY_ANNOTATED_STRINGS,
                name,
                f"parameter '{name}' has {len(strings)} strings in Annotated[...], which takes "
                "at most two: a new name and a description",
                'use Annotated[T, "description"] or Annotated[T, "new_name", "description"]',
            )
            ok = False
        advertised = self._advertised_name(name, strings, infos)
        description = strings[-1] if strings else None
        default_value = default  # the plain default, or ``parameter.empty``
        for info in infos:
            description = description or info.description
            factory = info.default_factory
            if factory is not None and not callable(factory):
                add(
                    ProblemKind.INVALID_DEFAULT_FACTORY,
                    name,
                    f"the default_factory of parameter '{name}' is {_quote(factory)}, which "
                    "is not callable",
                    "pass a function, e.g. Field(default_factory=list)",
                )
                ok = False
            if info.default is not PydanticUndefined:
                default_value = info.default
        description = (description or "").strip() or self.doc.params.get(name, "")
        if not description:
            self._missing_description(name)
            ok = False
        if not ok or advertised is None:
            return
        if default_value is not parameter.empty:
            self.defaults[advertised] = default_value
        field_name = _field_name(name, self.taken)
        if field_name != name:
            self.field_parameters.append((field_name, name))
        options: dict[str, Any] = {"description": description}
        if advertised != field_name:  # only renamed fields carry an alias (it costs memory)
            options["alias"] = advertised
        ours = Field(**options) if default is parameter.empty else Field(default, **options)
        # Our Field goes last so it wins over the user's; plain types need no Annotated.
        self.fields[field_name] = Annotated[(base, *kept, ours)] if kept else (base, ours)
        self.descriptions[advertised] = description
        self.field_owner[field_name] = name

    def _advertised_name(self, name: str, strings: list[str], infos: list[FieldInfo]) -> str | None:
        add = self.builder.add
        for info in infos:
            # Field(alias=...) sets both of these to the alias; only other values are refused.
            if info.validation_alias not in (None, info.alias) or (
                info.serialization_alias not in (None, info.alias)
            ):
                add(
                    ProblemKind.INVALID_RENAME,
                    name,
                    f"parameter '{name}' uses validation_alias/serialization_alias, which "
                    "tools do not support",
                    'rename with Annotated[T, "new_name", "description"]',
                )
                return None
        renamed = strings[0] if len(strings) == 2 else None
        for info in infos:
            if renamed is None and info.alias is not None:
                renamed = info.alias
        if renamed is None:
            self.advertised[name] = name
            return name
        if not renamed.isidentifier():
            add(
                ProblemKind.INVALID_RENAME,
                name,
                f"parameter '{name}' is renamed to {_quote(renamed)}, which is not an identifier",
                "use letters, digits and '_' and do not start with a digit, e.g. 'query'",
            )
            return None
        self.advertised[name] = renamed
        return renamed

    def _missing_description(self, name: str) -> None:
        self.builder.add(
            ProblemKind.MISSING_PARAMETER_DESCRIPTION,
            name,
            f"parameter '{name}' has no description",
            f'document it in the docstring\'s Args section as "{name}: ...", or use '
            'Annotated[T, "description"] or Field(description=...)',
        )

    def build_model(self) -> tuple[type[BaseModel] | None, dict[str, Any] | None]:
        """The input model and its JSON Schema, adding a problem for each field that cannot be
        built or rendered and for each default that does not validate. Returns (None, None)
        when any problem was found."""
        name = self.builder.name
        model: type[BaseModel] | None = None
        schema: dict[str, Any] | None = None
        try:
            model = _create_model(name, self.fields)
            schema = _input_schema(model, self.descriptions)
        except Exception as whole:
            self._drop_unsupported(name, whole)
            model = None
            with contextlib.suppress(Exception):  # the fields that remain, for their defaults
                model = _create_model(name, self.fields)
        if model is not None:
            self._check_defaults(model)
        if self.builder.problems:
            return None, None
        return model, schema

    def _drop_unsupported(self, name: str, whole: Exception) -> None:
        """Add a problem for (and drop) each field that cannot be built or rendered alone."""
        before = len(self.builder.problems)
        for field_name, annotation in list(self.fields.items()):
            try:
                _input_schema(_create_model(name, {field_name: annotation}), {})
            except Exception as exc:
                parameter = self.field_owner[field_name]
                del self.fields[field_name]
                self.defaults.pop(self.advertised[parameter], None)
                self.builder.add(
                    ProblemKind.UNSUPPORTED_TYPE,
                    parameter,
                    f"parameter '{parameter}' has type {_type_text(self.hints[parameter])}, "
                    f"which {_type_trouble(exc, 'validate')}",
                    _TYPE_HINT,
                )
        if len(self.builder.problems) == before:  # pragma: no cover - defensive
            # pydantic failed on the fields together but on none alone: still say so.
            self.builder.add(
                ProblemKind.UNSUPPORTED_TYPE,
                None,
                f"the parameters cannot be turned into a JSON Schema ({_first_sentence(whole)})",
                _TYPE_HINT,
            )

    def _check_defaults(self, model: type[BaseModel]) -> None:
        if not self.defaults:
            return
        try:
            model.model_validate(self.defaults)
        except ValidationError as exc:
            by_alias = {advertised: p for p, advertised in self.advertised.items()}
            for error in exc.errors(include_input=False, include_url=False):
                location = error["loc"]
                if error["type"] == "missing" or not location or location[0] not in by_alias:
                    continue
                parameter = by_alias[str(location[0])]
                self.builder.add(
                    ProblemKind.INVALID_DEFAULT,
                    parameter,
                    f"the default of parameter '{parameter}' "
                    f"({_quote(self.defaults[str(location[0])])}) is not a valid "
                    f"{_type_text(self.hints[parameter])}: {error['msg']}",
                    "change the default or the type, e.g. T | None for a default of None",
                )


_NO_RENAMES: Final[Mapping[str, str]] = types.MappingProxyType({})


def _renames(advertised: Mapping[str, str]) -> Mapping[str, str]:
    """The renamed entries of ``advertised`` (most tools have none: share one empty map)."""
    renamed = {name: new for name, new in advertised.items() if name != new}
    return types.MappingProxyType(renamed) if renamed else _NO_RENAMES


def _field_name(name: str, names: set[str]) -> str:
    """``name`` if pydantic accepts it as a field name, else a free variant of it."""
    if not name.startswith("_") and not hasattr(BaseModel, name):
        return name
    candidate = name.lstrip("_") or "field"
    while candidate in names or hasattr(BaseModel, candidate):
        candidate += "_"
    names.add(candidate)
    return candidate


def _create_model(name: str, fields: Mapping[str, Any]) -> type[BaseModel]:
    return create_model(name, __config__=INPUT_MODEL_CONFIG, **fields)


def _input_schema(model: type[BaseModel], descriptions: Mapping[str, str]) -> dict[str, Any]:
    """The model's JSON Schema in the shape tools advertise (fixed key order, ``required``
    always present, no titles, every property described)."""
    with warnings.catch_warnings():
        # A default that cannot be rendered in JSON is left out of the schema; say nothing.
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        raw = model.model_json_schema(schema_generator=_SchemaGenerator)
    properties = raw.get("properties", {})
    for name, description in descriptions.items():
        # pydantic leaves a description out when it equals the referenced type's docstring.
        properties[name].setdefault("description", description)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": raw.get("required", []),
        "additionalProperties": False,
    }
    if "$defs" in raw:
        schema["$defs"] = raw["$defs"]
    return schema


def _build_output_adapter(annotation: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    return adapter, adapter.json_schema(mode="serialization", schema_generator=_SchemaGenerator)


_cached_output_adapter = functools.lru_cache(maxsize=512)(_build_output_adapter)


def _output_adapter(annotation: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    """The adapter and JSON Schema of a return type, shared between tools returning the same
    (hashable) type; the schema is copied so that definitions never share a dict."""
    try:
        hash(annotation)
    except TypeError:  # e.g. Annotated[int, {"unit": "ms"}]
        adapter, schema = _build_output_adapter(annotation)
    else:
        adapter, schema = _cached_output_adapter(annotation)
    return adapter, deepcopy(schema)


# Keywords whose values are data, not schemas: never strip 'title' inside them.
_DATA_KEYWORDS: Final = frozenset({"default", "enum", "const", "examples", "required"})
# Keywords whose values map names to schemas.
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
)


class _SchemaGenerator(GenerateJsonSchema):
    """pydantic's generator without ``title`` keys (pydantic sets one on every model, field
    and enum; for a model reading the schema they are noise)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        return cast(JsonSchemaValue, _without_titles(super().generate(schema, mode)))


def _without_titles(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: _without_titles(item) for name, item in value.items()}
        else:
            result[key] = _without_titles(value)
    return result


def _in_signature_order(problems: list[Problem], parameters: Iterable[str]) -> list[Problem]:
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


# -- docstrings ---------------------------------------------------------------------------


class _Doc(NamedTuple):
    description: str
    params: Mapping[str, str]


_NO_DOC: Final = _Doc("", {})
_PARAMETER_SECTIONS: Final = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


def _parse_docstring(doc: str | None) -> _Doc:
    """The description (the docstring without its parameter section) and the documented
    parameters, in Google, NumPy, reST or Epydoc style (found by docstring-parser)."""
    if not doc or not doc.strip():
        return _NO_DOC
    text = inspect.cleandoc(doc)
    if "\n" not in text:
        return _Doc(text, {})
    import docstring_parser  # here, not at the top: it is only needed for sectioned docstrings

    google = docstring_parser.DocstringStyle.GOOGLE
    try:
        # Google style first: one parse instead of the four that auto-detection runs; when it
        # finds no section at all, auto-detection picks among all styles.
        parsed = docstring_parser.parse(text, google)
        if not parsed.meta:
            parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:  # pragma: no cover - only when every style fails
        return _Doc(text, {})
    params: dict[str, str] = {}
    sections = [parsed.description or ""]
    for meta in parsed.meta:
        if isinstance(meta, docstring_parser.DocstringParam):
            name = meta.arg_name.lstrip("*")
            if name and meta.args[0] in _PARAMETER_SECTIONS:
                params[name] = (meta.description or "").strip()
            continue
        sections.append(_render_section(meta, docstring_parser))
    description = "\n\n".join(section.strip() for section in sections if section.strip())
    return _Doc(description, params)


def _render_section(meta: DocstringMeta, parser: ModuleType) -> str:
    """A non-parameter section (Returns, Raises, Examples...) as plain text."""
    if isinstance(meta, parser.DocstringReturns):
        label = "Yields" if meta.is_generator else "Returns"
    elif isinstance(meta, parser.DocstringRaises):
        label = f"Raises {meta.type_name}" if meta.type_name else "Raises"
    else:
        label = meta.args[0].capitalize() if meta.args else "Note"
    body = "\n".join(
        part for part in (getattr(meta, "snippet", None), meta.description) if part
    ).strip()
    if not body:
        return ""
    return f"{label}:\n{body}" if "\n" in body else f"{label}: {body}"


# -- annotations --------------------------------------------------------------------------


def _resolve_hints(
    fn: Callable[..., Any], localns: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Resolved annotations by name, and the exception of each one that failed to resolve."""
    namespace = dict(localns) if localns is not None else None
    with contextlib.suppress(Exception):  # else resolve one at a time to name each failure
        return get_type_hints(fn, localns=namespace, include_extras=True), {}
    globalns = getattr(fn, "__globals__", {})
    hints: dict[str, Any] = {}
    failures: dict[str, Exception] = {}
    for name, annotation in inspect.get_annotations(fn).items():
        holder = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            hints[name] = get_type_hints(
                holder, globalns=globalns, localns=namespace, include_extras=True
            )[name]
        except Exception as exc:
            failures[name] = exc
    return hints, failures


def _unresolved(exc: Exception) -> str:
    if isinstance(exc, NameError) and exc.name:
        return f"refers to '{exc.name}', which is not defined where the tool is defined"
    return f"cannot be evaluated ({_first_sentence(exc)})"


def _unresolved_hint(exc: Exception) -> str:
    if isinstance(exc, NameError) and exc.name:
        return f"import or define '{exc.name}' at module level, not only under `if TYPE_CHECKING:`"
    return "write the annotation as a valid type expression"


def _is_context(hint: Any) -> bool:
    """Whether ``hint`` asks for the context: ``ToolContext`` or ``ToolContext | None``."""
    if get_origin(hint) is Annotated:
        hint = hint.__origin__
    if get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            return False
        hint = members[0]
    return isinstance(hint, type) and issubclass(hint, ToolContext)


# -- text ---------------------------------------------------------------------------------

_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60


def _quote(value: object) -> str:
    return _short_repr.repr(value)


_CLASS_REPR: Final = re.compile(r"<class '(?:[\w<>]+\.)*(\w+)'>")
_QUALIFIER: Final = re.compile(r"\b(?:[A-Za-z_]\w*\.|<locals>\.)+(?=[A-Za-z_])")


def _type_text(annotation: Any) -> str:
    """How a message names a type: as written in code, without module paths."""
    if get_origin(annotation) is Annotated:
        annotation = annotation.__origin__
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return _QUALIFIER.sub("", repr(annotation))


def _type_trouble(exc: Exception, verb: str) -> str:
    """Why pydantic could not use a type, in the words of a problem text."""
    if isinstance(exc, PydanticSchemaGenerationError):
        return f"pydantic cannot {verb}"
    if isinstance(exc, PydanticInvalidForJsonSchema):
        return "cannot be described as JSON Schema"
    return f"pydantic rejects: {_first_sentence(exc)}"


def _first_sentence(exc: BaseException) -> str:
    """The first line of an exception's text (``<class 'pkg.mod.X'>`` shortened to ``X``)."""
    text = _CLASS_REPR.sub(r"\1", str(exc).strip().split("\n", 1)[0].strip())
    if not text:
        return type(exc).__name__
    return text if len(text) <= _MAX_QUOTED else text[: _MAX_QUOTED - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    location = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"{fn.__module__}.{fn.__qualname__}{location}"
