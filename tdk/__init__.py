"""tdk: a tool-development kit for the functions that LLM agents call.

Public names are re-exported here; each lives in one module (``tdk.errors`` for the error tree).
"""

from tdk._context import ToolContext
from tdk._definition import ToolDefinition
from tdk._result import ToolResult
from tdk._tool import Tool, tool
from tdk._toolkit import Toolkit
from tdk._version import __version__
from tdk.errors import (
    ContextRequiredToolError,
    ErrorCategory,
    ErrorInfo,
    ErrorKind,
    FatalToolError,
    NetworkTransportError,
    RetryableToolError,
    ToolBulkheadFullError,
    ToolCancelledError,
    ToolCircuitOpenError,
    ToolDefinitionError,
    ToolError,
    ToolInputError,
    ToolInputSchemaError,
    ToolkitLoadError,
    ToolNotFoundError,
    ToolOutputError,
    ToolOutputSchemaError,
    ToolRateLimitedError,
    ToolRequirementError,
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

__all__ = [
    "ContextRequiredToolError",
    "ErrorCategory",
    "ErrorInfo",
    "ErrorKind",
    "FatalToolError",
    "NetworkTransportError",
    "RetryableToolError",
    "Tool",
    "ToolBulkheadFullError",
    "ToolCancelledError",
    "ToolCircuitOpenError",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolInputSchemaError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolOutputSchemaError",
    "ToolRateLimitedError",
    "ToolRequirementError",
    "ToolResult",
    "ToolRuntimeError",
    "ToolTimeoutError",
    "Toolkit",
    "ToolkitLoadError",
    "UpstreamAuthError",
    "UpstreamBadRequestError",
    "UpstreamError",
    "UpstreamNotFoundError",
    "UpstreamRateLimitError",
    "UpstreamServerError",
    "UpstreamValidationError",
    "__version__",
    "tool",
]
