"""Function + ``@tool`` options -> the public ``ToolDefinition`` and the internal ``ToolSpec``.

Everything here runs once, when ``@tool`` decorates a function. :func:`define_tool` first
checks that it was given a function (not a tool already, not a string given by mistake), then
reads the docstring (:mod:`tdk._define.docstrings`) and checks, in this order, the options
given to ``@tool`` (:mod:`tdk._define.options`), the function itself, its parameters
(:mod:`tdk._define.signature`, which also builds the input model) and its return annotation
(whose ``TypeAdapter`` and JSON Schema come from :mod:`tdk._define.schema`). Every problem
found on the way is collected in one list; if there is any, they are all raised in one
:class:`~tdk.errors.ToolDefinitionError` (:mod:`tdk._define.problems`). The result is a
public :class:`~tdk.ToolDefinition` and the internal :class:`~tdk._define.definition.ToolSpec` that
execution reads on every call.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, NamedTuple, NoReturn, cast

from pydantic import BaseModel, TypeAdapter

from tdk._define.definition import (
    DEFAULT_ANNOTATIONS,
    NO_REQUIREMENTS,
    ApprovalRule,
    ToolAnnotations,
    ToolAuth,
    ToolDefinition,
    ToolRequirements,
    ToolSpec,
)
from tdk._define.docstrings import Doc, parse_docstring
from tdk._define.options import (
    MARKS,
    check_approval_option,
    check_auth,
    check_deprecation,
    check_description,
    check_inline,
    check_marks,
    check_name,
    check_requirements,
    check_scopes,
    check_timeout,
)
from tdk._define.problems import (
    TYPE_HINT,
    Problem,
    ProblemKind,
    Problems,
    in_signature_order,
    raise_problems,
    type_text,
    type_trouble,
)
from tdk._define.schema import core_may_hold_numbers, may_hold_numbers, output_adapter, output_extra
from tdk._define.signature import Parameters, resolve_hints, unresolved, unresolved_hint
from tdk.auth._provider import AuthRequirement

#: The fields-set every definition built by ``@tool`` shares (all fields are given). Sharing
#: is safe because definitions are frozen and ``model_copy`` copies the set before updating
#: it; it saves a set per tool.
_DEFINITION_FIELDS: Final = set(ToolDefinition.model_fields)


class ToolOptions(NamedTuple):
    """The options given to ``@tool(...)``, as given (they are checked by :func:`define_tool`)."""

    name: object = None
    description: object = None
    requires_secrets: object = ()
    requires_metadata: object = ()
    requires_scopes: object = ()
    timeout: object = None
    deprecated: object = None
    inline: object = False
    read_only: object = None
    idempotent: object = None
    destructive: object = None
    open_world: object = None
    requires_approval: object = False
    requires_auth: object = None


def define_tool(
    target: object, options: ToolOptions, localns: Mapping[str, Any] | None, *, tool_type: type
) -> tuple[ToolDefinition, ToolSpec]:
    """Check ``target`` and build its definition and spec, or raise every problem at once.

    ``localns`` is the namespace of the scope that applied ``@tool`` when it is not the
    module (a function or class body), so annotations naming local classes resolve;
    ``tool_type`` is the class of tools (``tdk.Tool``: a tool given again is refused).
    """
    if type(target) is not types.FunctionType and not _is_bound_method(target):  # (by type)
        _raise_not_a_function(target, tool_type)
    fn = cast(types.FunctionType, target)  # (a bound method's signature lacks its receiver)
    problems = Problems()
    doc = parse_docstring(fn.__doc__)
    settings = _checked_settings(problems, options, fn, doc)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        problems.add(
            ProblemKind.GENERATOR_FUNCTION,
            None,
            f"function '{fn.__name__}' yields values instead of returning one",
            "return the complete value, for example a list, instead of yielding parts",
        )
    hints, failures = resolve_hints(fn, localns)
    inputs = Parameters(problems, settings.name, hints, failures, doc, fn=fn)
    signature = inspect.signature(fn)
    inputs.collect(_without_method_receiver(problems, fn, signature))
    if settings.auth is not None and inputs.context_parameter is None:
        problems.add(
            ProblemKind.INVALID_AUTH,
            None,
            f"requires_auth= gives the call the user's token at '{settings.auth.provider.name}'"
            " as context.auth_token, but the function takes no ToolContext parameter",
            "add a parameter annotated ToolContext, e.g. context: ToolContext",
        )
    model, input_schema = inputs.build_model()
    adapter, output_schema = _output(problems, fn, hints, failures)
    if problems:
        found = in_signature_order(problems.found, signature.parameters)
        raise_problems(settings.name, _where(fn), found)
    assert model is not None
    assert input_schema is not None
    assert adapter is not None
    assert output_schema is not None
    definition = _definition(settings, input_schema, output_schema)
    return definition, _spec(definition, settings, inputs, model, adapter)


class _Settings(NamedTuple):
    """The options of ``@tool`` once checked, and what the function says of itself."""

    name: str
    description: str
    requirements: ToolRequirements
    timeout: float | None
    deprecation: str | None
    is_async: bool
    inline: bool
    annotations: ToolAnnotations
    approval: ApprovalRule | Literal[True] | None
    declared_destructive: bool  # (destructive=True given: asks for approval when served)
    auth: AuthRequirement | None


def _checked_settings(
    problems: Problems, options: ToolOptions, fn: Callable[..., Any], doc: Doc
) -> _Settings:
    """The options given to ``@tool``, each checked (a problem recorded for each wrong one)
    in the order their problems are reported."""
    name = check_name(problems, options.name, fn.__name__)
    description = check_description(problems, options.description, doc)
    auth = check_auth(problems, options.requires_auth)
    requirements = _requirements(problems, options, auth)
    timeout = check_timeout(problems, options.timeout)
    deprecation = check_deprecation(problems, options.deprecated)
    is_async = inspect.iscoroutinefunction(fn)
    inline = check_inline(problems, options.inline, is_async, options.timeout)
    annotations = check_marks(problems, {mark: getattr(options, mark) for mark in MARKS})
    approval = check_approval_option(problems, options.requires_approval)
    return _Settings(
        name,
        description,
        requirements,
        timeout,
        deprecation,
        is_async,
        inline,
        annotations,
        approval,
        options.destructive is True,
        auth,
    )


def _definition(
    settings: _Settings, input_schema: dict[str, Any], output_schema: dict[str, Any]
) -> ToolDefinition:
    """The public definition of a tool whose every check passed."""
    annotations = settings.annotations
    return ToolDefinition.model_construct(
        _DEFINITION_FIELDS,
        name=settings.name,
        description=settings.description,
        input_schema=input_schema,
        output_schema=output_schema,
        requirements=settings.requirements,
        annotations=annotations if annotations != DEFAULT_ANNOTATIONS else DEFAULT_ANNOTATIONS,
        deprecation_message=settings.deprecation,
        toolkit=None,
    )


def _spec(
    definition: ToolDefinition,
    settings: _Settings,
    inputs: Parameters,
    model: type[BaseModel],
    adapter: TypeAdapter[Any],
) -> ToolSpec:
    """What execution reads on every call of the tool ``definition`` describes: its models
    and the facts about it that each call would otherwise work out again."""
    output_schema = definition.output_schema
    return ToolSpec(
        input_model=model,
        output_adapter=adapter,
        context_parameter=inputs.context_parameter,
        is_async=settings.is_async,
        inline=settings.inline,
        requirements=definition.requirements,
        timeout=settings.timeout,
        renames=_renames(inputs.advertised),
        field_parameters=tuple(inputs.field_parameters),
        null_defaults=frozenset(inputs.null_defaults),
        output_extra=output_extra(output_schema),
        output_numbers=(
            may_hold_numbers(output_schema) or core_may_hold_numbers(adapter.core_schema)
        ),
        writes=not definition.annotations.repeatable,
        approval=settings.approval,
        declared_destructive=settings.declared_destructive,
        auth=settings.auth,
    )


def _requirements(
    problems: Problems, options: ToolOptions, auth: AuthRequirement | None
) -> ToolRequirements:
    """What the tool needs from its context: ``requires_secrets``, ``requires_metadata`` and
    ``requires_scopes``, checked, and ``auth`` (most tools need nothing: they share one
    record). The provider's client secrets are not the tool's: the runner's ``UserAuth``
    reads them, and the body never sees them."""
    secrets = check_requirements(
        problems, options.requires_secrets, "requires_secrets", "secret", "API_KEY"
    )
    metadata = check_requirements(
        problems, options.requires_metadata, "requires_metadata", "metadata value", "tenant_id"
    )
    scopes = check_scopes(problems, options.requires_scopes)
    if secrets or metadata or scopes or auth:
        needs = None if auth is None else ToolAuth(provider=auth.provider.name, scopes=auth.scopes)
        return ToolRequirements(secrets=secrets, metadata=metadata, scopes=scopes, auth=needs)
    return NO_REQUIREMENTS


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


def function_of(target: object) -> object:
    """What ``@tool`` defines a tool of, for ``target``: a staticmethod's function (a static
    method is a plain function kept in a class), else ``target`` itself."""
    if type(target) is staticmethod and type(target.__func__) is types.FunctionType:
        return target.__func__
    return target


def _classmethod_hint(target: classmethod[Any, Any, Any]) -> str:
    """The fix for ``@tool`` applied to a classmethod: a tool of the method bound to its
    class. (Of type classmethod exactly: reading ``__func__`` runs no user code.)"""
    function = target.__func__
    owner = _owner_class(function) if type(function) is types.FunctionType else None
    if owner is None:
        return "define the tool as a module-level function"
    return (
        "remove @tool here and, after the class, make a tool of the class method: "
        f"tool({owner}.{function.__name__}); or define the tool as a module-level function"
    )


def _is_bound_method(target: object) -> bool:
    """Whether ``target`` is a function bound to an instance or class (``obj.method``,
    ``Class.a_classmethod``). By type: a method's ``__func__`` runs no user code."""
    return type(target) is types.MethodType and type(target.__func__) is types.FunctionType


