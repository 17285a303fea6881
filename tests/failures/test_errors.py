"""The error taxonomy: kinds, categories, the class tree, fields and their serialised forms."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

import tdk.errors
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

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"

# MISSION section 2, transcribed independently of the code: kind -> (category, retryable).
MISSION_TABLE = {
    "TOOLKIT_LOAD_FAILED": ("configuration", False),
    "TOOL_DEFINITION_BAD_DEFINITION": ("configuration", False),
    "TOOL_DEFINITION_BAD_INPUT_SCHEMA": ("configuration", False),
    "TOOL_DEFINITION_BAD_OUTPUT_SCHEMA": ("configuration", False),
    "TOOL_NOT_FOUND": ("not_found", False),
    "TOOL_RUNTIME_BAD_INPUT_VALUE": ("validation", False),
    "TOOL_RUNTIME_BAD_OUTPUT_VALUE": ("execution", False),
    "TOOL_RUNTIME_RETRY": ("execution", True),
    "TOOL_RUNTIME_CONTEXT_REQUIRED": ("context_required", False),
    "TOOL_RUNTIME_FATAL": ("execution", False),
    "TOOL_RUNTIME_TIMEOUT": ("timeout", True),
    "TOOL_RUNTIME_CANCELLED": ("cancelled", False),
    "TOOL_RUNTIME_MISSING_REQUIREMENT": ("configuration", False),
    "TOOL_RUNTIME_RATE_LIMITED": ("rate_limit", True),
    "TOOL_RUNTIME_CIRCUIT_OPEN": ("circuit_open", True),
    "TOOL_RUNTIME_BULKHEAD_FULL": ("bulkhead_full", True),
    # MISSION section 16: asks and approvals.
    "TOOL_RUNTIME_INPUT_REQUIRED": ("context_required", False),
    "TOOL_RUNTIME_APPROVAL_DENIED": ("declined", False),
    "TOOL_RUNTIME_RESUME_INVALID": ("validation", False),
    "UPSTREAM_RUNTIME_BAD_REQUEST": ("validation", False),
    "UPSTREAM_RUNTIME_AUTH_ERROR": ("authentication", False),
    "UPSTREAM_RUNTIME_NOT_FOUND": ("not_found", False),
    "UPSTREAM_RUNTIME_VALIDATION_ERROR": ("validation", False),
    "UPSTREAM_RUNTIME_RATE_LIMIT": ("rate_limit", True),
    "UPSTREAM_RUNTIME_SERVER_ERROR": ("server_error", True),
    "UPSTREAM_RUNTIME_UNMAPPED": ("execution", False),
    "NETWORK_TRANSPORT_RUNTIME_TIMEOUT": ("timeout", True),
    "NETWORK_TRANSPORT_RUNTIME_UNREACHABLE": ("connection", True),
    "NETWORK_TRANSPORT_RUNTIME_UNMAPPED": ("connection", True),
    "UNKNOWN": ("execution", False),
}

CLASS_KINDS: list[tuple[type[ToolError], ErrorKind]] = [
    (ToolError, ErrorKind.UNKNOWN),
    (ToolkitLoadError, ErrorKind.TOOLKIT_LOAD_FAILED),
    (ToolDefinitionError, ErrorKind.TOOL_DEFINITION_BAD_DEFINITION),
    (ToolInputSchemaError, ErrorKind.TOOL_DEFINITION_BAD_INPUT_SCHEMA),
    (ToolOutputSchemaError, ErrorKind.TOOL_DEFINITION_BAD_OUTPUT_SCHEMA),
    (ToolNotFoundError, ErrorKind.TOOL_NOT_FOUND),
    (ToolRuntimeError, ErrorKind.UNKNOWN),
    (ToolInputError, ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE),
    (ToolOutputError, ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE),
    (RetryableToolError, ErrorKind.TOOL_RUNTIME_RETRY),
    (ContextRequiredToolError, ErrorKind.TOOL_RUNTIME_CONTEXT_REQUIRED),
    (FatalToolError, ErrorKind.TOOL_RUNTIME_FATAL),
    (ToolTimeoutError, ErrorKind.TOOL_RUNTIME_TIMEOUT),
    (ToolCancelledError, ErrorKind.TOOL_RUNTIME_CANCELLED),
    (UpstreamError, ErrorKind.UPSTREAM_RUNTIME_UNMAPPED),
    (UpstreamBadRequestError, ErrorKind.UPSTREAM_RUNTIME_BAD_REQUEST),
    (UpstreamAuthError, ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR),
    (UpstreamNotFoundError, ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND),
    (UpstreamValidationError, ErrorKind.UPSTREAM_RUNTIME_VALIDATION_ERROR),
    (UpstreamRateLimitError, ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT),
    (UpstreamServerError, ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR),
    (NetworkTransportError, ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED),
    (ToolRequirementError, ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT),
    (ToolRateLimitedError, ErrorKind.TOOL_RUNTIME_RATE_LIMITED),
    (ToolCircuitOpenError, ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN),
    (ToolBulkheadFullError, ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL),
    (ToolInputRequiredError, ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED),
    (ToolApprovalDeniedError, ErrorKind.TOOL_RUNTIME_APPROVAL_DENIED),
    (ToolResumeInvalidError, ErrorKind.TOOL_RUNTIME_RESUME_INVALID),
]
ALL_CLASSES = [cls for cls, _ in CLASS_KINDS]
CLASS_IDS = [cls.__name__ for cls in ALL_CLASSES]


def _subclass_tree(cls: type, depth: int = 0) -> list[str]:
    """The tree of ``tdk.errors`` classes (subclasses tests define are not part of it)."""
    lines = [f"{depth}:{cls.__name__}"]
    for sub in cls.__subclasses__():
        if sub.__module__ == "tdk.errors":
            lines += _subclass_tree(sub, depth + 1)
    return lines


def _drawn_tree(text: str) -> list[str]:
    """Parse a box-drawing tree into ``depth:Name`` lines (each level is 4 columns)."""
    lines = []
    root_indent = None
    for line in text.splitlines():
        match = re.match(r"^(?P<prefix>[ │├└─]*)(?P<name>[A-Za-z]+Error)$", line)
        if match:
            if root_indent is None:
                root_indent = len(match["prefix"])
            lines.append(f"{(len(match['prefix']) - root_indent) // 4}:{match['name']}")
    return lines


def _docs_kind_table() -> dict[str, tuple[str, bool]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in ErrorKind.__members__:
            rows[cells[0]] = (cells[1], {"yes": True, "no": False}[cells[2]])
    return rows


def test_kind_values_equal_names() -> None:
    """Every kind's value is its name, so it serialises as the name."""
    assert all(kind.value == kind.name for kind in ErrorKind)


