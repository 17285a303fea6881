"""The httpx response hooks, their options, and ``install``.

Options live on :class:`UpstreamHook`, a frozen record whose methods are the hooks. The
module-level :func:`raise_for_upstream`, :func:`araise_for_upstream` and :func:`classify` are
those of a hook with the default options; :func:`install` builds one from keywords.

httpx runs response hooks on every hop of a request: on each redirect, and on the 401 that an
auth flow (``httpx.DigestAuth``, a token refreshed on 401) answers with a second request. A
hook alone cannot tell a hop from the final response, nor a body the caller will stream from
one httpx will read. So :func:`install` also wraps the client's ``send``: while it runs, the
hook lets 401 and 407 pass (the auth flow may answer them), and once the flow is done the
final response is classified as usual; a 2xx body is read and checked only when the caller
did not choose to stream it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterable
from contextvars import Token
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, TypeVar

import httpx

from tdk._compat.httpx_auth import FUNCTION_AUTH
from tdk._execution.exchanges import (
    NOTING,
    note_failure,
    note_refusal,
    note_response,
    note_sending,
    note_unauthorized,
)
from tdk._failures.redact import call_secrets, end_call_secrets
from tdk.errors import ErrorCategory, UpstreamError
from tdk.http._body import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_BODY_SECONDS,
    aread_bounded,
    bound_stream,
    read_bounded,
    read_content,
)
from tdk.http._classify import BodyCheck, build_error, complete_body_check_error, request_secrets
from tdk.http._logging import redact_httpx_logs
from tdk.http._retry_after import DEFAULT_MAX_RETRY_AFTER_MS

_LOG: Final = logging.getLogger("tdk.http")

# From now on the hooks may note a call's requests: execution watches the calls of tools that
# may write (see tdk._execution.exchanges).
NOTING.on = True

EventHook = Callable[..., Any]

#: Statuses that ask for credentials, which an auth flow may answer with a second request.
CHALLENGES: Final = frozenset({401, 407})
_UNAUTHORIZED: Final = 401
#: The key under which the ``send`` of a client tdk is installed on marks the request it
#: sends, while it runs (httpx copies a request's extensions to its redirects). The hook
#: leaves challenges to that send, and 2xx bodies too (it knows whether the caller streams
#: them), for responses to marked requests only: another client called meanwhile (a token
#: fetched in an auth flow) keeps the hook's plain behaviour. (A mark in the request, not a
#: context variable, keeps the wrapper light: bench/README.md#the-installed-send.)
_MARK: Final = "tdk.installed_send"
#: The key under which a flow that reads the body of the challenges it answers
#: (``requires_response_body``) marks its requests: the hook leaves those bodies whole.
_READS: Final = "tdk.flow_reads_body"


class HookedClient(Protocol):
    """What :func:`install` needs of a client: httpx's ``event_hooks`` property."""

    @property
    def event_hooks(self) -> dict[str, list[EventHook]]: ...

    @event_hooks.setter
    def event_hooks(self, event_hooks: dict[str, list[EventHook]]) -> None: ...


