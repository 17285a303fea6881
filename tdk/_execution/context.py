"""``ToolContext``: what the host hands a tool besides its arguments.

A tool asks for it by annotating one parameter with :class:`ToolContext`; that parameter never
appears in the tool's input schema. The context is immutable, and its ``repr()`` names the
secrets it holds but never shows their values or the auth token.
"""

from __future__ import annotations

import html
import json
import os
import re
import weakref
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload
from urllib.parse import quote, quote_plus

from pydantic import BaseModel

from tdk._execution.asks import AskState, ask
from tdk._execution.progress import report_progress
from tdk._failures.redact import SHORTEST_EXACT_SECRET
from tdk.errors import ToolRequirementError

if TYPE_CHECKING:
    from tdk._execution.requests import Choose, Confirm, Form, OpenUrl

__all__ = ["ToolContext"]

_M = TypeVar("_M", bound=BaseModel)


def _rebuild(fields: dict[str, Any]) -> ToolContext:
    """Recreate a context for ``pickle`` and ``copy`` (read-only mappings do not pickle)."""
    return ToolContext(**fields)


class _MadeKey(str):
    """An idempotency key a context made for itself, given none: a ``str`` in every way, but
    one that a copy of the context (``dataclasses.replace``, ``pickle``) still knows as made,
    not given, so that the calls made with the copy get keys of their own too."""

    __slots__ = ()


