"""A runner's calls of tools that act as the user (``@tool(requires_auth=...)``, with
``ToolRunner(user_auth=...)``): the user's token on the call's context, one forced refresh
after an upstream 401, and the authorization ask when there is no token to give.

Before the call's guards and attempts, :class:`Acting` gets the caller's tokens at the
tool's provider from the :class:`~tdk.auth.UserAuth` (refreshed first when they expire
soon), and the body reads the access token as ``context.auth_token`` (scrubbed from every
output like a secret). Without tokens (none yet, a refresh refused, fewer scopes than the
tool needs), the call ends pending on one :class:`~tdk.OpenUrl` request under the key
``auth.<provider>``: the provider's authorization URL, whose ``state`` is sealed with the
runner's ``state_key`` (for this purpose only) over the provider, the user, a nonce, an
expiry and the PKCE verifier. The provider sends the user's browser back to the callback,
which calls :meth:`Acting.complete` (``runner.complete_authorization``): the tokens are kept
only for the user the state was made for, once. The host then sends the call again.

An attempt refused by the upstream with a 401 that tdk's HTTP hook saw, and after which no
other request of the attempt may have acted, gets its token refreshed once and the call one
more run: a 401 did nothing upstream, so this is safe for writes too.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from tdk._define.toolkit import Toolkit
from tdk._execution.asks import ask_state, declined, input_required
from tdk._execution.context import ToolContext
from tdk._execution.requests import OpenUrl
from tdk._execution.result import ToolResult
from tdk.auth._authorization import Authorization, ProviderError, Reason, TokenStoreError
from tdk.auth._provider import AuthRequirement, OAuthProvider
from tdk.errors import (
    ErrorKind,
    FatalToolError,
    RetryableToolError,
    ToolError,
    ToolRequirementError,
)
from tdk.runner._refusals import refusal_result
from tdk.runner._retry import Call
from tdk.runner._seal import Sealer, TokenUnreadableError
from tdk.runner._store import UpdateStore, consume_once

if TYPE_CHECKING:
    from tdk.auth._user_auth import UserAuth

__all__ = ["STATE_PURPOSE", "Acting", "ask_key"]

#: What a ``state`` is sealed for (an asks token never opens as one, nor one as a token).
STATE_PURPOSE: Final = b"tdk/oauth/state/1"
#: The longest value of a callback's parameter read (a code or a state is far shorter).
_MAX_PARAMETER: Final = 8 * 1024
_UNAUTHORIZED: Final = 401

Guarded = Callable[[Call], Awaitable[ToolResult]]


def ask_key(provider: str) -> str:
    """The key of the authorization ask of ``provider``."""
    return f"auth.{provider}"


class Acting:
    """One runner's part in calls of tools acting as the user (see the module docstring)."""

    __slots__ = ("_attaching", "_auth", "_expiry", "_providers", "_sealer", "_store")

    def __init__(
        self,
        user_auth: UserAuth,
        toolkit: Toolkit,
        state_key: str | bytes | None,
        store: UpdateStore,
        expiry: float,
    ) -> None:
        providers: dict[str, OAuthProvider] = {}
        for item in toolkit:
            requirement = item.spec.auth
            if requirement is None:
                continue
            known = providers.setdefault(requirement.provider.name, requirement.provider)
            if known != requirement.provider:
                raise ValueError(
                    f"two different providers are named '{known.name}' in toolkit "
                    f"'{toolkit.name}': tokens are kept by the provider's name"
                )
        missing = [name for each in providers.values() for name in user_auth.missing_secrets(each)]
        if missing:
            raise ValueError(
                f"user_auth: the providers' client secrets {missing} are not set (UserAuth "
                "reads them from its secrets=, by default the environment)"
            )
        self._auth = user_auth
        self._providers = providers
        self._sealer = Sealer(state_key, purpose=STATE_PURPOSE)
        self._store = store
        self._expiry = expiry
        self._attaching: set[asyncio.Future[Authorization]] = set()

    async def run(self, call: Call, guarded: Guarded) -> ToolResult:
        """``call`` run by ``guarded`` with the user's token at its tool's provider; or the
        authorization ask, or the failure saying why no token can be had now."""
        requirement = call.plan.tool.spec.auth
        assert requirement is not None
        provider = requirement.provider
        user = _user_of(call.context)
        if isinstance(user, ToolError):
            return _turned_back(call, user)
        answers = ask_state(call.context).answers
        key = ask_key(provider.name)
        if answers.get(key, True) is False:
            return _turned_back(call, declined(key))
        try:  # (sent again after the sign-in ask: the callback may be a moment behind)
            tokens = await (
                self._auth.signed_in(user or "", provider)
                if key in answers
                else self._auth.current(user or "", provider)
            )
        except Exception as failed:  # the provider or the store: no token, never a stale one
            return _turned_back(call, _unavailable(provider, failed))
        if tokens is None or not _holds(tokens.scopes, requirement.scopes):
            granted = () if tokens is None else tuple(sorted(tokens.scopes))
            return self._ask(call, user, requirement, granted)
        acting = _acting_as(call, tokens.access_token)
        result = await guarded(acting)
        if not _token_refused(result, acting):  # (the attempts noted their requests on it)
            return result
        try:  # the upstream refused the token: renewed once, and one more run
            renewed = await self._auth.renewed(user or "", provider, tokens.access_token)
        except Exception as failed:
            return _turned_back(call, _unavailable(provider, failed))
        if renewed is None:
            return self._ask(call, user, requirement, ())
        again = _acting_as(call, renewed.access_token)
        again.deadline = acting.deadline  # (one call: the run again has what is left of it)
        return await guarded(again)

    def _ask(
        self,
        call: Call,
        user: str | None,
        requirement: AuthRequirement,
        granted: tuple[str, ...],
    ) -> ToolResult:
        """The call's result pending on the user's authorization at the provider (the scopes
        the tool needs, with those already granted)."""
        provider = requirement.provider
        scopes = tuple(dict.fromkeys((*granted, *requirement.scopes)))
        verifier = secrets.token_urlsafe(48)  # (64 characters: RFC 7636 asks for 43-128)
        try:
            state = self._sealer.seal(
                {
                    "p": provider.name,
                    "u": user,
                    "n": secrets.token_urlsafe(16),
                    "exp": time.time() + self._expiry,
                    "cv": verifier,
                    "s": list(scopes),
                }
            )
        except ToolRequirementError as missing:  # no cryptography to seal with
            return _turned_back(call, missing)
        url = self._auth.authorization_url(provider, scopes, state, verifier)
        try:
            request = OpenUrl(
                f"Sign in to {provider.name} so that this tool can act for you there; then "
                "come back and go on.",
                url,
            )
        except ValueError:  # a link longer than a host takes: the scopes granted are the
            if granted:  # provider's word, as many as it said; ask for the tool's alone
                return self._ask(call, user, requirement, ())
            return _turned_back(call, _link_too_long(provider))
        return _turned_back(call, input_required({ask_key(provider.name): request.to_dict()}))

    async def complete(self, params: Mapping[str, object], user_id: str | None) -> Authorization:
        """The callback of a provider: ``params`` are its query parameters, ``user_id`` who
        opened it (see ``ToolRunner.complete_authorization``)."""
        state = _parameter(params, "state")
        try:
            payload = self._sealer.open(state)
            provider = self._providers[str(payload["p"])]
            expires = float(payload["exp"])
        # (ToolRequirementError: no cryptography to open with, so nothing was sealed either)
        except (TokenUnreadableError, KeyError, TypeError, ValueError, ToolRequirementError):
            return Authorization(False, None, "forged")
        if not math.isfinite(expires) or expires <= time.time():
            return Authorization(False, provider.name, "expired")
        if payload.get("u") != user_id:
            return Authorization(False, provider.name, "other_user")
        if _parameter(params, "error") is not None:  # the user said no (or the provider)
            return Authorization(False, provider.name, "declined")
        code = _parameter(params, "code")
        if code is None:
            return Authorization(False, provider.name, "exchange_failed")
        # (not cancelled with the callback's request: once the nonce is used and the code
        # sent, the provider has spent it, and only this exchange can keep the tokens)
        attaching = asyncio.ensure_future(self._attached(provider, payload, code, user_id, expires))
        self._attaching.add(attaching)  # (held: the loop keeps only a weak reference)
        attaching.add_done_callback(self._attaching.discard)
        return await asyncio.shield(attaching)

    async def _attached(
        self,
        provider: OAuthProvider,
        payload: Mapping[str, Any],
        code: str,
        user_id: str | None,
        expires: float,
    ) -> Authorization:
        """The tokens ``code`` is traded for, kept for ``user_id``: once per state."""
        reason: Reason
        try:
            first = await consume_once(
                self._store, f"tdk:oauth:{payload['n']}", max(1.0, expires - time.time() + 1)
            )
        except Exception:  # the store cannot say whether the state was used: fail closed
            return Authorization(False, provider.name, "store_unavailable")
        if not first:
            return Authorization(False, provider.name, "used")
        scopes = tuple(str(scope) for scope in payload.get("s", ()))
        try:
            tokens = await self._auth.exchange(provider, code, str(payload["cv"]), scopes)
        except Exception:  # ProviderError, in tdk's words; logged by the caller's server
            return Authorization(False, provider.name, "exchange_failed")
        try:
            await self._auth.keep(user_id or "", provider, tokens)
            reason = "attached"
        except Exception:
            reason = "store_unavailable"
        return Authorization(reason == "attached", provider.name, reason)


