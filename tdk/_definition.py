"""Function + ``@tool`` options -> the public ``ToolDefinition`` and the internal ``ToolSpec``.

Everything here runs once, when ``@tool`` decorates a function. :func:`define_tool` reads the
docstring (:mod:`tdk._docstrings`) and checks, in this order, the options given to ``@tool``
(:mod:`tdk._options`), the function itself, its parameters (:mod:`tdk._signature`, which also
builds the input model) and its return annotation (whose ``TypeAdapter`` and JSON Schema come
from :mod:`tdk._schema`). Every problem found on the way is collected in one list; if there is
any, they are all raised in one :class:`~tdk.errors.ToolDefinitionError` (:mod:`tdk._problems`).
The result is a public :class:`ToolDefinition` and the internal :class:`ToolSpec` that
execution reads on every call.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, TypeAdapter

from tdk._context import ToolContext
from tdk._docstrings import parse_docstring
from tdk._options import (
    check_deprecation,
    check_description,
    check_inline,
    check_name,
    check_requirements,
    check_timeout,
)
from tdk._problems import (
    TYPE_HINT,
    Problem,
    ProblemKind,
    Problems,
    in_signature_order,
    raise_problems,
    type_text,
    type_trouble,
)
from tdk._schema import core_may_hold_numbers, may_hold_numbers, output_adapter, output_extra
from tdk._signature import Parameters, resolve_hints, unresolved, unresolved_hint

#: ``tdk._tool`` imports ``Problem``, ``ProblemKind`` and ``raise_problems`` from here too.
__all__ = [
    "Problem",
    "ProblemKind",
    "ToolDefinition",
    "ToolOptions",
    "ToolRequirements",
    "ToolSpec",
    "define_tool",
    "raise_problems",
]


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
    inline: bool
    """True for sync tools that run on the event loop itself (``@tool(inline=True)``)."""
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
    output_extra: Literal["forbid"] | None = None
    """``"forbid"`` to validate the return value refusing keys its models and dataclasses do
    not declare (see :func:`tdk._schema.output_extra`)."""
    output_numbers: bool = True
    """Whether the return value may hold numbers (its JSON Schema or its pydantic core schema
    has a number or an untyped part, or code of the type's own validates or serializes part
    of it): execution then checks that JSON can carry them (no NaN, no infinity, no integer
    too long to write out)."""
    parameter_names: tuple[str, ...] = field(init=False)
    """The advertised argument names, in order, as an input error lists them; derived from
    ``input_model``."""

    def __post_init__(self) -> None:
        names = (info.alias or name for name, info in self.input_model.model_fields.items())
        object.__setattr__(self, "parameter_names", tuple(names))

    def advertised(self, parameter: str) -> str:
        """The name under which the input schema advertises a Python parameter."""
        return self.renames.get(parameter, parameter)

    def arguments(self, validated: BaseModel, context: ToolContext | None) -> dict[str, Any]:
        """Keyword arguments for the function from a validated ``input_model`` instance (not
        to be changed: it may be the instance's own ``__dict__``).

        Model-typed parameters stay model instances. The context parameter, if any, receives
        ``context`` (an empty :class:`~tdk.ToolContext` when None).
        """
        if not self.field_parameters and self.context_parameter is None:
            return validated.__dict__  # read-only: the caller unpacks it into the call
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
    inline: object = False


def define_tool(
    fn: Callable[..., Any], options: ToolOptions, localns: Mapping[str, Any] | None
) -> tuple[ToolDefinition, ToolSpec]:
    """Check ``fn`` and build its definition and spec, or raise every problem at once.

    ``localns`` is the namespace of the scope that applied ``@tool`` when it is not the
    module (a function or class body), so annotations naming local classes resolve.
    """
    problems = Problems()
    name = check_name(problems, options.name, fn.__name__)
    doc = parse_docstring(fn.__doc__)
    description = check_description(problems, options.description, doc)
    secrets = check_requirements(
        problems, options.requires_secrets, "requires_secrets", "secret", "API_KEY"
    )
    metadata = check_requirements(
        problems, options.requires_metadata, "requires_metadata", "metadata value", "tenant_id"
    )
    timeout = check_timeout(problems, options.timeout)
    deprecation = check_deprecation(problems, options.deprecated)
    is_async = inspect.iscoroutinefunction(fn)
    inline = check_inline(problems, options.inline, is_async, options.timeout)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        problems.add(
            ProblemKind.GENERATOR_FUNCTION,
            None,
            f"function '{fn.__name__}' yields values instead of returning one",
            "return the complete value, for example a list, instead of yielding parts",
        )
    hints, failures = resolve_hints(fn, localns)
    inputs = Parameters(problems, name, hints, failures, doc, fn=fn)
    signature = inspect.signature(fn)
    inputs.collect(signature)
    model, input_schema = inputs.build_model()
    adapter, output_schema = _output(problems, fn, hints, failures)
    if problems:
        raise_problems(name, _where(fn), in_signature_order(problems.found, signature.parameters))
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
        name=name,
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
        is_async=is_async,
        inline=inline,
        requirements=requirements,
        timeout=timeout,
        renames=_renames(inputs.advertised),
        field_parameters=tuple(inputs.field_parameters),
        output_extra=output_extra(output_schema),
        output_numbers=(
            may_hold_numbers(output_schema) or core_may_hold_numbers(adapter.core_schema)
        ),
    )
    return definition, spec


def _output(
    problems: Problems,
    fn: Callable[..., Any],
    hints: Mapping[str, Any],
    failures: Mapping[str, Exception],
) -> tuple[TypeAdapter[Any] | None, dict[str, Any] | None]:
    """The output adapter and schema, or a problem with the return annotation."""
    if "return" in failures:
        problems.add(
            ProblemKind.UNRESOLVED_RETURN_ANNOTATION,
            "return",
            f"the return annotation {unresolved(failures['return'])}",
            unresolved_hint(failures["return"], fn),
        )
        return None, None
    if "return" not in hints:
        problems.add(
            ProblemKind.MISSING_RETURN_ANNOTATION,
            "return",
            "the function has no return annotation",
            "annotate what it returns, e.g. -> str, or -> None when it returns nothing",
        )
        return None, None
    annotation = hints["return"]
    try:
        return output_adapter(annotation)
    except Exception as exc:
        problems.add(
            ProblemKind.UNSUPPORTED_RETURN_TYPE,
            "return",
            f"the return type is {type_text(annotation)}, which {type_trouble(exc, 'serialise')}",
            TYPE_HINT,
        )
        return None, None


_NO_RENAMES: Final[Mapping[str, str]] = types.MappingProxyType({})


def _renames(advertised: Mapping[str, str]) -> Mapping[str, str]:
    """The renamed entries of ``advertised`` (most tools have none: share one empty map)."""
    renamed = {name: new for name, new in advertised.items() if name != new}
    return types.MappingProxyType(renamed) if renamed else _NO_RENAMES


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    location = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"{fn.__module__}.{fn.__qualname__}{location}"