def test_kinds_categories_and_retryability_match_the_mission_table() -> None:
    """The code's kind table is exactly MISSION section 2's."""
    code = {kind.value: (kind.category.value, kind.default_retryable) for kind in ErrorKind}
    assert code == MISSION_TABLE


def test_docs_table_matches_the_code() -> None:
    """docs/errors.md's kind table and the code cannot drift apart."""
    code = {kind.value: (kind.category.value, kind.default_retryable) for kind in ErrorKind}
    assert _docs_kind_table() == code


def test_categories_are_the_mission_set_and_all_used() -> None:
    """The categories are the documented set, each used by at least one kind."""
    expected = {category for category, _ in MISSION_TABLE.values()}
    assert {category.value for category in ErrorCategory} == expected
    assert {kind.category for kind in ErrorKind} == set(ErrorCategory)


def test_docs_planner_table_covers_every_category() -> None:
    """docs/errors.md says what a planner should do for every category."""
    text = DOCS.read_text()
    section = text.split("## What a planner should do, by category", 1)[1].split("##", 1)[0]
    documented = {
        cells[0]
        for line in section.splitlines()
        if (cells := [c.strip() for c in line.strip().strip("|").split("|")])
        and cells[0] in {c.value for c in ErrorCategory}
    }
    assert documented == {category.value for category in ErrorCategory}


@pytest.mark.parametrize(
    "source",
    [tdk.errors.__doc__ or "", DOCS.read_text()],
    ids=["module-docstring", "docs-errors-md"],
)
def test_drawn_tree_is_the_real_tree(source: str) -> None:
    """The tree drawn in the docstring and in the docs is the real subclass tree."""
    assert _drawn_tree(source) == _subclass_tree(ToolError)


@pytest.mark.parametrize(("cls", "kind"), CLASS_KINDS, ids=CLASS_IDS)
def test_class_attributes_come_from_the_kind(cls: type[ToolError], kind: ErrorKind) -> None:
    """kind, category and default retryable are readable on the class itself."""
    assert cls.kind is kind
    assert cls.category is kind.category
    assert cls.retryable is kind.default_retryable