def _user_of(context: ToolContext | None) -> str | ToolError | None:
    """Who the call acts for: the context's ``user_id``; None for the one anonymous user of
    a server without authentication. A caller authenticated without an id (a token without
    ``sub``) cannot be told from others: refused."""
    if context is None or not context.user_id:  # (an empty id is no one's either)
        if context is not None and context.claims:
            return ToolRequirementError(
                "The tool acts as the user, but the caller's identity is not known.",
                developer_message=(
                    "The caller's token has no 'sub' claim: tokens of a provider are kept per "
                    "user, and without an id every such caller would share them."
                ),
            )
        return None
    return context.user_id


def _holds(granted: frozenset[str], needed: tuple[str, ...]) -> bool:
    """Whether tokens granted ``granted`` serve a tool needing ``needed`` (a provider that
    does not say what it granted is taken at its word)."""
    return not granted or granted.issuperset(needed)


def _acting_as(call: Call, token: str) -> Call:
    """``call`` (a fresh one: guards keep state on a call) whose context carries ``token``."""
    base = call.context if call.context is not None else ToolContext()
    return Call(call.plan, call.arguments, base._acting_with(token), call.call_id, call.started)


def _token_refused(result: ToolResult, call: Call) -> bool:
    """Whether ``result`` is a 401 of the upstream after which a renewed token may run the
    call once more: nothing else of its last attempt may have acted."""
    error = result.error
    if error is None or error.kind is not ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR:
        return False
    if error.status_code != _UNAUTHORIZED:
        return False
    if call.plan.repeatable:
        return True
    # (a write: only a 401 tdk's hook saw, with nothing else of the attempt reaching an
    # upstream; a 401 classified by hand may follow a write no hook noted)
    exchanges = call.exchanges
    return exchanges is not None and exchanges.reached == 0 and exchanges.unauthorized > 0