ClientT = TypeVar("ClientT", bound=HookedClient)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamHook:
    """A configured classifier; its methods are httpx response hooks.

    :param max_retry_after_ms: longest ``retry_after_ms`` reported; longer waits are clamped
        and the original value is kept in ``details["retry_after_clamped_from_ms"]``.
    :param max_body_bytes: raw bytes read from an error body at most, and decoded bytes kept.
    :param max_body_seconds: seconds spent reading an error body at most (a number > 0); the
        classification uses what arrived by then. The async hook reads under
        :func:`asyncio.timeout`; the sync hook checks the clock between chunks, so one
        blocking read there lasts at most httpx's own read timeout.
    :param check_body: a provider-specific check, called as ``check_body(response, payload)``
        with the parsed JSON body (or None). It runs on every error response before the
        standard classification, and on 2xx responses whose ``Content-Type`` mentions JSON
        (those bodies are read in full first, as httpx would read them anyway; they stay
        readable), except those the caller streams (``client.stream(...)``), which are never
        read. Return an :class:`~tdk.errors.UpstreamError` to raise it, or None.

    .. versionadded:: 0.1
    """

    max_retry_after_ms: int = DEFAULT_MAX_RETRY_AFTER_MS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_body_seconds: float = DEFAULT_MAX_BODY_SECONDS
    check_body: BodyCheck | None = None

    def __post_init__(self) -> None:
        for name, floor in (("max_retry_after_ms", 0), ("max_body_bytes", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < floor:
                raise ValueError(f"{name} must be an int >= {floor}, got {value!r}")
        seconds = self.max_body_seconds
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds < math.inf
        ):
            raise ValueError(f"max_body_seconds must be a number > 0, got {seconds!r}")
        if self.check_body is not None and not callable(self.check_body):
            raise TypeError("check_body must be callable or None")

    def raise_for_upstream(self, response: httpx.Response) -> None:
        """Sync response hook: raise the classified error for a status >= 400 (or outside
        100-599); let every other response pass untouched."""
        note_response(response)
        status = response.status_code
        if 100 <= status < 400:
            if (
                self.check_body is not None
                and _checked_success(response)
                and not _sent_by_installed(response)
            ):
                response.read()  # a hook added by hand: httpx is about to read it anyway
                self._check_success(response)
            return
        if status in CHALLENGES and _sent_by_installed(response):
            # An auth flow may answer it (httpx then reads its body, within our bounds, unless
            # the flow reads it itself); the installed send classifies the last response.
            if not _read_by_flow(response):
                bound_stream(
                    response, self.max_body_bytes, self.max_body_seconds, asynchronous=False
                )
            return
        self._raise_final(response)

    def _raise_final(self, response: httpx.Response) -> None:
        """Read what the bounds allow of an error body, close the response and raise."""
        body = read_bounded(response, self.max_body_bytes, self.max_body_seconds)
        response.close()
        raise _noted(self._error(response, body, None, ()), response)

    async def araise_for_upstream(self, response: httpx.Response) -> None:
        """Async response hook for ``httpx.AsyncClient``; same behaviour as
        :meth:`raise_for_upstream`."""
        note_response(response)
        status = response.status_code
        if 100 <= status < 400:
            if (
                self.check_body is not None
                and _checked_success(response)
                and not _sent_by_installed(response)
            ):
                await response.aread()
                self._check_success(response)
            return
        if status in CHALLENGES and _sent_by_installed(response):
            if not _read_by_flow(response):
                bound_stream(
                    response, self.max_body_bytes, self.max_body_seconds, asynchronous=True
                )
            return
        await self._araise_final(response)

    async def _araise_final(self, response: httpx.Response) -> None:
        """The async twin of :meth:`_raise_final`."""
        body = await aread_bounded(response, self.max_body_bytes, self.max_body_seconds)
        await response.aclose()
        raise _noted(self._error(response, body, None, ()), response)

    def classify(
        self, response: httpx.Response, *, now: datetime | None = None, secrets: Iterable[str] = ()
    ) -> UpstreamError | None:
        """The error ``response`` stands for, or None; reads nothing (see :func:`classify`)."""
        status = response.status_code
        if 100 <= status < 400:
            if self.check_body is None or not _checked_success(response) or not _read(response):
                return None
            return self._body_error(response, response.content)
        body = read_content(response, self.max_body_bytes)
        return self._error(response, body, now, secrets)

    def install(self, client: ClientT) -> ClientT:
        """Add this hook to ``client`` (sync or async, httpx or httpx2) and return it.

        A tdk hook already installed is replaced, so installing twice leaves one hook. The
        client's ``send`` is wrapped so that auth flows work and streamed bodies stay unread
        (see the module docstring). A ``request`` hook and the wrapped ``send`` note each
        request that may have reached the upstream, for a runner deciding whether a write may
        be repeated (see :mod:`tdk._execution.exchanges`). The ``httpx`` logger gets a
        :class:`RedactingLogFilter` (see :func:`redact_httpx_logs`): its INFO line carries
        every request's whole URL.
        """
        redact_httpx_logs()
        is_async = _is_async(client)
        hook = _hook_for(self, is_async)
        hooks = client.event_hooks
        hooks["response"] = [h for h in hooks.get("response", []) if not _is_ours(h)] + [hook]
        # Last of the request hooks: the one nearest to the request leaving.
        sending = _anote_sending if is_async else note_sending
        hooks["request"] = [h for h in hooks.get("request", []) if not _is_ours(h)] + [sending]
        client.event_hooks = hooks
        send = getattr(client, "send", None)
        if isinstance(send, _InstalledSend):
            send.hook = self
        elif send is not None:
            vars(client)["send"] = (_AsyncInstalledSend if is_async else _InstalledSend)(self, send)
        return client

    def _error(
        self,
        response: httpx.Response,
        body: bytes | None,
        now: datetime | None,
        secrets: Iterable[str],
    ) -> UpstreamError:
        error = build_error(
            response,
            body,
            now=now,
            max_retry_after_ms=self.max_retry_after_ms,
            secrets=secrets,
            check_body=self.check_body,
        )
        if _LOG.isEnabledFor(logging.DEBUG):
            _LOG.debug(
                "upstream error %s %s: %s",
                error.details.get("method", "-"),
                error.details.get("url", "-"),
                error.to_log_line(),
            )
        return error

    def _body_error(self, response: httpx.Response, content: bytes) -> UpstreamError | None:
        assert self.check_body is not None  # callers check
        try:
            payload = json.loads(content)
        except (ValueError, RecursionError):
            return None
        error = self.check_body(response, payload)
        return None if error is None else complete_body_check_error(error, response)

    def _check_success(self, response: httpx.Response) -> None:
        error = self._body_error(response, response.content)
        if error is not None:
            raise _noted(error, response)


def _noted(error: UpstreamError, response: httpx.Response) -> UpstreamError:
    """``error``, the classification of ``response``; a rate limit, and a 401 (the
    credentials refused: nothing was done, and a runner acting as the user refreshes the
    token and tries once more), are noted as requests the upstream refused (see
    :mod:`tdk._execution.exchanges`)."""
    if response.status_code == _UNAUTHORIZED:
        note_unauthorized(response)
    elif error.category is ErrorCategory.RATE_LIMIT:
        note_refusal(response)
    return error


class _InstalledSend:
    """``client.send`` of a client tdk is installed on: the original ``send``, then the
    classification of the final response, for which a response hook is too early."""

    __slots__ = ("hook", "send")

    def __init__(self, hook: UpstreamHook, send: Callable[..., Any]) -> None:
        self.hook = hook
        self.send = send

    def __call__(
        self, request: httpx.Request, *, stream: bool = False, **options: Any
    ) -> httpx.Response:
        plain = _prepare(self.hook, self.send, request, options)
        secrets = _logged_secrets(request)
        try:
            response: httpx.Response = self.send(request, stream=stream or not plain, **options)
        except BaseException as failed:
            note_failure(request, failed)
            raise
        finally:
            if not plain:
                _unmark(request)
            if secrets is not None:
                end_call_secrets(secrets)
        if plain:  # the hook has classified every hop as it came (but a 401 another send of
            if response.status_code in CHALLENGES:  # the same request deferred)
                self.hook._raise_final(response)
            return response
        _unmark_copies(request, response)
        if response.status_code in CHALLENGES:  # no auth flow answered it (whatever marks
            self.hook._raise_final(response)  # another send of the request left on it)
        if not stream:
            try:  # what httpx's own send does for a body the caller does not stream
                response.read()
                if self.hook.check_body is not None and _checked_success(response):
                    self.hook._check_success(response)
            except BaseException:
                response.close()
                raise
        return response


class _AsyncInstalledSend(_InstalledSend):
    """The same for an ``AsyncClient``."""

    __slots__ = ()

    def __call__(  # type: ignore[override]
        self, request: httpx.Request, *, stream: bool = False, **options: Any
    ) -> Awaitable[httpx.Response]:
        return self._send(request, stream, options)

    async def _send(
        self, request: httpx.Request, stream: bool, options: dict[str, Any]
    ) -> httpx.Response:
        plain = _prepare(self.hook, self.send, request, options)
        secrets = _logged_secrets(request)
        try:
            response: httpx.Response = await self.send(
                request, stream=stream or not plain, **options
            )
        except BaseException as failed:
            note_failure(request, failed)
            raise
        finally:
            if not plain:
                _unmark(request)
            if secrets is not None:
                end_call_secrets(secrets)
        if plain:
            if response.status_code in CHALLENGES:
                await self.hook._araise_final(response)
            return response
        _unmark_copies(request, response)
        if response.status_code in CHALLENGES:
            await self.hook._araise_final(response)
        if not stream:
            try:
                await response.aread()
                if self.hook.check_body is not None and _checked_success(response):
                    self.hook._check_success(response)
            except BaseException:
                await response.aclose()
                raise
        return response


def _prepare(
    hook: UpstreamHook, send: Any, request: httpx.Request, options: dict[str, Any]
) -> bool:
    """Get a send ready; whether it is plain (httpx's own, untouched: no auth flow can answer
    a challenge, and no body check is set). Otherwise the request is marked, and an httpx auth
    flow that may answer is wrapped so that each request it sends is marked too."""
    auth = _answering_auth(send, options)
    if auth is None and hook.check_body is None:
        return True
    _mark(request)
    if isinstance(auth, httpx.Auth):
        options["auth"] = _MarkingAuth(auth)
    return False


def _answering_auth(send: Any, options: dict[str, Any]) -> Any:
    """The auth of a send if it may answer a challenge with a second request, else None. No
    auth, Basic credentials (a tuple, ``httpx.BasicAuth``, the URL's), a callable and
    ``httpx.NetRCAuth`` send their request once: the hook then classifies a 401 at once, and
    the send is httpx's own. Anything else (``httpx.DigestAuth``, a flow of the user's, an
    ``httpx2`` auth) may."""
    auth = options.get("auth", httpx.USE_CLIENT_DEFAULT)
    if auth is httpx.USE_CLIENT_DEFAULT:
        auth = getattr(getattr(send, "__self__", None), "auth", None)
    if auth is None or isinstance(auth, tuple):
        return None
    if isinstance(auth, httpx.Auth):
        return None if type(auth) in _ONE_SHOT_AUTHS else auth
    return None if callable(auth) else auth


class _MarkingAuth(httpx.Auth):
    """Runs the flow of ``auth`` and marks every request it sends while it runs: a flow may
    answer a challenge with a request of its own making, whose hop the hook must leave to it
    too. The marks come off when the flow ends."""

    def __init__(self, auth: httpx.Auth) -> None:
        self._auth = auth

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        """The wrapped flow, each request marked."""
        flow = self._auth.sync_auth_flow(request)
        marked: list[httpx.Request] = []
        try:
            sent = next(flow)
            while True:
                self._mark(sent, marked)
                response = yield sent
                sent = flow.send(response)
        except StopIteration:
            return
        finally:
            self._unmark(marked)
            flow.close()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """The async twin of :meth:`sync_auth_flow`."""
        flow = self._auth.async_auth_flow(request)
        marked: list[httpx.Request] = []
        try:
            sent = await anext(flow)
            while True:
                self._mark(sent, marked)
                response = yield sent
                sent = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            self._unmark(marked)
            await flow.aclose()

    def _mark(self, sent: httpx.Request, marked: list[httpx.Request]) -> None:
        _mark(sent)
        if self._auth.requires_response_body:
            _mark(sent, _READS)
        marked.append(sent)

    def _unmark(self, marked: list[httpx.Request]) -> None:
        for sent in marked:
            _unmark(sent)
            if self._auth.requires_response_body:
                _unmark(sent, _READS)


#: ``httpx`` auth types whose flow sends its request once (a client's callable auth among
#: them where httpx lets tdk name its class).
_ONE_SHOT_AUTHS: Final = frozenset(
    {httpx.Auth, httpx.BasicAuth, httpx.NetRCAuth, *([FUNCTION_AUTH] if FUNCTION_AUTH else [])}
)


def _mark(request: httpx.Request, key: str = _MARK) -> None:
    """Mark ``request`` (and so its redirects) as sent by an installed send: a count, for the
    same request may be sent by several at once."""
    extensions = request.extensions
    extensions[key] = extensions.get(key, 0) + 1


def _unmark(request: httpx.Request, key: str = _MARK) -> None:
    extensions = request.extensions
    left = extensions.pop(key, 1) - 1
    if left > 0:
        extensions[key] = left


def _unmark_copies(request: httpx.Request, response: httpx.Response) -> None:
    """Take the mark off the requests made from ``request`` during the send (the redirects
    httpx made, a copy an auth flow sent): one reused later, with a plain hook, must get the
    plain behaviour."""
    for hop in (*response.history, response) if response.history else (response,):
        if hop.request is not request:
            hop.request.extensions.pop(_MARK, None)
            hop.request.extensions.pop(_READS, None)


def _read_by_flow(response: httpx.Response) -> bool:
    """Whether the auth flow that sent the request of ``response`` reads the body of the
    challenges it answers (``requires_response_body``): it gets them whole, as without tdk."""
    return _READS in response.request.extensions


def _sent_by_installed(response: httpx.Response) -> bool:
    """Whether ``response`` answers a request of an installed send that is running (its hook
    leaves challenges and 2xx bodies to that send)."""
    try:
        return _MARK in response.request.extensions
    except Exception:  # a response without a request, or odd extensions: not ours
        return False


#: httpcore's loggers whose DEBUG lines list response headers.
_HTTP11: Final = logging.getLogger("httpcore.http11")
_HTTP2: Final = logging.getLogger("httpcore.http2")
_DEBUG: Final = logging.DEBUG


def _logged_secrets(request: httpx.Request) -> Token[tuple[str, ...]] | None:
    """While httpcore logs response headers (DEBUG), the credentials ``request`` carries are
    made the running call's secrets for its send: an upstream may echo them in any header, and
    the log filter scrubs the call's secrets from every line. (Nothing to do, and two cached
    level checks to pay, while those lines are off.)"""
    if not (_HTTP11.isEnabledFor(_DEBUG) or _HTTP2.isEnabledFor(_DEBUG)):
        return None
    return call_secrets(tuple(request_secrets(request)))


def _read(response: httpx.Response) -> bool:
    try:
        response.content  # noqa: B018 - probing whether the body was read
    except Exception:  # ResponseNotRead, from httpx or httpx2
        return False
    return True


def _checked_success(response: httpx.Response) -> bool:
    return 200 <= response.status_code < 300 and "json" in response.headers.get("content-type", "")


_DEFAULT: Final = UpstreamHook()


def raise_for_upstream(response: httpx.Response) -> None:
    """Sync httpx response hook with the default options.

    Responses below 400 return at once (no body read, no header parsed). Any other status
    reads at most 64 KiB of the body, closes the response and raises the
    :class:`~tdk.errors.UpstreamError` that :func:`classify` describes::

        client = httpx.Client(event_hooks={"response": [tdk.http.raise_for_upstream]})
    """
    if 100 <= response.status_code < 400:
        note_response(response)
        return
    _DEFAULT.raise_for_upstream(response)


async def araise_for_upstream(response: httpx.Response) -> None:
    """Async httpx response hook with the default options (for ``httpx.AsyncClient``)."""
    if 100 <= response.status_code < 400:
        note_response(response)
        return
    await _DEFAULT.araise_for_upstream(response)


def classify(
    response: httpx.Response, *, now: datetime | None = None, secrets: Iterable[str] = ()
) -> UpstreamError | None:
    """The :class:`~tdk.errors.UpstreamError` a response stands for, or None below 400.

    Pure: it reads nothing. It uses the body when it has already been read (up to 64 KiB),
    else the status and headers alone. ``now`` (an aware datetime) is the reference for
    absolute times; by default the response's ``Date`` header, else the clock. ``secrets`` are
    extra values to scrub from every text, besides the credentials the request carried.
    """
    return _DEFAULT.classify(response, now=now, secrets=secrets)


def install(
    client: ClientT,
    *,
    max_retry_after_ms: int = DEFAULT_MAX_RETRY_AFTER_MS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_body_seconds: float = DEFAULT_MAX_BODY_SECONDS,
    check_body: BodyCheck | None = None,
) -> ClientT:
    """Add the right hook to an existing ``httpx.Client`` or ``httpx.AsyncClient`` (or their
    ``httpx2`` twins, when that package is installed) and return the client.

    Installing twice leaves one hook (the last options win). The options are those of
    :class:`UpstreamHook`.
    """
    hook = UpstreamHook(
        max_retry_after_ms=max_retry_after_ms,
        max_body_bytes=max_body_bytes,
        max_body_seconds=max_body_seconds,
        check_body=check_body,
    )
    return hook.install(client)


def _hook_for(hook: UpstreamHook, is_async: bool) -> EventHook:
    if hook == _DEFAULT:
        return araise_for_upstream if is_async else raise_for_upstream
    return hook.araise_for_upstream if is_async else hook.raise_for_upstream


async def _anote_sending(request: httpx.Request) -> None:
    """The async ``request`` hook of an installed client: see :func:`note_sending`."""
    note_sending(request)


def _is_ours(hook: object) -> bool:
    return hook in (
        raise_for_upstream,
        araise_for_upstream,
        note_sending,
        _anote_sending,
    ) or isinstance(getattr(hook, "__self__", None), UpstreamHook)


def _is_async(client: object) -> bool:
    if isinstance(client, httpx.AsyncClient):
        return True
    if isinstance(client, httpx.Client):
        return False
    if importlib.util.find_spec("httpx2") is not None:
        httpx2 = importlib.import_module("httpx2")
        if isinstance(client, httpx2.AsyncClient):
            return True
        if isinstance(client, httpx2.Client):
            return False
    raise TypeError(
        f"install() needs an httpx.Client or httpx.AsyncClient, not {type(client).__name__}"
    )