def test_every_error_class_is_tabled() -> None:
    """The test table covers every class tdk.errors defines."""
    defined = {
        obj
        for obj in vars(tdk.errors).values()
        if isinstance(obj, type) and issubclass(obj, ToolError)
    }
    assert defined == set(ALL_CLASSES)


def _full_instance(cls: type[ToolError]) -> ToolError:
    """An instance of ``cls`` with every field set to a non-default value."""
    common: dict[str, Any] = {
        "developer_message": "dev detail",
        "retry_after_ms": 1500,
        "status_code": 503 if issubclass(cls, UpstreamError) else None,
        "details": {"extra": [1, "two"], "nested": {"ok": True}},
        "additional_prompt_content": "try again with q=python",
        "tool_name": "search",
        "max_retry_attempts": 5,
    }
    if issubclass(cls, ToolRuntimeError):
        common["retryable"] = not cls.retryable
    specific: dict[type[ToolError], dict[str, Any]] = {
        ToolkitLoadError: {"toolkit": "reddit", "module": "reddit.tools"},
        ToolDefinitionError: {"problems": [{"parameter": "q", "problem": "untyped"}]},
        ToolNotFoundError: {"available_tools": ["search"], "suggestions": ["search"]},
        ToolInputError: {"errors": [{"field": "q", "problem": "missing"}]},
        ToolTimeoutError: {"timeout": 2.5},
        ToolRequirementError: {"missing_secrets": ["API_KEY"], "missing_metadata": ["org"]},
        ToolRateLimitedError: {"limit": 10, "period": 1.0},
        ToolCircuitOpenError: {"failure_count": 5, "reset_timeout": 30.0},
        ToolBulkheadFullError: {"max_concurrent": 4, "max_wait": 0.5},
        ToolInputRequiredError: {"requests": {"approval": {"type": "confirm", "message": "?"}}},
        ToolApprovalDeniedError: {"key": "approval"},
        ToolResumeInvalidError: {"reason": "expired", "key": "room"},
        NetworkTransportError: {"kind": ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT},
    }
    options = next((v for k, v in specific.items() if issubclass(cls, k)), {})
    return cls("model-safe text", **common, **options)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=CLASS_IDS)
def test_pickle_round_trips_every_field(cls: type[ToolError]) -> None:
    """Pickling keeps the class and every field."""
    error = _full_instance(cls)
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert clone.to_dict() == error.to_dict()
    assert clone.kind is error.kind
    assert clone.args == error.args
    assert str(clone) == str(error)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=CLASS_IDS)
def test_repr_is_constructor_syntax(cls: type[ToolError]) -> None:
    """repr() evaluates back to an equal error."""
    error = _full_instance(cls)
    namespace = {**vars(tdk.errors), "ErrorKind": ErrorKind}
    clone = eval(repr(error), namespace)
    assert type(clone) is type(error)
    assert clone.to_dict() == error.to_dict()


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=CLASS_IDS)
def test_to_dict_has_fixed_keys_and_round_trips_json(cls: type[ToolError]) -> None:
    """to_dict() has the fixed keys, plain strings for enums, and survives JSON."""
    error = _full_instance(cls)
    data = error.to_dict()
    assert list(data) == [
        "error",
        "kind",
        "category",
        "message",
        "developer_message",
        "retryable",
        "retry_after_ms",
        "status_code",
        "additional_prompt_content",
        "tool_name",
        "max_retry_attempts",
        "details",
    ]
    assert type(data["kind"]) is str
    assert type(data["category"]) is str
    assert data["error"] == type(error).__name__
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=CLASS_IDS)
def test_to_error_info_matches_to_dict(cls: type[ToolError]) -> None:
    """to_error_info() carries the same data, and ErrorInfo validates it."""
    error = _full_instance(cls)
    info = error.to_error_info()
    data = info.to_dict()
    assert {k: v for k, v in data.items() if k not in ("cause", "stacktrace")} == error.to_dict()
    assert ErrorInfo.model_validate(data) == info
    assert info.kind is error.kind


def test_details_are_nested_never_spread() -> None:
    """A details key named like a core key cannot overwrite the core key."""
    error = FatalToolError("safe", details={"message": "other", "kind": "X"})
    data = error.to_dict()
    assert data["message"] == "safe"
    assert data["kind"] == "TOOL_RUNTIME_FATAL"
    assert data["details"] == {"message": "other", "kind": "X"}