def _without_method_receiver(
    problems: Problems, fn: Callable[..., Any], signature: inspect.Signature
) -> inspect.Signature:
    """``signature`` without the receiver of a method decorated in its class body (an
    unannotated first parameter ``self`` or ``cls``), reported as one problem that says how
    to make a tool of a method; else ``signature`` as it is."""
    receiver = next(iter(signature.parameters.values()), None)
    owner = _owner_class(fn)
    if (
        receiver is None
        or owner is None
        or receiver.name not in ("self", "cls")
        or receiver.kind is not receiver.POSITIONAL_OR_KEYWORD
        or receiver.annotation is not receiver.empty
    ):
        return signature
    name = fn.__name__
    if receiver.name == "self":
        what, instead = "the instance", f"an instance's method: tool({owner}(...).{name})"
    else:
        what, instead = "the class", f"the class method: tool({owner}.{name})"
    problems.add(
        ProblemKind.METHOD,
        receiver.name,
        f"'{name}' is a method: its first parameter '{receiver.name}' is {what} it is called "
        "on, which a model cannot send",
        f"remove @tool here and, after the class, make a tool of {instead}; or define the "
        "tool as a module-level function or a @staticmethod",
    )
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _owner_class(fn: Callable[..., Any]) -> str | None:
    """The name of the class whose body defines ``fn``, read from its qualified name
    (``Weather.forecast``; ``make.<locals>.forecast`` is a function of a function)."""
    owner, _, _ = fn.__qualname__.rpartition(".")
    if not owner or owner.endswith("<locals>"):
        return None
    return owner.rpartition(".")[2]


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    location = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"{fn.__module__}.{fn.__qualname__}{location}"


