"""Where an HTTP server listens: the address a ``--host`` names, and who can reach it there.

Every spelling of an address counts as the address it is, because the server binds what the
system's resolver makes of it: ``0``, ``0x0``, ``0.0.0.0``, ``::``, ``::0``, ``[::]``,
``0:0:0:0:0:0:0:0`` and the empty string are every interface; ``127.1``, ``2130706433``,
``::1``, ``::ffff:127.0.0.1`` and ``localhost`` are loopback. The address classified is the
one bound: the first the resolver gives for a passive TCP socket, as
:func:`listening_address` returns it to the server.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Listening", "Reach", "bound", "listening_address", "reach_of", "unbracketed"]

#: Who can reach a server on an address: this machine only, every network of it, or the
#: network of one address.
Reach = Literal["loopback", "every", "other"]


@dataclass(frozen=True, slots=True)
class Listening:
    """The address a server binds for ``host`` (as given, without brackets) and ``port``."""

    host: str
    port: int
    family: socket.AddressFamily
    address: tuple[Any, ...]
    reach: Reach

    @property
    def url(self) -> str:
        """``http://host:port/mcp``, an IPv6 address in brackets."""
        named = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{named}:{self.port}/mcp"

    @property
    def bound(self) -> str:
        """The address bound, as text (``0.0.0.0`` for ``0``)."""
        return str(self.address[0])


def unbracketed(host: str) -> str:
    """``host`` without the brackets of an IPv6 address in a URL (``[::1]`` is ``::1``)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def listening_address(host: str, port: int) -> Listening:
    """The address a server for ``host`` and ``port`` binds; ``OSError`` (``socket.gaierror``)
    when ``host`` names none."""
    plain = unbracketed(host)
    family, _, _, _, address = socket.getaddrinfo(
        plain or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return Listening(plain, port, family, address, _reach_of_ip(str(address[0])))


@contextlib.contextmanager
def bound(where: Listening) -> Iterator[socket.socket]:
    """A TCP socket bound to ``where`` (``OSError`` when it cannot be), closed on the way out.

    Made with its protocol named (``IPPROTO_TCP``), as the resolver gives it: asyncio turns
    Nagle's algorithm off (``TCP_NODELAY``) only on connections of a socket that says it is
    TCP, and with Nagle on, a response written in two parts (headers, then body) waits for
    the client's delayed ACK: some 40 ms per call."""
    listener = socket.socket(where.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(where.address)
        yield listener
    finally:
        listener.close()


def reach_of(host: str) -> Reach:
    """Who can reach a server on ``host``; ``"other"`` when it names no address (the server
    will say so when it binds)."""
    try:
        return listening_address(host, 0).reach
    except (OSError, UnicodeError):  # (a name the resolver refuses, or too long for IDNA)
        return "other"


def _reach_of_ip(text: str) -> Reach:
    try:
        ip = ipaddress.ip_address(text.partition("%")[0])  # (a scope: fe80::1%eth0)
    except ValueError:  # pragma: no cover - the resolver gives addresses
        return "other"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1 to the kernel
    if ip.is_unspecified:
        return "every"
    return "loopback" if ip.is_loopback else "other"
