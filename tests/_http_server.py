"""A real HTTP server on 127.0.0.1 (stdlib ``http.server`` in a thread) for the hook tests.

Each route answers the way a real API or proxy does; ``Date`` headers are fixed so that
absolute times give exact waits. :class:`Writes` is a tracker that counts the writes it
receives, for the tests of writes that may have happened.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
#: 50 MB of zeros inflated from about 50 KB of gzip.
BOMB_SIZE = 50 * 1024 * 1024
BIG_BODY_SIZE = 10 * 1024 * 1024
#: The value of the session cookie that ``/cookie`` sets.
SESSION = "sess-7f3a9c1e5b"
#: What ``/drip`` sends, one byte every ``DRIP_SECONDS`` (10 s in all).
DRIP_BODY = b"field 'q' is invalid: use a date\n" + b"." * 7
DRIP_SECONDS = 0.25


def _gzip_bomb() -> bytes:
    return gzip.compress(b"\0" * BOMB_SIZE, compresslevel=9)


class Handler(BaseHTTPRequestHandler):
    """Routes by path; every answer but ``/kept``'s closes the connection."""

    protocol_version = "HTTP/1.1"
    bomb: ClassVar[bytes] = b""

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def _answer(
        self, status: int, headers: dict[str, str], body: bytes = b"", *, length: bool = True
    ) -> None:
        self.send_response_only(status)
        self.send_header("Date", DATE)
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """Answer one request."""
        route: Callable[[], None] | None = getattr(self, "route_" + self.path.strip("/"), None)
        if route is None:
            self._answer(404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}')
        else:
            route()

    def route_ok(self) -> None:
        self._answer(200, {"Content-Type": "application/json"}, b'{"items": [1, 2, 3]}')

    def route_kept(self) -> None:
        """A 200 that keeps its connection open for the next request (HTTP/1.1 keep-alive) and
        names the client port that asked: calls sharing a pooled connection see one port."""
        body = json.dumps({"port": self.client_address[1]}).encode()
        self.send_response_only(200)
        self.send_header("Date", DATE)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route_cookie(self) -> None:
        """A session cookie, as a login answers (httpcore's DEBUG lines list it)."""
        self._answer(200, {"Set-Cookie": f"session={SESSION}; HttpOnly"}, b"{}")

    def route_echo(self) -> None:
        """An upstream that echoes the request's API key in its response headers."""
        key = self.headers.get("X-Api-Key", "")
        self._answer(401, {"X-Echo": key, "X-Echo-Api-Key": key}, b"{}")

    def route_endless(self) -> None:
        """A 200 JSON stream that never ends (until the client hangs up)."""
        self.send_response_only(200)
        self.send_header("Date", DATE)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        piece = b'{"event": "tick"}\n'
        try:
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                time.sleep(0.01)
        except OSError:  # the client went away
            return

    def route_limited(self) -> None:
        body = json.dumps({"message": "API rate limit exceeded"}).encode()
        self._answer(429, {"Retry-After": "7", "Content-Type": "application/json"}, body)

    def route_overloaded(self) -> None:
        headers = {"Retry-After": "Tue, 14 Nov 2023 22:15:20 GMT", "Content-Type": "text/plain"}
        self._answer(503, headers, b"Service Unavailable: back soon\n")

    def route_moved(self) -> None:
        self._answer(302, {"Location": "/overloaded"})

    def route_streamed(self) -> None:
        """A 500 whose body arrives in chunks (``Transfer-Encoding: chunked``)."""
        self.send_response_only(500)
        self.send_header("Date", DATE)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (b'{"error": {"message": ', b'"database is ', b'on fire"}}'):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def route_bomb(self) -> None:
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        self._answer(500, headers, self.bomb)

    def route_bomb_challenge(self) -> None:
        """A Digest challenge whose body is a gzip bomb; an answer to it gets a 200. An auth
        flow answers the challenge, and httpx reads (and decodes) the body of that hop."""
        if self.headers.get("Authorization", "").startswith("Digest "):
            self._answer(200, {"Content-Type": "application/json"}, b'{"user": "ann"}')
            return
        headers = {
            "WWW-Authenticate": 'Digest realm="api", nonce="abc123", qop="auth"',
            "Content-Type": "text/plain",
            "Content-Encoding": "gzip",
        }
        self._answer(401, headers, self.bomb)

    def route_big(self) -> None:
        """10 MB of text with no compression: the raw read must stop early."""
        self.send_response_only(400)
        self.send_header("Date", DATE)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(BIG_BODY_SIZE))
        self.end_headers()
        line = b"field 'q' is invalid " + b"x" * 1002 + b"\n"
        try:
            for _ in range(BIG_BODY_SIZE // len(line)):
                self.wfile.write(line)
            self.wfile.write(b"x" * (BIG_BODY_SIZE % len(line)))
        except OSError:  # the client closed the connection after its bounded read
            pass

    def route_drip(self) -> None:
        """A 400 whose body trickles in, one byte every 250 ms: a slow (or hostile) upstream."""
        self.send_response_only(400)
        self.send_header("Date", DATE)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(DRIP_BODY)))
        self.end_headers()
        try:
            for byte in DRIP_BODY:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(DRIP_SECONDS)
        except OSError:  # the client closed the connection after its time budget
            pass

    def route_drip_challenge(self) -> None:
        """A Digest challenge whose body trickles in: an auth flow answers it, and httpx reads
        the body of the hop it answers."""
        self.send_response_only(401)
        self.send_header("Date", DATE)
        self.send_header("Connection", "close")
        self.send_header("WWW-Authenticate", 'Digest realm="api", nonce="abc123", qop="auth"')
        self.send_header("Content-Length", str(len(DRIP_BODY)))
        self.end_headers()
        try:
            for byte in DRIP_BODY:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(DRIP_SECONDS)
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    """A server that stays quiet when a client hangs up mid-answer."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """Ignore errors of a client that went away."""


@contextmanager
def serve() -> Iterator[str]:
    """Run the server on a free port of 127.0.0.1; yield its base URL."""
    Handler.bomb = Handler.bomb or _gzip_bomb()
    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Writes:
    """A tracker on 127.0.0.1 that counts the writes it receives (``POST /<how>``).

    ``/lost``: the write is received, its answer held back past the client's read timeout;
    ``/reset``: received, then the connection closed unanswered; ``/held``: received, its
    answer held back until the test ends; ``/limited``: a 429 (``Retry-After: 0``), sent
    once as many writes arrived as ``/limited`` requests, so a parallel write is certainly
    received first; ``/quota``: a 429 at once; ``/down``: received, then answered 503. A
    ``GET`` or a ``PUT`` (not counted) has its answer held back like ``/lost``.
    """

    def __init__(self) -> None:
        self.writes = 0
        self.limited = 0
        self.changed = threading.Condition()
        self.release = threading.Event()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                how = self.path.strip("/")
                if how == "quota":
                    self._answer(429, {"Retry-After": "0"})
                    return
                if how == "limited":
                    with upstream.changed:
                        upstream.limited += 1
                        upstream.changed.wait_for(
                            lambda: upstream.writes >= upstream.limited, timeout=30
                        )
                    self._answer(429, {"Retry-After": "0"})
                    return
                with upstream.changed:
                    upstream.writes += 1
                    upstream.changed.notify_all()
                if how == "reset":
                    self.close_connection = True  # no answer at all
                    return
                if how == "down":
                    self._answer(503, {})
                    return
                upstream.release.wait(30)  # /lost and /held: an answer that comes too late
                self._answer(201, {})

            def do_GET(self) -> None:
                upstream.release.wait(30)  # an answer that comes too late
                self._answer(200, {})

            def do_PUT(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.do_GET()

            def _answer(self, status: int, headers: dict[str, str]) -> None:
                self.send_response_only(status)
                for name, value in {**headers, "Content-Length": "0"}.items():
                    self.send_header(name, value)
                self.end_headers()

        self.handler = Handler

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """Run on a free port of 127.0.0.1; yield the base URL."""
        server = Server(("127.0.0.1", 0), self.handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            self.release.set()
            server.shutdown()
            server.server_close()
            thread.join()


@contextmanager
def refused_port() -> Iterator[int]:
    """A port of 127.0.0.1 bound but not listening: a connect to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]
