"""Every error tdk raises on purpose, and the data a planner reads from them.

Each class fixes a :class:`ErrorKind` (who failed, when, and what); each kind has exactly one
:class:`ErrorCategory` (what a planner should do about it) and a default ``retryable``. Those
three are class attributes, readable without an instance: ``ToolTimeoutError.category``.

The tree::

    ToolError
    ├── ToolkitLoadError
    ├── ToolDefinitionError
    │   ├── ToolInputSchemaError
    │   └── ToolOutputSchemaError
    ├── ToolNotFoundError
    └── ToolRuntimeError
        ├── ToolInputError
        ├── ToolOutputError
        ├── RetryableToolError
        ├── ContextRequiredToolError
        ├── FatalToolError
        ├── ToolTimeoutError
        ├── ToolCancelledError
        ├── UpstreamError
        │   ├── UpstreamBadRequestError
        │   ├── UpstreamAuthError
        │   ├── UpstreamNotFoundError
        │   ├── UpstreamValidationError
        │   ├── UpstreamRateLimitError
        │   └── UpstreamServerError
        ├── NetworkTransportError
        ├── ToolRequirementError
        ├── ToolRateLimitedError
        ├── ToolCircuitOpenError
        ├── ToolBulkheadFullError
        ├── ToolInputRequiredError
        ├── ToolApprovalDeniedError
        └── ToolResumeInvalidError

Errors are plain data: :meth:`ToolError.to_dict` gives fixed keys, :meth:`ToolError.to_error_info`
the frozen :class:`ErrorInfo` that results carry, and every error pickles with all its fields.

This package imports no other tdk module, not even inside a function: every other module may
import it, and it stays the foot of the import graph. Its modules import only each other:

- ``_kinds``: :class:`ErrorKind`, :class:`ErrorCategory` and the table between them;
- ``_tool_error``: :class:`ToolError`, the fields every error carries and their checks;
- ``_loading``, ``_runtime``: its subclasses, by when they happen (making tools available;
  running one, the services it calls included);
- ``_error_info``: :class:`ErrorInfo`;
- ``_pipeline``: the slot through which it reaches the error pipeline.

Every class is shown as ``tdk.errors``' own (``__module__``), as in reprs, tracebacks and
pickles: the modules are how the package is written, not where a name lives.

What needs more than the error classes (:meth:`ErrorInfo.from_exception` and its mapping
table, :meth:`ErrorInfo.from_error_string`, :meth:`ErrorInfo.to_log_line`, the cleaning of
``details`` a tool put anything in) is done by the error pipeline, :mod:`tdk._failures`, which
imports this package. The two meet in one slot (``_pipeline``): the ``tdk`` package fills it the
moment this package is bound to it, however it is imported (``from tdk.errors import
ErrorInfo`` included), with a stand-in that loads the pipeline on first use, and the pipeline
puts itself there once loaded.
"""

from __future__ import annotations

from tdk.errors._error_info import ErrorInfo
from tdk.errors._kinds import ErrorCategory, ErrorKind
from tdk.errors._loading import (
    ToolDefinitionError,
    ToolInputSchemaError,
    ToolkitLoadError,
    ToolNotFoundError,
    ToolOutputSchemaError,
)
from tdk.errors._runtime import (
    ContextRequiredToolError,
    FatalToolError,
    NetworkTransportError,
    RetryableToolError,
    ToolApprovalDeniedError,
    ToolBulkheadFullError,
    ToolCancelledError,
    ToolCircuitOpenError,
    ToolInputError,
    ToolInputRequiredError,
    ToolOutputError,
    ToolRateLimitedError,
    ToolRequirementError,
    ToolResumeInvalidError,
    ToolRuntimeError,
    ToolTimeoutError,
    UpstreamAuthError,
    UpstreamBadRequestError,
    UpstreamError,
    UpstreamNotFoundError,
    UpstreamRateLimitError,
    UpstreamServerError,
    UpstreamValidationError,
)
from tdk.errors._runtime import NetworkKind as NetworkKind
from tdk.errors._tool_error import DEFAULT_MAX_RETRY_ATTEMPTS as DEFAULT_MAX_RETRY_ATTEMPTS
from tdk.errors._tool_error import MAX_DEVELOPER_MESSAGE_CHARS as MAX_DEVELOPER_MESSAGE_CHARS
from tdk.errors._tool_error import MAX_SAFE_INT as MAX_SAFE_INT
from tdk.errors._tool_error import ErrorOptions as ErrorOptions
from tdk.errors._tool_error import RuntimeErrorOptions as RuntimeErrorOptions
from tdk.errors._tool_error import ToolError

# The names imported ``as`` themselves above are importable from here but left out of
# ``__all__``: the bounds of an error's fields (which the pipeline and the HTTP hook apply too),
# and the types of the options of an error's ``__init__``, for a subclass to use.
__all__ = [
    "ContextRequiredToolError",
    "ErrorCategory",
    "ErrorInfo",
    "ErrorKind",
    "FatalToolError",
    "NetworkTransportError",
    "RetryableToolError",
    "ToolApprovalDeniedError",
    "ToolBulkheadFullError",
    "ToolCancelledError",
    "ToolCircuitOpenError",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolInputRequiredError",
    "ToolInputSchemaError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolOutputSchemaError",
    "ToolRateLimitedError",
    "ToolRequirementError",
    "ToolResumeInvalidError",
    "ToolRuntimeError",
    "ToolTimeoutError",
    "ToolkitLoadError",
    "UpstreamAuthError",
    "UpstreamBadRequestError",
    "UpstreamError",
    "UpstreamNotFoundError",
    "UpstreamRateLimitError",
    "UpstreamServerError",
    "UpstreamValidationError",
]

# Each class is shown where users import it from (reprs, tracebacks, pickles, docs).
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