def test_details_are_made_json_safe() -> None:
    """Sets, tuples, enums, non-finite floats and unknown objects become JSON values."""
    error = FatalToolError(
        "x",
        details={"s": {3}, "t": (1, 2), "e": ErrorKind.UNKNOWN, "f": float("nan"), "o": object()},
    )
    assert type(error.details["e"]) is str
    assert error.details == {"s": [3], "t": [1, 2], "e": "UNKNOWN", "f": "nan", "o": "<object>"}
    json.dumps(error.to_dict(), allow_nan=False)


def test_deeply_nested_details_are_cut() -> None:
    """Details nested without end are cut rather than recursing forever."""
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(50):
        cursor["next"] = {}
        cursor = cursor["next"]
    cursor["cycle"] = deep
    json.dumps(FatalToolError("x", details=deep).to_dict())


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(
            RetryableToolError("Retry with subreddit=python", tool_name="get_posts"),
            "[TOOL_RUNTIME_RETRY] RetryableToolError during execution of tool 'get_posts': "
            "Retry with subreddit=python",
            id="runtime-with-tool",
        ),
        pytest.param(
            ToolInputSchemaError("parameter 'q' has no type annotation", tool_name="search"),
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': parameter 'q' has no type annotation",
            id="definition-with-tool",
        ),
        pytest.param(
            ToolkitLoadError("No module named 'praw'", toolkit="reddit"),
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit 'reddit': "
            "No module named 'praw'",
            id="toolkit-load",
        ),
        pytest.param(
            ToolNotFoundError("No tool named 'serch'.", tool_name="serch"),
            "[TOOL_NOT_FOUND] ToolNotFoundError when looking up tool 'serch': "
            "No tool named 'serch'.",
            id="not-found",
        ),
        pytest.param(
            UpstreamError("Too many requests.", status_code=429),
            "[UPSTREAM_RUNTIME_RATE_LIMIT] UpstreamRateLimitError: Too many requests.",
            id="without-tool",
        ),
        pytest.param(
            ToolkitLoadError("broken"),
            "[TOOLKIT_LOAD_FAILED] ToolkitLoadError: broken",
            id="toolkit-without-name",
        ),
    ],
)
def test_str_formats(error: ToolError, expected: str) -> None:
    """str() follows the documented one-line formats."""
    assert str(error) == expected


def test_formatting_never_mutates_the_message() -> None:
    """str() twice, and after gaining a tool name, leaves message untouched (no double prefix)."""
    error = FatalToolError("It broke.")
    str(error)
    error.tool_name = "search"
    assert str(error) == str(error)
    assert str(error).count("FatalToolError") == 1
    assert error.message == "It broke."
    assert error.args == ("It broke.",)


def test_log_line_is_one_line_with_cause() -> None:
    """The operators' form names kind, tool, category, retryability and the cause type."""
    try:
        try:
            raise KeyError("x")
        except KeyError as exc:
            raise FatalToolError("An unhandled KeyError.\nsecond line", tool_name="t") from exc
    except FatalToolError as error:
        line = error.to_log_line()
    assert "\n" not in line
    assert line.startswith(
        "kind=TOOL_RUNTIME_FATAL tool=t category=execution retryable=false status=- "
        "retry_after_ms=- cause=KeyError message="
    )
    assert line.endswith('message="An unhandled KeyError.\\nsecond line"')


#: Characters JSON leaves raw that would break a log line in two or hide or reorder its text
#: in a viewer; each must appear escaped in the message field.
HIDDEN_IN_LOGS = [
    pytest.param("\x85", id="next-line-C1"),
    pytest.param("\u2028", id="line-separator"),
    pytest.param("\u2029", id="paragraph-separator"),
    pytest.param("\u202e", id="right-to-left-override"),
    pytest.param("\u2066", id="left-to-right-isolate"),
    pytest.param("\u200b", id="zero-width-space"),
    pytest.param("\u061c", id="arabic-letter-mark"),
    pytest.param("\ufeff", id="byte-order-mark"),
    pytest.param("\x7f", id="delete"),
    pytest.param("\xad", id="soft-hyphen"),
    pytest.param("\U000e0041", id="tag-character"),
    pytest.param("\u0600", id="arabic-number-sign"),
    pytest.param("\U0001d173", id="musical-begin-beam"),
]


