"""What the authlib authorization servers of the auth tests share (``_auth_server``, the
introspection server; ``_oauth_provider_server``, the "GitHub" the outbound tests act on):
the client and token models, the glue from stdlib ``http.server`` to authlib's requests and
answers, and a ``ThreadingHTTPServer`` on 127.0.0.1 in a thread whose handlers can
misbehave on request (answer HTML, a 500, hang until the server closes, or a huge body).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Request, TokenMixin
from authlib.oauth2.rfc6749.requests import OAuth2Payload

#: Seconds a hanging answer holds (released when the server closes).
HANG = 60.0
#: Bytes of a "huge" answer: far more than any client should read of a token answer.
HUGE = 10 * 1024 * 1024
#: Largest request body a loopback server reads (a bigger one is answered 413).
MAX_BODY = 64 * 1024

#: How an endpoint can be told to misbehave; "ok" answers as the protocol says.
Mode = Literal["ok", "html", "500", "hang", "huge"]


def _no_redirect(uri: str) -> bool:
    return False


@dataclass
class Client(ClientMixin):
    """A registered client: confidential when it has a ``secret``, public (PKCE alone) when
    not. ``redirect_uris`` says which redirect URIs it may use (none by default)."""

    client_id: str
    secret: str | None
    grant_types: tuple[str, ...]
    auth_methods: tuple[str, ...] = ("client_secret_basic",)
    """How it may authenticate at the token, revocation and introspection endpoints."""
    redirect_uris: Callable[[str], bool] = _no_redirect

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return ""

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return self.redirect_uris(redirect_uri)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret is not None and secrets.compare_digest(client_secret, self.secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in self.auth_methods

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class Token(TokenMixin):
    """An issued access token, and the refresh token issued with it (if any)."""

    access_token: str
    client: Client
    user: str
    scope: str
    issued_at: int
    expires_in: int
    revoked: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    """What the introspection answer says beside (or instead of) the usual fields."""
    refresh_token: str | None = None
    refresh_revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return self.client.client_id == client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> Client:
        return self.client

    def expire(self) -> None:
        """Make the access token expired now (its refresh token stays good)."""
        self.issued_at = int(time.time()) - self.expires_in - 1


class _Payload(OAuth2Payload):
    """Parameters as sent: ``data`` holds the first value of each, ``datalist`` every one
    (authlib refuses some parameters given twice)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self._datalist: dict[str, list[str]] = {}
        for name, value in pairs:
            self._datalist.setdefault(name, []).append(value)
        self._data = {name: values[0] for name, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> Any:
        return self._datalist


class FormRequest(OAuth2Request):
    """An authlib request from what ``http.server`` read: the query of a GET, or the form
    of a POST, is its payload."""

    def __init__(
        self, method: str, uri: str, headers: Any, form: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(method, uri, headers=headers)
        query = parse_qsl(urlsplit(uri).query, keep_blank_values=True)
        body = list(form)
        self.payload = _Payload(query if method == "GET" else body)
        self._args = dict(query)
        self._form = dict(body)

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class AuthlibServer(AuthorizationServer):  # type: ignore[misc]
    """authlib's authorization server over a table of clients, answering with
    ``(status, body, headers)`` tuples that a handler sends as they are."""

    def __init__(self, clients: Mapping[str, Client], scopes: Iterable[str] | None) -> None:
        super().__init__(scopes_supported=None if scopes is None else list(scopes))
        self.clients = clients

    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request if isinstance(request, OAuth2Request) else FormRequest(*request)

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: object, **kwargs: object) -> None:
        """No signals."""


def random_token(*args: object, **kwargs: object) -> str:
    """A fresh opaque token (access, refresh), whatever authlib passes."""
    return secrets.token_urlsafe(32)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (as a bounded reader should) is no error."""


class Loopback:
    """A ``ThreadingHTTPServer`` on ``http://127.0.0.1:PORT`` (a free port unless given),
    served in a daemon thread between :meth:`start` and :meth:`close`; ``released`` is set
    on close, which ends the answers that hang."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        self._http = _QuietServer(("127.0.0.1", port), handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self.released = threading.Event()
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def close(self) -> None:
        """Release the hanging answers, stop serving and close the socket."""
        self.released.set()
        if self._thread.is_alive():
            self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)


class LoopbackHandler(BaseHTTPRequestHandler):
    """A quiet handler with the answers the loopback servers share."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def send(
        self,
        status: int,
        body: bytes | str,
        media: str = "application/json",
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Answer ``status`` with ``body`` and close the connection."""
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in headers:
            if name.lower() not in ("content-type", "content-length"):
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_authlib(self, answer: tuple[int, Any, Any]) -> None:
        """Send what authlib answered: a JSON body, or a redirect with an empty one."""
        status, body, headers = answer
        text = body if isinstance(body, str) else json.dumps(body)
        self.send(status, text, headers=headers or ())

    def read_body(self) -> bytes | None:
        """The body the request sent, or None once answered 413 (a body over MAX_BODY)."""
        length = int(self.headers.get("Content-Length") or "0")
        if not 0 <= length <= MAX_BODY:
            self.send(413, b'{"error": "invalid_request"}')
            return None
        return self.rfile.read(length)

    def read_form(self) -> list[tuple[str, str]] | None:
        """The form the request sent, or None once answered 413 (a body over MAX_BODY)."""
        body = self.read_body()
        if body is None:
            return None
        return parse_qsl(body.decode(errors="replace"), keep_blank_values=True)

    def misbehave(self, mode: Mode, released: threading.Event) -> None:
        """Answer as ``mode`` says instead of as the protocol does."""
        if mode == "html":
            self.send(200, b"<html><body>Sign in</body></html>", "text/html")
        elif mode == "500":
            self.send(500, b'{"error": "server_error"}')
        elif mode == "huge":
            self._send_huge()
        else:  # hang
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            released.wait(HANG)

    def _send_huge(self) -> None:
        """A JSON token answer of HUGE bytes, written in chunks to a reader that may hang up."""
        head, tail = b'{"access_token": "', b'", "token_type": "Bearer"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(HUGE))
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"a" * 65536
        left = HUGE - len(head) - len(tail)
        try:
            self.wfile.write(head)
            while left > 0:
                self.wfile.write(chunk[:left])
                left -= len(chunk)
            self.wfile.write(tail)
        except OSError:
            return
