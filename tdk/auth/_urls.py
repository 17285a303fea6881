"""The URLs and durations an authorization server's settings are given in, checked before
anything is fetched (stdlib only: :mod:`tdk.auth._provider` is read by ``@tool``, which must
not load httpx or the auth extra).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from tdk._execution.seconds import finite, shown

__all__ = ["checked_url", "loopback", "seconds_option"]


def checked_url(url: str, what: str, *, plain_http: bool = False) -> str:
    """``url`` when it is an ``https`` URL, or ``http`` on a loopback address (tests, a
    sidecar), or anywhere with ``plain_http``; a ``ValueError`` naming ``what`` otherwise.
    Keys or answers read over plain HTTP from another machine could be swapped on the way,
    and every token then forged."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme not in ("https", "http") or not host:
        raise ValueError(f"{what} must be an https URL, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must not hold credentials")
    if parts.scheme == "http" and not plain_http and not loopback(host):
        raise ValueError(f"{what} must be https (plain http only on loopback): {url!r}")
    return url


def seconds_option(value: object, what: str, *, zero: bool = False) -> float:
    """``value`` as seconds: a finite number > 0 (>= 0 with ``zero``); else a ``ValueError``
    naming ``what``."""
    seconds = finite(value)
    if seconds is None or seconds < 0 or (seconds == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{what} must be a finite number of seconds {bound}, not {shown(value)}")
    return seconds


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
