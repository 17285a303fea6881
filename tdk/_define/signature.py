"""The signature walk: annotations resolved, each parameter checked and made a model field.

:class:`Parameters` goes through a function's parameters once, adding a problem for each one
that cannot be advertised and collecting, for the others, the field of the input model, the
name the schema advertises and the description (from ``Annotated`` strings, ``Field`` or the
docstring). It then builds the input model and its JSON Schema and validates the defaults.
The return annotation is resolved here too, with the parameters', but checked by the caller.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import types
from collections.abc import Callable, Mapping
from typing import (
    Annotated,
    Any,
    NamedTuple,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from tdk._define.docstrings import Doc
from tdk._define.problems import (
    TYPE_HINT,
    ProblemKind,
    Problems,
    first_sentence,
    quote,
    type_text,
    type_trouble,
)
from tdk._define.schema import (
    accepts_none,
    create_input_model,
    model_field_name,
    render_input_schema,
)
from tdk._execution.context import ToolContext


def resolve_hints(
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


def unresolved(exc: Exception) -> str:
    """Why an annotation did not resolve, to follow "the annotation of ..." in a problem."""
    if isinstance(exc, NameError) and exc.name:
        return f"refers to '{exc.name}', which is not defined where the tool is defined"
    return f"cannot be evaluated ({first_sentence(exc)})"


def unresolved_hint(exc: Exception, fn: Callable[..., Any]) -> str:
    """The fix for an annotation of ``fn`` that did not resolve.

    For an undefined name, the module's source tells which fix fits: a name bound at module
    level only below the tool is moved above it (naming the line), a name imported only under
    ``if TYPE_CHECKING:`` is imported for real. Only failures come here, so reading and parsing
    the source costs nothing on a good definition; if that fails, the general fix is given.
    """
    if not (isinstance(exc, NameError) and exc.name):
        return "write the annotation as a valid type expression"
    name = exc.name
    try:
        function = cast(types.FunctionType, fn)
        bindings = _module_bindings(function, name)
        tool_line = function.__code__.co_firstlineno  # the first decorator's line
    except Exception:  # no source, or not Python any more: never fail the report for this
        return f"import or define '{name}' above the tool"
    below = [b for b in bindings if not b.typing_only and b.line > tool_line]
    if below:
        return (
            f"move the {below[0].what} of '{name}' at line {below[0].line} above the tool; "
            "@tool resolves annotations as soon as it is applied"
        )
    if bindings and all(b.typing_only for b in bindings):
        return f"import or define '{name}' at module level, not only under `if TYPE_CHECKING:`"
    return f"import or define '{name}' above the tool"


class _Binding(NamedTuple):
    """A module-level statement that binds a name."""

    line: int
    what: str
    """``"definition"`` (class, def or assignment) or ``"import"``."""
    typing_only: bool
    """Whether the statement is under ``if TYPE_CHECKING:``, so never runs."""


def _module_bindings(fn: types.FunctionType, name: str) -> list[_Binding]:
    """Every statement of ``fn``'s module that binds ``name`` at module level, in order."""
    source = "".join(linecache.getlines(fn.__code__.co_filename, fn.__globals__))
    found: list[_Binding] = []

    def walk(statements: list[ast.stmt], typing_only: bool) -> None:
        for node in statements:
            what = _binds(node, name)
            if what is not None:
                found.append(_Binding(node.lineno, what, typing_only))
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue  # a new scope: nothing inside binds a module-level name
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                walk(node.body, True)
                walk(node.orelse, typing_only)
                continue
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(node, field, []), typing_only)
            for handler in getattr(node, "handlers", []):
                walk(handler.body, typing_only)

    walk(ast.parse(source).body, False)
    return found


