"""What :mod:`tdk.errors` delegates to the error pipeline, handed to it when this is loaded.

``tdk.errors`` imports no tdk module, so it cannot call this package by name: it calls the
object in its one slot instead (see its module docstring). The ``tdk`` package fills that
slot with a stand-in that imports this module on first use; importing it puts
:data:`PIPELINE` there in its place, so that every later call goes straight here.
"""

from __future__ import annotations

from tdk._failures.details import clean_details
from tdk._failures.info import error_info_from_exception, error_info_from_text
from tdk._failures.log_line import format_log_line
from tdk.errors import _pipeline

__all__ = ["PIPELINE"]


class _Pipeline:
    """The pipeline as ``tdk.errors`` calls it (:class:`tdk.errors._pipeline.Pipeline`)."""

    __slots__ = ()

    from_exception = staticmethod(error_info_from_exception)
    from_text = staticmethod(error_info_from_text)
    clean_details = staticmethod(clean_details)
    log_line = staticmethod(format_log_line)


PIPELINE = _Pipeline()
"""The one pipeline, in ``tdk.errors``' slot from the moment this module is loaded."""

_pipeline.connect(PIPELINE)
