"""The frame that called a function (``sys._getframe``), for ``@tool``'s forward references.

``@tool`` resolves the annotations of a function defined in another function in the names of
that function (its frame's locals), and :func:`tdk._define.tool.collect_definition_errors` names the
modules being imported when a definition failed (the frames above it).
"""

from __future__ import annotations

import inspect
import sys
from types import FrameType

__all__ = ["calling_frame", "walked_frame"]


def calling_frame() -> FrameType | None:
    """The frame of the code that called the function calling this one: ``sys._getframe(2)``
    (a CPython implementation detail, in PyPy too; checked on CPython 3.11.7). Where Python
    has no ``sys._getframe``, :func:`walked_frame`."""
    if not hasattr(sys, "_getframe"):
        return walked_frame(2)
    return sys._getframe(2)


def walked_frame(depth: int) -> FrameType | None:
    """The public fallback of :func:`calling_frame`: the frame ``depth`` calls above the
    caller of this function (0: the caller's own), walked from ``inspect.currentframe()``;
    None where Python keeps no frames (``@tool`` then resolves annotations in the module's
    names only, and a collected definition error names no module)."""
    frame = inspect.currentframe()  # this function's own frame
    for _ in range(depth + 1):
        if frame is None:
            return None
        frame = frame.f_back
    return frame