def _binds(node: ast.stmt, name: str) -> str | None:
    """How ``node`` binds ``name`` (``"definition"`` or ``"import"``), or None."""
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return "definition" if node.name == name else None
    if isinstance(node, ast.Import | ast.ImportFrom):
        bound = {alias.asname or alias.name.partition(".")[0] for alias in node.names}
        return "import" if name in bound else None
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name) and part.id == name and isinstance(part.ctx, ast.Store):
                return "definition"
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``)."""
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


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


class _Declared(NamedTuple):
    """What a parameter declares, as written (not yet checked): its type, the strings of its
    ``Annotated`` (a new name, a description), its other metadata and pydantic ``Field``s
    among them, its own default (``parameter.empty`` when that is a ``Field``), and the
    default and the description that all of these give."""

    base: Any
    strings: list[str]
    kept: list[Any]
    infos: list[FieldInfo]
    default: Any
    default_value: Any
    description: str | None


def _declared(parameter: inspect.Parameter, hint: Any) -> _Declared:
    """Read what ``parameter``, of type ``hint``, declares."""
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
    description = strings[-1] if strings else None
    default_value = default  # the plain default, or ``parameter.empty``
    for info in infos:
        description = description or info.description
        if info.default is not PydanticUndefined:
            default_value = info.default
    return _Declared(base, strings, kept, infos, default, default_value, description)


class Parameters:
    """The parameters of one function: problems, fields of the input model, and names."""

    def __init__(
        self,
        problems: Problems,
        tool_name: str,
        hints: Mapping[str, Any],
        failures: Mapping[str, Exception],
        doc: Doc,
        *,
        fn: Callable[..., Any],
    ) -> None:
        self.problems = problems
        """Where every problem found is added (shared with the rest of the definition)."""
        self.tool_name = tool_name
        """The name of the tool, which names its input model."""
        self.hints = hints
        self.failures = failures
        self.doc = doc
        self.fn = fn
        """The function, whose module's source tells how to fix an unresolved name."""
        self.context_parameter: str | None = None
        self.fields: dict[str, Any] = {}
        """model field name -> annotation (with our ``Field`` last)."""
        self.field_owner: dict[str, str] = {}
        """model field name -> Python parameter name."""
        self.advertised: dict[str, str] = {}
        self.field_parameters: list[tuple[str, str]] = []
        self.defaults: dict[str, Any] = {}
        """advertised name -> plain default, validated once the model exists."""
        self.null_defaults: set[str] = set()
        """The advertised names of parameters with a default whose type takes no None: a
        ``null`` for one of them means "not given"."""
        self.descriptions: dict[str, str] = {}
        """advertised name -> description."""
        self.taken: set[str] = set()
        """Parameter and model field names in use."""

    def collect(self, signature: inspect.Signature) -> None:
        """Check every parameter and every parameter the docstring documents, collecting the
        fields of the input model and the advertised names."""
        add = self.problems.add
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
        add, name = self.problems.add, parameter.name
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
                f"the annotation of parameter '{name}' {unresolved(self.failures[name])}",
                unresolved_hint(self.failures[name], self.fn),
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
        """Check what one parameter declares and, when it holds, add its field to the model."""
        name = parameter.name
        declared = _declared(parameter, hint)
        ok = self._check_strings(name, declared.strings)
        advertised = self._advertised_name(name, declared.strings, declared.infos)
        factory, factory_ok = self._factory(name, declared.infos)
        description = (declared.description or "").strip() or self.doc.params.get(name, "")
        if not description:
            # Still built into the model below, so that its type and default are checked too:
            # every problem of the parameter is reported at once.
            self._missing_description(name)
        if ok and factory_ok and advertised is not None:
            self._add_field(parameter, declared, advertised, description, factory)

    def _check_strings(self, name: str, strings: list[str]) -> bool:
        """Whether ``Annotated`` holds at most two strings (a new name, a description)."""
        if len(strings) <= 2:
            return True
        self.problems.add(
            ProblemKind.TOO_MANY_ANNOTATED_STRINGS,
            name,
            f"parameter '{name}' has {len(strings)} strings in Annotated[...], which takes "
            "at most two: a new name and a description",
            'use Annotated[T, "description"] or Annotated[T, "new_name", "description"]',
        )
        return False

    def _factory(self, name: str, infos: list[FieldInfo]) -> tuple[Any, bool]:
        """The ``default_factory`` of the parameter's ``Field``s (the last one given), and
        whether every one given was callable."""
        factory: Any = None
        ok = True
        for info in infos:
            if info.default_factory is not None:
                factory = info.default_factory
            if factory is not None and not callable(factory):
                self.problems.add(
                    ProblemKind.INVALID_DEFAULT_FACTORY,
                    name,
                    f"the default_factory of parameter '{name}' is {quote(factory)}, which "
                    "is not callable",
                    "pass a function, e.g. Field(default_factory=list)",
                )
                ok = False
        return factory, ok

    def _add_field(
        self,
        parameter: inspect.Parameter,
        declared: _Declared,
        advertised: str,
        description: str,
        factory: Any,
    ) -> None:
        """Add the field of a parameter whose declaration holds, under the name the model
        advertises; note its default, its renaming and a default that is not None."""
        name, base, kept = parameter.name, declared.base, declared.kept
        default_value = declared.default_value
        if default_value is not parameter.empty:
            self.defaults[advertised] = default_value
        field_name = model_field_name(name, self.taken)
        if field_name != name:
            self.field_parameters.append((field_name, name))
        options: dict[str, Any] = {"description": description}
        if advertised != field_name:  # only renamed fields carry an alias (it costs memory)
            options["alias"] = advertised
        own = declared.default
        ours = Field(**options) if own is parameter.empty else Field(own, **options)
        given = default_value is not parameter.empty or factory is not None
        # (a default of None for a type without None is reported by the check of defaults)
        if given and default_value is not None and not accepts_none(base):
            self.null_defaults.add(advertised)
        # Our Field goes last so it wins over the user's; plain types need no Annotated.
        self.fields[field_name] = Annotated[(base, *kept, ours)] if kept else (base, ours)
        self.descriptions[advertised] = description
        self.field_owner[field_name] = name

    def _advertised_name(self, name: str, strings: list[str], infos: list[FieldInfo]) -> str | None:
        add = self.problems.add
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
                f"parameter '{name}' is renamed to {quote(renamed)}, which is not an identifier",
                "use letters, digits and '_' and do not start with a digit, e.g. 'query'",
            )
            return None
        self.advertised[name] = renamed
        return renamed

    def _missing_description(self, name: str) -> None:
        self.problems.add(
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
        name = self.tool_name
        model: type[BaseModel] | None = None
        schema: dict[str, Any] | None = None
        try:
            model = create_input_model(name, self.fields)
            schema = render_input_schema(model, self.descriptions)
        except Exception as whole:
            self._drop_unsupported(name, whole)
            model = None
            with contextlib.suppress(Exception):  # the fields that remain, for their defaults
                model = create_input_model(name, self.fields)
        if model is not None:  # pragma: no branch - None only in the defensive case below
            self._check_defaults(model)
        if self.problems:
            return None, None
        return model, schema

    def _drop_unsupported(self, name: str, whole: Exception) -> None:
        """Add a problem for (and drop) each field that cannot be built or rendered alone."""
        before = len(self.problems)
        for field_name, annotation in list(self.fields.items()):
            try:
                render_input_schema(create_input_model(name, {field_name: annotation}), {})
            except Exception as exc:
                parameter = self.field_owner[field_name]
                del self.fields[field_name]
                self.defaults.pop(self.advertised[parameter], None)
                self.problems.add(
                    ProblemKind.UNSUPPORTED_TYPE,
                    parameter,
                    f"parameter '{parameter}' has type {type_text(self.hints[parameter])}, "
                    f"which {type_trouble(exc, 'validate')}",
                    TYPE_HINT,
                )
        if len(self.problems) == before:  # pragma: no cover - defensive
            # pydantic failed on the fields together but on none alone: still say so.
            self.problems.add(
                ProblemKind.UNSUPPORTED_TYPE,
                None,
                f"the parameters cannot be turned into a JSON Schema ({first_sentence(whole)})",
                TYPE_HINT,
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
                self.problems.add(
                    ProblemKind.INVALID_DEFAULT,
                    parameter,
                    f"the default of parameter '{parameter}' "
                    f"({quote(self.defaults[str(location[0])])}) is not a valid "
                    f"{type_text(self.hints[parameter])}: {error['msg']}",
                    "change the default or the type, e.g. T | None for a default of None",
                )
