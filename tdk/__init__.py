"""tdk: a tool-development kit for the functions that LLM agents call.

Public names are re-exported here, each loaded from its module (``tdk.errors`` for the error
tree) the first time it is used. The package also connects ``tdk.errors``, which imports no
other tdk module, to the error pipeline (:mod:`tdk._failures`) that it delegates to: see
:class:`_Package`.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

if TYPE_CHECKING:
    from tdk._define.definition import ToolAnnotations, ToolDefinition
    from tdk._define.problems import ProblemKind
    from tdk._define.tool import Tool, tool
    from tdk._define.toolkit import Toolkit
    from tdk._execution.call import ToolCall
    from tdk._execution.context import ToolContext
    from tdk._execution.default import DEFAULT, Default
    from tdk._execution.requests import Choose, Confirm, Form, OpenUrl
    from tdk._execution.result import ToolResult
    from tdk.errors import (
        ContextRequiredToolError,
        ErrorCategory,
        ErrorInfo,
        ErrorKind,
        FatalToolError,
        NetworkTransportError,
        RetryableToolError,
        ToolApprovalDeniedError,
        ToolBulkheadFullError,
        ToolCancelledError,
        ToolCircuitOpenError,
        ToolDefinitionError,
        ToolError,
        ToolInputError,
        ToolInputRequiredError,
        ToolInputSchemaError,
        ToolkitLoadError,
        ToolNotFoundError,
        ToolOutputError,
        ToolOutputSchemaError,
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
    from tdk.http import (
        araise_for_upstream,
        classify,
        install,
        parse_retry_after_ms,
        raise_for_upstream,
    )
    from tdk.runner import (
        Bulkhead,
        CircuitBreaker,
        InMemoryStore,
        RateLimit,
        RetryPolicy,
        StateStore,
        ToolRunner,
    )
    from tdk.runner._redis import RedisStore as RedisStore

#: Public name -> the module it lives in, imported on first use: ``import tdk.errors`` (or
#: ``tdk.http``) loads nothing else of tdk, and neither the runner nor the HTTP hook is loaded
#: to define or run a tool. Every other name of ``__all__`` is one of ``tdk.errors``.
_LAZY: dict[str, str] = {
    "ToolCall": "tdk._execution.call",
    "ToolContext": "tdk._execution.context",
    "Choose": "tdk._execution.requests",
    "Confirm": "tdk._execution.requests",
    "Form": "tdk._execution.requests",
    "OpenUrl": "tdk._execution.requests",
    "DEFAULT": "tdk._execution.default",
    "Default": "tdk._execution.default",
    "ProblemKind": "tdk._define.problems",
    "ToolDefinition": "tdk._define.definition",
    "ToolAnnotations": "tdk._define.definition",
    "ToolResult": "tdk._execution.result",
    "Tool": "tdk._define.tool",
    "tool": "tdk._define.tool",
    "Toolkit": "tdk._define.toolkit",
    **dict.fromkeys(
        (
            "Bulkhead",
            "CircuitBreaker",
            "InMemoryStore",
            "RateLimit",
            "RedisStore",
            "RetryPolicy",
            "StateStore",
            "ToolRunner",
        ),
        "tdk.runner",
    ),
    **dict.fromkeys(
        (
            "araise_for_upstream",
            "classify",
            "install",
            "parse_retry_after_ms",
            "raise_for_upstream",
        ),
        "tdk.http",
    ),
}


# ``RedisStore`` is importable from tdk (as from tdk.runner) but left out of ``__all__``: it
# needs the redis extra, and ``from tdk import *`` must work without it.


def __getattr__(name: str) -> object:
    module = _LAZY.get(name) or ("tdk.errors" if name in __all__ else None)
    if module is None:
        raise AttributeError(f"module 'tdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "RedisStore"})


class _PipelineOnFirstUse:
    """What ``tdk.errors`` holds as its error pipeline until it is first used: then loads
    :mod:`tdk._failures.link`, which puts the pipeline itself in its place."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        from tdk._failures.link import PIPELINE  # (loading it connects it to tdk.errors)

        return getattr(PIPELINE, name)


class _Package(types.ModuleType):
    """The type of this module. Python binds every submodule to its package once loaded, and
    ``tdk.errors`` gets its error pipeline at that moment, however it is imported: ``from
    tdk.errors import ErrorInfo`` never passes through ``__getattr__`` above. The pipeline is
    loaded on first use, not then: ``import tdk.errors`` loads no other tdk module."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "errors" and isinstance(value, types.ModuleType):
            value._pipeline.connect(_PipelineOnFirstUse())


sys.modules[__name__].__class__ = _Package


__all__ = [
    "DEFAULT",
    "Bulkhead",
    "Choose",
    "CircuitBreaker",
    "Confirm",
    "ContextRequiredToolError",
    "Default",
    "ErrorCategory",
    "ErrorInfo",
    "ErrorKind",
    "FatalToolError",
    "Form",
    "InMemoryStore",
    "NetworkTransportError",
    "OpenUrl",
    "ProblemKind",
    "RateLimit",
    "RetryPolicy",
    "RetryableToolError",
    "StateStore",
    "Tool",
    "ToolAnnotations",
    "ToolApprovalDeniedError",
    "ToolBulkheadFullError",
    "ToolCall",
    "ToolCancelledError",
    "ToolCircuitOpenError",
    "ToolContext",
    "ToolDefinition",
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
    "ToolResult",
    "ToolResumeInvalidError",
    "ToolRunner",
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
    "araise_for_upstream",
    "classify",
    "install",
    "parse_retry_after_ms",
    "raise_for_upstream",
    "tool",
]
