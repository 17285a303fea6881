"""What a row of the mapping table gives: a foreign exception's tdk error, before it is made.

The rows of :mod:`tdk._failures.table` (and of :mod:`tdk._failures.httpx_rows`) are
:data:`Build` functions. Each returns a :class:`Mapped` (the class, the model-facing message
and the options of the error) or, for the classes that adjust their fields when made, the
error itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypedDict

from tdk.errors import ErrorKind, ToolError

__all__ = ["Build", "Mapped", "MappedOptions"]


class MappedOptions(TypedDict, total=False):
    """The options a row of the table gives its error class (texts already redacted)."""

    kind: ErrorKind
    developer_message: str
    details: dict[str, Any]


class Mapped(NamedTuple):
    """A foreign exception's tdk error before it is made: its class, its model-facing message
    and its options. :meth:`build` makes the exception (for a direct call, which raises it);
    :meth:`ErrorInfo.from_exception` reads the fields without making it (a failed call then
    builds no exception of its own, and no text is redacted twice). Rows whose class adjusts
    its fields when made (an ``UpstreamError`` picks its subclass and retryability) return the
    error itself instead.
    """

    cls: type[ToolError]
    message: str
    options: MappedOptions

    def build(self) -> ToolError:
        """The tdk error these fields describe."""
        # (Only NetworkTransportError rows give ``kind``, which that class accepts.)
        return self.cls(self.message, **self.options)  # type: ignore[misc]


#: A row of the table: the exception and the secrets to scrub -> its error, or what makes it.
Build = Callable[[BaseException, Iterable[str]], Mapped | ToolError]