@pytest.mark.parametrize("hidden", HIDDEN_IN_LOGS)
def test_log_line_escapes_what_would_split_or_hide_it(hidden: str) -> None:
    """A message carrying a line separator or an invisible reordering character (text a
    model or an upstream sent) stays one line with the character escaped, and the message
    field is still the JSON string of the message."""
    message = f"No tool named 'a{hidden}b'.\n[forged] kind=OK"
    line = FatalToolError(message).to_log_line()
    assert hidden not in line
    assert len(line.splitlines()) == 1
    assert json.loads(line.partition(" message=")[2]) == message


def test_log_line_keeps_readable_text_as_it_is() -> None:
    """Accented letters and other scripts stay readable (only the hidden ones are escaped)."""
    line = FatalToolError("Résumé für 東京 ✓").to_log_line()
    assert line.endswith('message="Résumé für 東京 ✓"')


def test_log_line_with_status_and_wait() -> None:
    """Status and wait appear when known."""
    line = UpstreamError("Slow down.", status_code=429, retry_after_ms=2000).to_log_line()
    assert "status=429 retry_after_ms=2000 " in line
    assert "tool=- " in line


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        pytest.param(400, UpstreamBadRequestError, False, id="400"),
        pytest.param(401, UpstreamAuthError, False, id="401"),
        pytest.param(403, UpstreamAuthError, False, id="403"),
        pytest.param(404, UpstreamNotFoundError, False, id="404"),
        pytest.param(408, UpstreamBadRequestError, True, id="408-retryable"),
        pytest.param(409, UpstreamBadRequestError, False, id="409"),
        pytest.param(410, UpstreamNotFoundError, False, id="410"),
        pytest.param(418, UpstreamBadRequestError, False, id="418"),
        pytest.param(422, UpstreamValidationError, False, id="422"),
        pytest.param(425, UpstreamBadRequestError, True, id="425-retryable"),
        pytest.param(429, UpstreamRateLimitError, True, id="429"),
        pytest.param(500, UpstreamServerError, True, id="500"),
        pytest.param(503, UpstreamServerError, True, id="503"),
        pytest.param(529, UpstreamServerError, True, id="529"),
        pytest.param(599, UpstreamServerError, True, id="599"),
        pytest.param(200, UpstreamError, False, id="200-unmapped"),
        pytest.param(302, UpstreamError, False, id="302-unmapped"),
        pytest.param(999, UpstreamError, False, id="999-unmapped"),
        pytest.param(None, UpstreamError, False, id="no-status"),
    ],
)
def test_upstream_error_picks_its_class_from_the_status(
    status: int | None, cls: type[UpstreamError], retryable: bool
) -> None:
    """UpstreamError constructed directly becomes the class its status maps to."""
    error = UpstreamError("upstream said no", status_code=status)
    assert type(error) is cls
    assert error.kind is cls.kind
    assert error.status_code == status
    assert error.retryable is retryable
    assert UpstreamError.class_for_status(status) is cls


def test_upstream_subclass_keeps_its_kind_whatever_the_status() -> None:
    """A 403 that is really a rate limit keeps its real status code."""
    error = UpstreamRateLimitError("secondary rate limit", status_code=403, retry_after_ms=60_000)
    assert error.kind is ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT
    assert error.status_code == 403
    assert error.retryable


def test_retryable_override_per_instance() -> None:
    """An explicit verdict overrides the default and the retry budget follows it."""
    billing = UpstreamRateLimitError("quota exhausted", status_code=429, retryable=False)
    assert billing.retryable is False
    assert billing.max_retry_attempts == 0
    assert UpstreamRateLimitError.retryable is True
    forced = UpstreamBadRequestError("try again", status_code=400, retryable=True)
    assert forced.max_retry_attempts == 3


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(RetryableToolError("x"), 3, id="retryable-default"),
        pytest.param(FatalToolError("x"), 0, id="fatal-default"),
        pytest.param(RetryableToolError("x", max_retry_attempts=1), 1, id="explicit"),
        pytest.param(ToolTimeoutError("x", max_retry_attempts=0), 0, id="explicit-zero"),
    ],
)
def test_max_retry_attempts(error: ToolError, expected: int) -> None:
    """Default budget is 3 retries for retryable errors, 0 otherwise, unless given."""
    assert error.max_retry_attempts == expected


def test_negative_max_retry_attempts_is_refused() -> None:
    """A negative retry budget is a programming error."""
    with pytest.raises(ValueError, match="max_retry_attempts"):
        RetryableToolError("x", max_retry_attempts=-1)


