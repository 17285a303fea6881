"""Results and errors that tdk makes without validating them are what validation would make.

``tdk._failures.records.maker`` skips pydantic's validation for values tdk has checked
itself. Each case
below produces a ``ToolResult`` the way users meet one (a success, each kind of failure, a
runner's refusal, a direct ``ErrorInfo.from_exception``) and compares it, field by field and
type by type, with the instance pydantic validation makes from the same values.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Annotated, Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator

from tdk import RateLimit, ToolContext, Toolkit, ToolResult, ToolRunner, tool
from tdk._failures.records import maker
from tdk.errors import ErrorInfo, RetryableToolError, UpstreamRateLimitError

REQUEST = httpx.Request("GET", "https://api.example.com/v1/items?api_key=s3cr3t-value")


@tool
def echo(text: Annotated[str, "What to echo."]) -> str:
    """Echo the text."""
    return text


@tool
def fails(how: Annotated[str, "Which failure."]) -> str:
    """Fail as asked."""
    if how == "retry":
        raise RetryableToolError("busy", retry_after_ms=250, additional_prompt_content="wait")
    if how == "upstream":
        raise UpstreamRateLimitError("slow down", status_code=429, retry_after_ms=1000)
    if how == "httpx":
        raise httpx.ConnectError("refused", request=REQUEST)
    if how == "status":
        response = httpx.Response(503, request=REQUEST, headers={"Retry-After": "3"})
        response.raise_for_status()
    raise KeyError(how)


def _run(name: str, arguments: Any, **options: Any) -> ToolResult:
    return asyncio.run(Toolkit("records", [echo, fails]).run(name, arguments, **options))


def _refused() -> ToolResult:
    runner = ToolRunner(Toolkit("records", [echo]), rate_limit=RateLimit(calls=1, period=60))

    async def twice() -> ToolResult:
        await runner.run("echo", {"text": "a"})
        return await runner.run("echo", {"text": "b"})

    return asyncio.run(twice())


CASES = [
    pytest.param(lambda: _run("echo", {"text": "hi"}), id="success"),
    pytest.param(lambda: _run("echo", {"text": 5}), id="invalid-arguments"),
    pytest.param(lambda: _run("echo", '{"text": '), id="arguments-not-json"),
    pytest.param(lambda: _run("nope", {}), id="unknown-tool"),
    pytest.param(lambda: _run("fails", {"how": "key"}), id="foreign-exception"),
    pytest.param(
        lambda: _run("fails", {"how": "key"}, include_stacktrace=True), id="with-stacktrace"
    ),
    pytest.param(lambda: _run("fails", {"how": "retry"}), id="tdk-error"),
    pytest.param(lambda: _run("fails", {"how": "upstream"}), id="upstream-error"),
    pytest.param(lambda: _run("fails", {"how": "httpx"}), id="httpx-error"),
    pytest.param(lambda: _run("fails", {"how": "status"}), id="raise-for-status"),
    pytest.param(
        lambda: _run("fails", {"how": "key"}, context=ToolContext(secrets={"k": "s3cr3t-value"})),
        id="with-context-secrets",
    ),
    pytest.param(_refused, id="runner-refusal"),
]


def _same_as_validated(record: BaseModel) -> None:
    model = type(record)
    validated = model.model_validate(dict(record.__dict__))
    assert list(record.__dict__) == list(model.model_fields)  # every field, in order
    assert record == validated
    assert repr(record) == repr(validated)
    assert [type(v) for v in record.__dict__.values()] == [
        type(v) for v in validated.__dict__.values()
    ]
    assert record.model_dump(mode="json") == validated.model_dump(mode="json")
    assert record.model_fields_set == set(model.model_fields)
    assert pickle.loads(pickle.dumps(record)) == record


@pytest.mark.parametrize("produce", CASES)
def test_every_result_tdk_makes_is_what_validation_makes(produce: Any) -> None:
    result = produce()
    _same_as_validated(result)
    if result.error is not None:
        _same_as_validated(result.error)
        copied = result.model_copy(update={"attempts": 9})  # as the runner does
        assert copied.attempts == 9
        assert copied.model_fields_set == set(ToolResult.model_fields)


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(ValueError("plain"), id="foreign"),
        pytest.param(RetryableToolError("busy", details={"n": 1}), id="tdk-error"),
        pytest.param(httpx.ReadTimeout("slow", request=REQUEST), id="httpx-timeout"),
    ],
)
def test_error_info_from_exception_is_what_validation_makes(exc: Exception) -> None:
    _same_as_validated(ErrorInfo.from_exception(exc, "a_tool"))


def test_instances_do_not_share_their_fields_set() -> None:
    first, second = _run("echo", {"text": "a"}), _run("echo", {"text": "b"})
    assert first.model_fields_set is not second.model_fields_set


class _Validated(BaseModel):
    x: int

    @field_validator("x")
    @classmethod
    def _positive(cls, value: int) -> int:
        return abs(value)


class _Private(BaseModel):
    x: int
    _cache: int = PrivateAttr(default=0)


class _Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: int


@pytest.mark.parametrize("model", [_Validated, _Private, _Extra])
def test_maker_refuses_models_validation_would_change(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError, match=model.__name__):
        maker(model)
