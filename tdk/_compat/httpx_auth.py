"""The auth class httpx wraps a plain callable in (``httpx._auth.FunctionAuth``).

A client made with ``auth=callable`` keeps a ``FunctionAuth``: its flow sends the request
once, as Basic credentials do, so the hook may classify a 401 at once and leave the send as
httpx's own. Told apart by its class: one httpx may not export.
"""

from __future__ import annotations

import importlib
from typing import Final

import httpx

__all__ = ["FUNCTION_AUTH", "function_auth"]


def function_auth() -> type[httpx.Auth] | None:
    """``httpx.FunctionAuth`` where httpx exports it (0.29.0, checked), else
    ``httpx._auth.FunctionAuth``, where older versions keep it (tdk allows httpx 0.27 on).
    None when neither holds an :class:`httpx.Auth` subclass: a client's callable auth is
    then treated as a flow that may answer a challenge (its request marked, its 401 left to
    the flow first), which is slower but classifies the same."""
    found = getattr(httpx, "FunctionAuth", None)
    if found is None:
        try:
            found = getattr(importlib.import_module("httpx._auth"), "FunctionAuth", None)
        except ImportError:
            return None
    return found if isinstance(found, type) and issubclass(found, httpx.Auth) else None


FUNCTION_AUTH: Final = function_auth()
"""The class of a client's callable auth, or None (see :func:`function_auth`)."""