def test_retry_after_is_none_unless_given() -> None:
    """No error invents a wait."""
    assert all(cls("x").retry_after_ms is None for cls in ALL_CLASSES)


@pytest.mark.parametrize(
    "kind",
    [
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
    ],
    ids=lambda kind: kind.value,
)
def test_network_transport_kinds(kind: ErrorKind) -> None:
    """NetworkTransportError takes one of its three kinds; the category follows."""
    error = NetworkTransportError("no answer", kind=kind)  # type: ignore[arg-type]
    assert error.kind is kind
    assert error.category is kind.category
    assert error.retryable


def test_network_transport_refuses_other_kinds() -> None:
    """A kind from another family is a programming error."""
    with pytest.raises(ValueError, match="not a network transport kind"):
        NetworkTransportError("x", kind=ErrorKind.TOOL_RUNTIME_FATAL)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "key", "value"),
    [
        pytest.param(ToolkitLoadError("x", module="m"), "module", "m", id="load-module"),
        pytest.param(
            ToolDefinitionError("x", problems=[{"parameter": "q"}]),
            "problems",
            [{"parameter": "q"}],
            id="definition-problems",
        ),
        pytest.param(
            ToolNotFoundError("x", available_tools=("a", "b")),
            "available_tools",
            ["a", "b"],
            id="not-found-available",
        ),
        pytest.param(
            ToolInputError("x", errors=[{"field": "q"}]), "errors", [{"field": "q"}], id="input"
        ),
        pytest.param(ToolTimeoutError("x", timeout=1.5), "timeout", 1.5, id="timeout"),
        pytest.param(
            ToolRequirementError("x", missing_secrets=["K"]),
            "missing_secrets",
            ["K"],
            id="requirement",
        ),
        pytest.param(ToolRateLimitedError("x", limit=10), "limit", 10, id="rate-limited"),
        pytest.param(
            ToolCircuitOpenError("x", failure_count=5), "failure_count", 5, id="circuit-open"
        ),
        pytest.param(
            ToolBulkheadFullError("x", max_concurrent=2), "max_concurrent", 2, id="bulkhead"
        ),
    ],
)
def test_class_specific_keywords_land_in_details(error: ToolError, key: str, value: Any) -> None:
    """Class-specific keywords are stored under their fixed details key."""
    assert error.details[key] == value


def test_constructor_options_are_keyword_only() -> None:
    """Only the message is positional."""
    with pytest.raises(TypeError):
        FatalToolError("x", "dev")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "error_type"),
    [
        pytest.param({"retry_after_ms": "soon"}, TypeError, id="retry-after-text"),
        pytest.param({"retry_after_ms": 1.5}, TypeError, id="retry-after-float"),
        pytest.param({"retry_after_ms": True}, TypeError, id="retry-after-bool"),
        pytest.param({"retry_after_ms": -1}, ValueError, id="retry-after-negative"),
        pytest.param({"status_code": "429"}, TypeError, id="status-text"),
        pytest.param({"tool_name": 7}, TypeError, id="tool-name-int"),
        pytest.param({"developer_message": b"x"}, TypeError, id="developer-bytes"),
        pytest.param({"additional_prompt_content": ["x"]}, TypeError, id="prompt-list"),
        pytest.param({"max_retry_attempts": "3"}, TypeError, id="budget-text"),
        pytest.param({"retryable": "yes"}, TypeError, id="retryable-text"),
    ],
)
def test_malformed_options_are_refused_at_construction(
    options: dict[str, Any], error_type: type[Exception]
) -> None:
    """A field of the wrong type is a bug found where the error is made."""
    with pytest.raises(error_type, match=next(iter(options))):
        RetryableToolError("x", **options)


def test_message_must_be_text() -> None:
    """The message is text."""
    with pytest.raises(TypeError, match="message must be a str"):
        FatalToolError(404)  # type: ignore[arg-type]


def test_fields_broken_after_construction_still_give_a_valid_info() -> None:
    """An error whose fields were reassigned to wrong types becomes a readable fatal info."""
    error = RetryableToolError("x", tool_name="t")
    error.retry_after_ms = "soon"  # type: ignore[assignment]
    info = ErrorInfo.from_exception(error)
    assert info.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert info.message == "The tool raised a RetryableToolError that tdk could not read."
    assert info.developer_message == (
        "Fields missing or of the wrong type: retry_after_ms. An error's __init__ must call "
        "ToolError.__init__, and its fields keep their types."
    )