def _unavailable(provider: OAuthProvider, failed: BaseException) -> ToolError:
    """Why no token can be had now (the provider or the token store failing), in tdk's
    words: the foreign exception's text is never shown."""
    return RetryableToolError(
        f"The sign-in at '{provider.name}' cannot be checked right now; try again in a moment.",
        developer_message=(
            f"user_auth could not get the user's tokens at '{provider.name}' "
            f"({type(failed).__name__}: {_said(failed)})"
        ),
    )


def _link_too_long(provider: OAuthProvider) -> ToolError:
    """Why no sign-in can be asked: the link would be longer than a host takes."""
    return FatalToolError(
        f"The sign-in link of '{provider.name}' would be too long to show.",
        developer_message=(
            f"the authorization URL of '{provider.name}' with the tool's scopes and the "
            "sealed state is longer than an OpenUrl takes: fewer or shorter scopes, or "
            "shorter authorize_params"
        ),
    )


def _said(failed: BaseException) -> str:
    """What tdk's own failures say (their text is tdk's); the type alone for others."""
    if isinstance(failed, ProviderError | TokenStoreError | TimeoutError):
        return str(failed)[:300]
    return "no detail"


def _parameter(params: Mapping[str, object], name: str) -> str | None:
    """A callback's parameter as text; None when absent, not text, or too long."""
    value = params.get(name)
    if isinstance(value, list | tuple):
        value = value[0] if len(value) == 1 else None
    if not isinstance(value, str) or not value or len(value) > _MAX_PARAMETER:
        return None
    return value


def _turned_back(call: Call, error: ToolError) -> ToolResult:
    return refusal_result(
        call.plan.name, error, call.context, call.call_id, call.started, instruments=None
    )
