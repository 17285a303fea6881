"""The records of a tool's definition: what a host shows the model (:class:`ToolDefinition`,
with its :class:`ToolRequirements`) and what execution reads on every call (:class:`ToolSpec`).

The definition phase (:mod:`tdk._define`) builds both, once, when ``@tool`` decorates a
function; nothing changes them afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, TypeAdapter

from tdk._execution.context import ToolContext, context_of_call
from tdk.auth._provider import AuthRequirement

__all__ = [
    "DEFAULT_ANNOTATIONS",
    "NO_REQUIREMENTS",
    "ApprovalOption",
    "ApprovalRule",
    "ToolAnnotations",
    "ToolAuth",
    "ToolDefinition",
    "ToolRequirements",
    "ToolSpec",
]


#: ``@tool(requires_approval=fn)``: whether a call (its validated arguments by parameter
#: name, and its context) needs the user's approval.
ApprovalRule: TypeAlias = Callable[[dict[str, Any], ToolContext], bool]
#: What ``requires_approval=`` takes.
ApprovalOption: TypeAlias = bool | ApprovalRule


class ToolAuth(BaseModel):
    """``@tool(requires_auth=...)``: the OAuth 2.0 provider the tool acts on as the user, and
    the scopes it needs there (``context.auth_token`` is then the user's token for it).

    .. versionadded:: 0.1.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    """The provider's name (``OAuthProvider.name``)."""
    scopes: tuple[str, ...] = ()
    """The scopes the user must grant there."""


class ToolRequirements(BaseModel):
    """What a tool needs from its :class:`~tdk.ToolContext` before it can run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secrets: tuple[str, ...] = ()
    """Names of the secrets the tool reads with ``context.get_secret``."""
    metadata: tuple[str, ...] = ()
    """Names of the metadata values the tool reads with ``context.get_metadata``."""
    scopes: tuple[str, ...] = ()
    """OAuth scopes the caller must hold (``ToolContext.scopes``): without them the tool is
    not listed to the caller over MCP, and a call of it is refused.

    .. versionadded:: 0.1.0"""
    auth: ToolAuth | None = None
    """The user's authorization at an OAuth 2.0 provider (``@tool(requires_auth=...)``):
    the call gets the user's token there as ``context.auth_token`` (the provider's client id
    and secret stay with the runner's ``UserAuth``).

    .. versionadded:: 0.1.0"""

    @property
    def needed(self) -> bool:
        """Whether the tool needs anything from its context."""
        return bool(self.secrets or self.metadata or self.scopes or self.auth)


NO_REQUIREMENTS: Final = ToolRequirements()


class ToolAnnotations(BaseModel):
    """What calling a tool does to the world, with the meanings and defaults of MCP's tool
    annotations (``@tool(read_only=..., idempotent=..., destructive=..., open_world=...)``).

    Execution and the runner read them: a tool that is neither read-only nor idempotent is
    retried, or offered to the model as retryable, only after failures where the upstream
    certainly did not act (``docs/execution.md``, ``docs/runner.md``). Hosts show them (MCP's
    ``readOnlyHint``, ``idempotentHint``, ``destructiveHint``, ``openWorldHint``).

    .. versionadded:: 0.1.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    read_only: bool = False
    """The tool changes nothing: it only reads (implies ``idempotent`` and not
    ``destructive``)."""
    idempotent: bool = False
    """Calling it again with the same arguments has no further effect (a retry is safe)."""
    destructive: bool = True
    """It may delete or overwrite (meaningful when it is not read-only)."""
    open_world: bool = True
    """It reaches things outside the host's own world (the web, a third-party API)."""

    @property
    def repeatable(self) -> bool:
        """Whether running it twice is as safe as running it once: read-only or idempotent."""
        return self.read_only or self.idempotent


DEFAULT_ANNOTATIONS: Final = ToolAnnotations()


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
    requirements: ToolRequirements = NO_REQUIREMENTS
    """Secrets, metadata and scopes the tool needs from its context."""
    annotations: ToolAnnotations = DEFAULT_ANNOTATIONS
    """What calling the tool does: read-only, idempotent, destructive, open-world."""
    deprecation_message: str | None = None
    """Set when the tool is deprecated: what to use instead."""
    toolkit: str | None = None
    """Name of the toolkit the definition was listed by; None for a lone tool."""


#: Unknown argument keys validated as they are: pydantic builds an error per unknown key (a
#: flood of them would hold the loop: bench/README.md#unknown-argument-keys), and an input
#: error lists 20 problems at most.
_UNKNOWN_KEYS_KEPT: Final = 32


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
    """Secrets, metadata and scopes that must be in the context before the body runs."""
    timeout: float | None
    """The tool's own time limit in seconds; None for no limit."""
    renames: Mapping[str, str]
    """Python parameter name -> name in the input schema, for renamed parameters only; every
    other parameter is advertised under its own name (see :meth:`advertised`)."""
    field_parameters: tuple[tuple[str, str], ...] = ()
    """(model field, Python parameter) pairs for the few names pydantic cannot use as fields
    (``json``, ``schema``, ``_private``...); every other field is named like its parameter."""
    null_defaults: frozenset[str] = frozenset()
    """The advertised names of parameters that have a default and whose type takes no None:
    a ``null`` sent for one means "not given" (strict mode sends ``null`` for every parameter
    the model leaves out), and the default applies."""
    output_extra: Literal["forbid"] | None = None
    """``"forbid"`` to validate the return value refusing keys its models and dataclasses do
    not declare (see :func:`tdk._define.schema.output_extra`)."""
    output_numbers: bool = True
    """Whether the return value may hold numbers (its JSON Schema or its pydantic core schema
    has a number or an untyped part, or code of the type's own validates or serializes part
    of it): execution then checks that JSON can carry them (no NaN, no infinity, no integer
    too long to write out)."""
    writes: bool = True
    """Whether the tool may write: neither read-only nor idempotent. A failure of its call
    that may have acted is then not offered for repeating (see :mod:`tdk._execution.writes`)."""
    approval: ApprovalRule | Literal[True] | None = None
    """``@tool(requires_approval=...)``: True (every call), a rule deciding per call, or None
    (the tool asks for none: see :mod:`tdk._execution.approval`)."""
    declared_destructive: bool = False
    """The author said ``destructive=True``: a runner that confirms destructive tools (a
    tool served by ``tdk serve``) asks the user's approval of each call."""
    auth: AuthRequirement | None = None
    """``@tool(requires_auth=...)``, checked: the provider and scopes a runner with user
    authorization gets the user's token for (see :mod:`tdk.runner._acting`)."""
    parameter_names: tuple[str, ...] = field(init=False)
    """The advertised argument names, in order, as an input error lists them; derived from
    ``input_model``."""
    most_keys: int = field(init=False)
    """The most keys an argument dict is validated with as it is: beyond that it holds a
    flood of unknown keys, trimmed first (see :func:`tdk._execution.arguments.few_unknown_keys`)."""
    plain: bool = field(init=False)
    """True when the validated model's fields are the function's keyword arguments as they
    are (no context parameter, no field named otherwise than its parameter): execution then
    passes the model's ``__dict__`` without calling :meth:`arguments`."""

    def __post_init__(self) -> None:
        names = (info.alias or name for name, info in self.input_model.model_fields.items())
        object.__setattr__(self, "parameter_names", tuple(names))
        object.__setattr__(self, "most_keys", len(self.parameter_names) + _UNKNOWN_KEYS_KEPT)
        plain = not self.field_parameters and self.context_parameter is None
        object.__setattr__(self, "plain", plain)

    def advertised(self, parameter: str) -> str:
        """The name under which the input schema advertises a Python parameter."""
        return self.renames.get(parameter, parameter)

    def arguments(self, validated: BaseModel, context: ToolContext | None) -> dict[str, Any]:
        """Keyword arguments for the function from a validated ``input_model`` instance (not
        to be changed: it may be the instance's own ``__dict__``).

        Model-typed parameters stay model instances. The context parameter, if any, receives
        ``context`` (an empty :class:`~tdk.ToolContext` when None), with an idempotency key
        of its own when it has none (a call that is not one of a runner's).
        """
        if self.plain:
            return validated.__dict__  # read-only: the caller unpacks it into the call
        values = dict(validated.__dict__)
        for field_name, parameter in self.field_parameters:
            values[parameter] = values.pop(field_name)
        if self.context_parameter is not None:
            values[self.context_parameter] = context_of_call(context)
        return values
