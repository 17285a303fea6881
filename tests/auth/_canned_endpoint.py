"""A token endpoint on loopback that answers whatever a test sets (status, headers, body):
a hostile provider, for the tests of what tdk makes of answers no provider should give."""

from __future__ import annotations

import threading
from typing import ClassVar

from _authlib_loopback import HANG, Loopback, LoopbackHandler

__all__ = ["CannedEndpoint"]


class CannedEndpoint:
    """``POST /token`` (and any other path) on ``http://127.0.0.1:PORT`` answering
    :attr:`answer`: (status, media type, body, extra headers); counts :attr:`posts`. With
    :attr:`held` set, each answer waits for :attr:`released` (set on close too); each
    request sets :attr:`arrived` once read."""

    def __init__(self) -> None:
        self.answer: tuple[int, str, bytes, tuple[tuple[str, str], ...]] = (
            200,
            "application/json",
            b"{}",
            (),
        )
        self.posts = 0
        self.held = False
        self.arrived = threading.Event()
        self._lock = threading.Lock()
        self._http = Loopback(_handler_for(self))
        self.released = self._http.released
        self.url = self._http.url
        self.token_url = f"{self.url}/token"

    def __enter__(self) -> CannedEndpoint:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def counted(self) -> None:
        with self._lock:
            self.posts += 1


def _handler_for(endpoint: CannedEndpoint) -> type[LoopbackHandler]:
    class Handler(_Handler):
        owner: ClassVar[CannedEndpoint] = endpoint

    return Handler


class _Handler(LoopbackHandler):
    owner: ClassVar[CannedEndpoint]

    def do_POST(self) -> None:
        """Answer the canned answer."""
        if self.read_body() is None:
            return
        self.owner.counted()
        self.owner.arrived.set()
        if self.owner.held:
            self.owner.released.wait(HANG)
        status, media, body, headers = self.owner.answer
        self.send(status, body, media, headers)
