"""The one slot where :mod:`tdk.errors` meets the error pipeline (:mod:`tdk._failures`).

``tdk.errors`` imports no other tdk module, so it cannot call the pipeline by name: what needs
more than the error classes (:meth:`ErrorInfo.from_exception` and its mapping table,
:meth:`ErrorInfo.from_error_string`, :meth:`ErrorInfo.to_log_line`, the cleaning of the
``details`` a tool put anything in) calls :data:`current` instead. The ``tdk`` package puts a
stand-in there as it loads ``tdk.errors``, which loads the pipeline on first use; the pipeline
puts itself there once loaded (:mod:`tdk._failures.link`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

if TYPE_CHECKING:
    from tdk.errors._error_info import ErrorInfo

__all__ = ["Pipeline", "connect", "current"]


class Pipeline(Protocol):
    """What :mod:`tdk.errors` has the error pipeline (:mod:`tdk._failures`) do for it."""

    def from_exception(
        self,
        exc: BaseException,
        tool_name: str | None,
        *,
        include_stacktrace: bool,
        secrets: Iterable[str],
    ) -> ErrorInfo:
        """:meth:`ErrorInfo.from_exception`."""

    def from_text(self, text: str, tool_name: str | None) -> ErrorInfo:
        """:meth:`ErrorInfo.from_error_string`."""

    def clean_details(self, details: Mapping[Any, Any]) -> dict[str, Any]:
        """A JSON-safe copy of the ``details`` given to an error."""

    def log_line(self, info: ErrorInfo) -> str:
        """:meth:`ErrorInfo.to_log_line`."""


class _NotConnected:
    """The slot before the ``tdk`` package fills it, which it does as soon as ``tdk.errors``
    is bound to it: seen only by a module loaded outside the package (by file path), or by
    another thread in the instant between the end of ``tdk.errors``' first import and that."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(
            "tdk.errors is not connected to tdk's error pipeline: import it as tdk.errors, "
            "whose package connects it"
        )


#: The error pipeline (see the module docstring): set by :func:`connect` alone.
current: Pipeline = cast("Pipeline", _NotConnected())


def connect(pipeline: Pipeline) -> None:
    """Fill the slot: by the ``tdk`` package, with a stand-in that loads the pipeline on first
    use, then by the pipeline itself (:mod:`tdk._failures.link`)."""
    global current  # noqa: PLW0603 (the one slot of tdk.errors, filled from outside)
    current = pipeline
