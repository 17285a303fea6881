"""The stream protocols the MCP SDK's server takes, spelled here.

mcp keeps ``ReadStream`` and ``WriteStream`` in a private module
(``mcp.shared._stream_protocols``; checked on mcp 2.3.0). They are structural protocols, so tdk
declares the same members rather than importing them: nothing of mcp is read at run time, the
type checker matches them with the SDK's, and ``tests/project/test_compat.py`` fails when the
SDK's protocols gain or lose a member.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, TypeVar

__all__ = ["ReadStream", "WriteStream"]

_T_co = TypeVar("_T_co", covariant=True)
_T_contra = TypeVar("_T_contra", contravariant=True)


class ReadStream(Protocol[_T_co]):
    """A stream items are received from (what mcp's server reads requests from)."""

    async def receive(self) -> _T_co:
        """The next item."""
        ...

    async def aclose(self) -> None:
        """Close the stream."""
        ...

    def __aiter__(self) -> ReadStream[_T_co]: ...
    async def __anext__(self) -> _T_co: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


class WriteStream(Protocol[_T_contra]):
    """A stream items are sent to (what mcp's server writes answers to)."""

    async def send(self, item: _T_contra, /) -> None:
        """Send ``item``."""
        ...

    async def aclose(self) -> None:
        """Close the stream."""
        ...

    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...