def new_key() -> str:
    """A fresh idempotency key: a random UUID (version 4) in its usual text form, as
    ``str(uuid.uuid4())`` writes it, made without a ``UUID`` object (one per runner call:
    bench/README.md#idempotency-keys)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


#: Characters httpx leaves as they are in a URL path (RFC 3986 sub-delims, ":", "@", "/").
_PATH_SAFE: Final = "!$&'()*+,;=:@/"
#: What httpx itself leaves as it is when it builds a URL's path and query (the WHATWG
#: percent-encode sets: printable ASCII but a few, ``%`` of existing escapes included).
_WHATWG_QUERY_SAFE: Final = "".join(
    chr(code) for code in range(0x21, 0x7F) if chr(code) not in '"#<>'
)
_WHATWG_PATH_SAFE: Final = "".join(c for c in _WHATWG_QUERY_SAFE if c not in "?`{}")
#: Text that every URL encoding leaves as it is (RFC 3986 unreserved characters).
_URL_PLAIN: Final = re.compile(r"[A-Za-z0-9._~-]*")


def secret_values(context: ToolContext) -> tuple[str, ...]:
    """The exact values to scrub for a call with ``context``: every secret value and the auth
    token as text (a value given as a number or bytes, too), each also in the percent-encoded
    forms a URL carries (in a path, in a query, as ``urllib`` and as httpx write them). None,
    empty values and values shorter than redaction's minimum are left out: scrubbing them
    would destroy text and protect nothing.
    """
    found: dict[str, None] = {}
    for given in (*context.secrets.values(), context.auth_token):
        if type(given) is str:
            value = given
        elif given is None:
            continue
        else:
            value = given.decode("utf-8", "replace") if isinstance(given, bytes) else str(given)
        if len(value) < SHORTEST_EXACT_SECRET:
            continue
        found[value] = None
        if _URL_PLAIN.fullmatch(value):  # most keys and tokens: every encoded form is the same
            continue
        for form in _escaped_forms(value):
            found[form] = None
    return tuple(found)


def secrets_of(context: ToolContext | None) -> tuple[str, ...]:
    """The exact values to scrub for a call with ``context`` (computed once per context)."""
    if context is None:
        return ()
    try:
        return context._secret_values  # tdk's own attribute, computed by ToolContext
    except AttributeError:
        if isinstance(context, ToolContext):  # a subclass whose __post_init__ skipped ours
            return secret_values(context)
        raise TypeError(
            f"context must be a ToolContext or None, not {type(context).__name__}"
        ) from None


def _escaped_forms(value: str) -> Iterator[str]:
    """``value`` as the code that echoes it may have escaped it: percent-encoded (in a path, in
    a query, as ``urllib`` and as httpx write them; upper- and lower-case hex); as ``repr()``
    writes it in an exception's text (``KeyError``, ``f"{x!r}"``: its quotes escaped or not,
    as the text around it decides; and the ``repr()`` of its bytes); as JSON writers put it in
    a body an upstream echoes (Python's, with and without ``\\uXXXX`` escapes, in either
    case; PHP's, which escapes ``/``; Go's, which escapes ``<``, ``>`` and ``&``); and as HTML
    writes it."""
    # (surrogateescape: a value read from os.environ; surrogatepass for any other lone
    # surrogate, which JSON text can carry: a token an upstream answered)
    errors = "surrogateescape"
    try:
        value.encode("utf-8", errors)
    except UnicodeEncodeError:
        errors = "surrogatepass"
    for safe in ("", _PATH_SAFE, _WHATWG_PATH_SAFE, _WHATWG_QUERY_SAFE):
        encoded = quote(value, safe=safe, errors=errors)
        yield encoded
        yield _PERCENT.sub(lambda escape: escape[0].lower(), encoded)
    yield quote_plus(value, errors=errors)
    quoted = repr(value + '"')[1:-2]  # (with a '"' in it, repr escapes every "'")
    yield quoted
    yield quoted.replace("\\'", "'")
    yield repr(value.encode("utf-8", errors) + b'"')[2:-2]
    for escaped in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        yield escaped
        yield _UNICODE_ESCAPE.sub(lambda escape: escape[0].upper().replace("\\U", "\\u"), escaped)
        yield escaped.replace("/", "\\/")
        go = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        yield go
        yield go.replace("/", "\\/")
    yield html.escape(value, quote=True)
    yield html.escape(value, quote=False)


_PERCENT: Final = re.compile("%[0-9A-F]{2}")
#: The default of ``secrets`` and ``metadata`` (copied by every context: never shared).
_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})
_UNICODE_ESCAPE: Final = re.compile(r"\\u[0-9a-f]{4}")


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class ToolContext:
    """Secrets, metadata and the caller's identity for one tool call.

    ``secrets`` and ``metadata`` are copied into read-only mappings, so changing the dicts
    passed in later does not change the context::

        context = ToolContext(secrets={"GITHUB_TOKEN": token}, user_id="u-42")
        context.get_secret("GITHUB_TOKEN")

    .. versionadded:: 0.1.0
    """

    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Secret values by name (API keys, tokens). Never shown by ``repr()``."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Non-secret facts about the call or the user (locale, tenant, plan...)."""
    user_id: str | None = None
    """The end user the call is made for, when the host knows it."""
    auth_token: str | None = field(default=None, repr=False)
    """The end user's own credential, when the host passes one. Never shown by ``repr()``."""
    idempotency_key: str = field(default="", compare=False)
    """The key of the logical call, the same on every attempt of it (send it as the
    upstream's ``Idempotency-Key``). Always a non-empty ``str`` for a tool: the caller's
    (``ToolContext(idempotency_key=...)``), which every call made with this context keeps;
    or, given none, a random UUID of the context's own, and each call made with the context
    (``tool.run()``, a runner's call) gets a new one instead, so that two calls never
    share a key."""
    scopes: frozenset[str] = frozenset()
    """The OAuth scopes the caller holds: those of the verified token of ``tdk serve --http
    --auth``, or those given. A tool declared with ``requires_scopes=`` runs only when they
    are all here.

    .. versionadded:: 0.1.0"""
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The claims of the caller's verified token (read-only): its JWT payload, or what the
    introspection endpoint said of it (``sub``, ``iss``, ``aud``, ``scope``, ``exp``...). Empty
    without authentication. Never the token itself.

    .. versionadded:: 0.1.0"""
    _given_key: str | None = field(default=None, init=False, repr=False)
    """The key the caller gave (None: the context made its own). Contexts compare by it,
    not by a key made at random."""
    _secret_values: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """What redaction scrubs for a call with this context, computed once (see
    :func:`secret_values`)."""
    _asks: AskState | None = field(default=None, init=False, repr=False, compare=False)
    """The answers of a resumed call (see :mod:`tdk._execution.asks`); None for none."""

    def __init__(
        self,
        *,
        secrets: Mapping[str, str] = _NOTHING,
        metadata: Mapping[str, Any] = _NOTHING,
        user_id: str | None = None,
        auth_token: str | None = None,
        idempotency_key: str | None = None,
        scopes: Iterable[str] = frozenset(),
        claims: Mapping[str, Any] = _NOTHING,
    ) -> None:
        # (Written out only so that ``idempotency_key`` may be given as None, as before it
        # became a str: a subclass that is a dataclass of its own gets the generated one.)
        object.__setattr__(self, "secrets", secrets)
        object.__setattr__(self, "metadata", metadata)
        object.__setattr__(self, "user_id", user_id)
        object.__setattr__(self, "auth_token", auth_token)
        object.__setattr__(self, "idempotency_key", idempotency_key)
        object.__setattr__(self, "scopes", scopes)
        object.__setattr__(self, "claims", claims)
        self.__post_init__()

    def __post_init__(self) -> None:
        object.__setattr__(self, "secrets", MappingProxyType(dict(self.secrets)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        object.__setattr__(self, "scopes", _scopes(self.scopes))
        object.__setattr__(self, "claims", MappingProxyType(dict(self.claims)))
        object.__setattr__(self, "_secret_values", secret_values(self))
        object.__setattr__(self, "_asks", None)
        key: str | None = self.idempotency_key
        if key is None or key == "":  # none given: one of its own
            object.__setattr__(self, "_given_key", None)
            object.__setattr__(self, "idempotency_key", _MadeKey(new_key()))
        else:  # given, or made for the context this one copies
            object.__setattr__(self, "_given_key", None if type(key) is _MadeKey else key)

    def get_secret(self, name: str) -> str:
        """The secret called ``name``.

        Raises :class:`~tdk.errors.ToolRequirementError` naming the secret when the context
        has no such secret or its value is empty.
        """
        value = self.secrets.get(name)
        if not value:
            raise ToolRequirementError(
                f"The secret '{name}' is not available to this tool.",
                missing_secrets=[name],
                developer_message=(
                    f"The ToolContext has no non-empty secret named {name!r}; "
                    "add it to ToolContext(secrets={...})."
                ),
            )
        return value

    def get_metadata(self, name: str) -> Any:
        """The metadata value called ``name``.

        Raises :class:`~tdk.errors.ToolRequirementError` naming the key when the context has
        no such metadata.
        """
        try:
            return self.metadata[name]
        except KeyError:
            raise ToolRequirementError(
                f"The metadata '{name}' is not available to this tool.",
                missing_metadata=[name],
                developer_message=(
                    f"The ToolContext has no metadata named {name!r}; "
                    "add it to ToolContext(metadata={...})."
                ),
            ) from None

    @overload
    async def ask(self, key: str, request: Confirm) -> bool: ...
    @overload
    async def ask(self, key: str, request: Choose) -> str: ...
    @overload
    async def ask(self, key: str, request: Form[_M]) -> _M: ...
    @overload
    async def ask(self, key: str, request: OpenUrl) -> None: ...
    async def ask(self, key: str, request: Confirm | Choose | Form[Any] | OpenUrl) -> Any:
        """Ask the user: the answer under ``key`` (``True``/``False`` for a
        :class:`~tdk.Confirm`, the option picked for a :class:`~tdk.Choose`, a model
        instance for a :class:`~tdk.Form`, None for an :class:`~tdk.OpenUrl`).

        Without an answer, the call ends here with a pending result (kind
        ``TOOL_RUNTIME_INPUT_REQUIRED``, ``result.pending``), and ``runner.resume()`` runs it
        again from the start with the answers: ask before you act. Asking after a write of
        this attempt was answered upstream is refused. See ``docs/asks.md``.

        .. versionadded:: 0.1.0
        """
        return await ask(self, key, request)

    def _answered(self, state: AskState) -> ToolContext:
        """A copy of this context (its idempotency key kept) carrying the answers ``state``."""
        copy = self._with_key(self.idempotency_key)
        object.__setattr__(copy, "_given_key", self._given())  # (given or made, as it was)
        object.__setattr__(copy, "_asks", state)
        return copy

    def _acting_with(self, token: str) -> ToolContext:
        """A copy of this context (its key and answers kept) whose ``auth_token`` is the
        user's ``token`` at a provider (a runner acting as the user): scrubbed like a secret."""
        copy = self._with_key(self.idempotency_key)
        object.__setattr__(copy, "_given_key", self._given())  # (given or made, as it was)
        object.__setattr__(copy, "auth_token", token)
        object.__setattr__(copy, "_secret_values", secret_values(copy))
        return copy

    def progress(
        self, done: float, total: float | None = None, message: str | None = None
    ) -> Awaitable[None]:
        """Report how far the call has come: ``done`` out of ``total`` (None: unknown), with
        an optional ``message`` for the user. Over MCP, a client that asked for progress gets
        ``notifications/progress`` (at most 4 a second, ``done`` never going down, the last
        report never dropped); when the call is traced, its span gets an event; elsewhere it
        does nothing. ``await context.progress(3, 10)`` in an async tool; a sync tool may
        call it without ``await``. A host that resets its timeout on progress keeps a long
        call alive this way.

        .. versionadded:: 0.2.0
        """
        return report_progress(done, total, message, secrets_of(self))

    def __repr__(self) -> str:
        secrets = "{" + ", ".join(f"{name!r}: '***'" for name in self.secrets) + "}"
        token = "'***'" if self.auth_token is not None else "None"
        given = self._given()
        key = "" if given is None else f", idempotency_key={given!r}"
        # (the scopes and the names of the claims: their values may be personal, an email)
        held = f", scopes={sorted(self.scopes)!r}" if self.scopes else ""
        claims = f", claims={sorted(self.claims)!r}" if self.claims else ""
        return (
            f"ToolContext(secrets={secrets}, metadata={dict(self.metadata)!r}, "
            f"user_id={self.user_id!r}, auth_token={token}{key}{held}{claims})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            "secrets": dict(self.secrets),
            "metadata": dict(self.metadata),
            "user_id": self.user_id,
            "auth_token": self.auth_token,
            "idempotency_key": self.idempotency_key,  # (a key made, not given, stays made)
            "scopes": self.scopes,
            "claims": dict(self.claims),
        }
        return (_rebuild, (fields,))

    def _given(self) -> str | None:
        """The idempotency key the caller gave, or None (also for a subclass whose
        ``__post_init__`` skipped ours)."""
        given: str | None = getattr(self, "_given_key", None)
        return given

    def _keyed(self) -> ToolContext:
        """This context for one logical call: itself when the caller gave its idempotency
        key, else a copy with a new random key (the rest shared, nothing computed again)."""
        if self._given() is not None:
            return self
        return self._with_key(new_key())

    def _with_key(self, key: str) -> ToolContext:
        """A copy of this context (of its class, a subclass's own fields and attributes
        included) whose idempotency key is ``key``; nothing is computed again."""
        kind = type(self)
        names = _SLOT_NAMES.get(kind)
        if names is None:
            names = _SLOT_NAMES[kind] = _slot_names(kind)
        copy = object.__new__(kind)
        for name in names:
            if hasattr(self, name):
                object.__setattr__(copy, name, getattr(self, name))
        if hasattr(self, "__dict__"):
            object.__setattr__(copy, "__dict__", dict(self.__dict__))
        object.__setattr__(copy, "idempotency_key", key)
        object.__setattr__(copy, "_given_key", key)  # (the call's: calls it makes keep it)
        return copy


def _scopes(given: Iterable[str]) -> frozenset[str]:
    """``scopes=`` as a frozenset of strings; a ``TypeError`` for a single string (a token's
    space-separated ``scope`` claim is split by whoever reads it) or a scope that is none."""
    if isinstance(given, str):
        raise TypeError("scopes= takes a collection of scopes, not one string: split it first")
    scopes = frozenset(given)
    if not all(type(scope) is str for scope in scopes):
        raise TypeError("scopes= takes strings only")
    return scopes


#: A context class -> the attribute names of its slots (mangled), as copies read them.
_SLOT_NAMES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _slot_names(kind: type) -> tuple[str, ...]:
    names = []
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            private = slot.startswith("__") and not slot.endswith("__")
            names.append(f"_{cls.__name__.lstrip('_')}{slot}" if private else slot)
    return tuple(names)


#: The context of a call given none (each call gets a keyed copy of it).
_NO_CONTEXT: Final = ToolContext()


def context_of_call(context: ToolContext | None) -> ToolContext:
    """The context a tool receives for one logical call: ``context`` (an empty one for None)
    with an idempotency key, its own or a new one (see :meth:`ToolContext._keyed`)."""
    return (context if context is not None else _NO_CONTEXT)._keyed()