def _raise_not_a_function(target: object, tool_type: type) -> NoReturn:
    """Raise the one problem of a ``target`` that is not a function: a tool already (an
    instance of ``tool_type``), or any other object (a string given by mistake as
    ``@tool("name")``, a staticmethod...). Read by type only: the object may be hostile."""
    kind = type(target)
    if issubclass(kind, tool_type):
        definition: ToolDefinition = target.definition  # type: ignore[attr-defined]
        raise_problems(
            definition.name,
            f"the tool '{definition.name}'",
            [
                Problem(
                    ProblemKind.ALREADY_A_TOOL,
                    None,
                    f"@tool was applied to '{definition.name}', which is already a tool",
                    "apply @tool once, with all options in that one call",
                )
            ],
        )
    if issubclass(kind, str):
        hint = f"pass options as keywords, e.g. @tool(name={str.__str__(target)!r})"
    elif kind is classmethod:
        hint = _classmethod_hint(cast("classmethod[Any, Any, Any]", target))
    elif issubclass(kind, staticmethod | classmethod):
        hint = "define the tool as a module-level function"
    else:
        hint = "apply @tool to a function defined with def or async def"
    try:
        name = getattr(target, "__name__", None)
    except Exception:  # a hostile __getattr__ or property
        name = None
    if type(name) is not str:
        name = None
    what = f"'{name}'" if name is not None else "an object"
    raise_problems(
        name,
        f"an object of type {kind.__name__}",
        [
            Problem(
                ProblemKind.NOT_A_FUNCTION,
                None,
                f"@tool was applied to {what} of type {kind.__name__}, not a function",
                hint,
            )
        ],
    )
