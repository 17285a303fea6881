"""Asks and approvals in process: ``context.ask()``, the pending result, ``runner.resume()``
with its sealed, single-use token, and every way a resume is refused (MISSION section 16)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _asks_tools import DONE, Booking, toolkit
from _http_server import Writes
from _redis_support import RedisServer, running_redis

import tdk
from tdk import ToolContext, ToolResult, ToolRunner
from tdk.errors import ErrorCategory, ErrorKind

KEY = "a state key of at least sixteen bytes"
USER = ToolContext(user_id="u-1")


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def runner(**options: Any) -> ToolRunner:
    return ToolRunner(toolkit(), state_key=KEY, **options)


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    DONE.clear()
    yield
    DONE.clear()


def pending(result: ToolResult) -> tuple[dict[str, Any], str]:
    assert result.kind is ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED
    assert result.category is ErrorCategory.CONTEXT_REQUIRED
    assert result.retryable is False
    assert result.pending is not None
    assert result.pending.token is not None
    return result.pending.requests, result.pending.token


# --- the re-run model -------------------------------------------------------------------


def test_a_confirmation_is_asked_then_the_call_runs_again_with_the_answer() -> None:
    """Without an answer the call ends pending and the body did nothing; resumed with it,
    the body runs from the start and gets the answer, under the call's idempotency key."""
    tools = runner()
    context = ToolContext(user_id="u-1", idempotency_key="call-7")
    first = run(tools.run("delete_branch", {"branch": "main"}, context=context))
    requests, token = pending(first)
    assert requests == {"sure": {"type": "confirm", "message": "Delete main?"}}
    assert DONE == []
    assert "Delete main?" in first.for_model()
    resumed = run(tools.resume(token, {"sure": True}, context=context))
    assert resumed.value == "deleted"
    assert DONE == ["deleted main with key call-7"]


def test_a_resumed_call_keeps_its_call_id() -> None:
    """A host matches the resumed result to the model's call by the id of the first run."""
    tools = runner()
    first = run(tools.run("delete_branch", {"branch": "x"}, context=USER, call_id="call_1"))
    _, token = pending(first)
    assert run(tools.resume(token, {"sure": True}, context=USER)).call_id == "call_1"


def test_a_resumed_call_keeps_the_key_the_context_made() -> None:
    """A context without a key of its own: the key of the first run is the resumed call's."""
    tools = runner()
    _, token = pending(run(tools.run("delete_branch", {"branch": "x"}, context=USER)))
    run(tools.resume(token, {"sure": True}, context=USER))
    first_key = DONE[0].rsplit(" ", 1)[1]
    _, again = pending(run(tools.run("delete_branch", {"branch": "x"}, context=USER)))
    run(tools.resume(again, {"sure": True}, context=USER))
    assert DONE[1].rsplit(" ", 1)[1] != first_key  # a new call, a new key


def test_answers_of_earlier_rounds_are_kept() -> None:
    """A body that asks two things gets the first answer again in the second round."""
    tools = runner()
    requests, token = pending(run(tools.run("book", {"day": "mon"}, context=USER)))
    assert requests["room"]["options"] == ["red", "blue"]
    requests, token = pending(run(tools.resume(token, {"room": "blue"}, context=USER)))
    assert requests["booking"]["type"] == "form"
    assert requests["booking"]["schema"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who books."},
            "seats": {"type": "integer"},
            "size": {"type": "string", "enum": ["small", "large"], "default": "small"},
            "floor": {"type": "string", "enum": ["1", "2"]},
        },
        "required": ["name", "seats"],
    }
    done = run(tools.resume(token, {"booking": {"name": "Ada", "seats": 3}}, context=USER))
    assert done.value == {"day": "mon", "room": "blue", "name": "Ada", "seats": 3}


def test_an_address_to_open_is_answered_once_done() -> None:
    """An ``OpenUrl`` is answered ``True`` (or None) once the user is back."""
    tools = runner()
    requests, token = pending(run(tools.run("sign_in", {}, context=USER)))
    assert requests["login"]["url"] == "https://github.com/login"
    assert run(tools.resume(token, {"login": None}, context=USER)).value == "signed in"


def test_a_call_no_runner_made_is_pending_without_a_token() -> None:
    """``tool.run()`` shows the requests; only a runner seals a token."""
    result = run(toolkit().run("delete_branch", {"branch": "x"}))
    assert result.pending is not None
    assert result.pending.token is None
    assert result.to_dict()["pending"]["requests"]["sure"]["type"] == "confirm"


# --- approvals ------------------------------------------------------------------------------


def test_an_approval_shows_the_tool_and_its_arguments_with_secrets_redacted() -> None:
    """``requires_approval=True``: a Confirm under ``approval`` before the body runs."""
    tools = runner()
    context = ToolContext(user_id="u-1", secrets={"PAY_KEY": "sk-live-0123456789abcdef"})
    arguments = {"amount": 5, "api_key": "sk-live-0123456789abcdef"}
    first = run(tools.run("pay", arguments, context=context))
    requests, token = pending(first)
    assert first.attempts == 0
    approval = requests["approval"]
    assert approval["tool"] == "pay"
    assert approval["arguments"]["amount"] == 5
    assert "sk-live-0123456789abcdef" not in json.dumps(first.to_dict())
    assert "sk-live-0123456789abcdef" not in first.pending.token
    assert DONE == []
    assert run(tools.resume(token, {"approval": True}, context=context)).value == "paid"
    assert DONE == ["paid 5"]


def test_a_declined_approval_is_its_own_kind() -> None:
    """``{"approval": False}``: TOOL_RUNTIME_APPROVAL_DENIED, category declined."""
    tools = runner()
    _, token = pending(run(tools.run("pay", {"amount": 5, "api_key": "k"}, context=USER)))
    declined = run(tools.resume(token, {"approval": False}, context=USER))
    assert declined.kind is ErrorKind.TOOL_RUNTIME_APPROVAL_DENIED
    assert declined.category is ErrorCategory.DECLINED
    assert declined.retryable is False
    assert DONE == []


@pytest.mark.parametrize(
    ("amount", "asked"), [(5, False), (500, True)], ids=["small-runs", "large-asks"]
)
def test_an_approval_rule_decides_per_call(amount: int, asked: bool) -> None:
    """``requires_approval=fn(arguments, context)``."""
    result = run(runner().run("tip", {"amount": amount}, context=USER))
    assert (result.pending is not None) is asked


@pytest.mark.parametrize(
    ("confirm", "asked"),
    [(None, False), (True, True), (False, False)],
    ids=["default-in-process", "always", "never"],
)
def test_declared_destructive_tools_need_approval_where_the_runner_says(
    confirm: bool | None, asked: bool
) -> None:
    """``confirm_destructive``: None asks when served (test_asks_mcp.py), True always,
    False never."""
    result = run(runner(confirm_destructive=confirm).run("drop_table", {"table": "t"}))
    assert (result.pending is not None) is asked


# --- refusals ------------------------------------------------------------------------------


def _tampered(token: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token[5:] + "=" * (-len(token[5:]) % 4)))
    raw[20] ^= 1
    return "tdk1." + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def _expired() -> tuple[ToolRunner, str]:
    tools = runner(ask_expiry=0.05)
    _, token = pending(run(tools.run("delete_branch", {"branch": "x"}, context=USER)))
    run(asyncio.sleep(0.2))
    return tools, token


def _replayed() -> tuple[ToolRunner, str]:
    tools = runner()
    _, token = pending(run(tools.run("delete_branch", {"branch": "x"}, context=USER)))
    assert run(tools.resume(token, {"sure": True}, context=USER)).is_success
    return tools, token


def _first(name: str = "delete_branch", arguments: Any = None) -> Callable[[], Any]:
    def make() -> tuple[ToolRunner, str]:
        tools = runner()
        _, token = pending(run(tools.run(name, arguments or {"branch": "x"}, context=USER)))
        return tools, token

    return make


def _other_key() -> tuple[ToolRunner, str]:
    _, token = _first()()
    return ToolRunner(toolkit(), state_key="another key, sixteen bytes or more"), token


def _changed(change: Callable[[str], str]) -> Callable[[], tuple[ToolRunner, str]]:
    def make() -> tuple[ToolRunner, str]:
        tools, token = _first()()
        return tools, change(token)

    return make


REFUSALS = [
    pytest.param(_changed(_tampered), USER, {"sure": True}, "tampered", id="tampered"),
    pytest.param(_changed(lambda t: t[:-7]), USER, {"sure": True}, "tampered", id="truncated"),
    pytest.param(_other_key, USER, {"sure": True}, "tampered", id="another-key"),
    pytest.param(lambda: (runner(), "not a token"), USER, {}, "tampered", id="garbage"),
    pytest.param(lambda: (runner(), "tdk1." + "A" * 70_000), USER, {}, "tampered", id="huge"),
    pytest.param(_expired, USER, {"sure": True}, "expired", id="expired"),
    pytest.param(_replayed, USER, {"sure": True}, "used", id="replayed"),
    pytest.param(
        _first(), ToolContext(user_id="u-2"), {"sure": True}, "other_user", id="another-user"
    ),
    pytest.param(_first(), None, {"sure": True}, "other_user", id="no-user"),
    pytest.param(_first(), USER, {"sure": "yes"}, "answer", id="wrong-type"),
    pytest.param(
        _first("book", {"day": "mon"}), USER, {"room": "green"}, "answer", id="option-not-offered"
    ),
    pytest.param(_first(), USER, {"sure": True, "extra": 1}, "answer", id="extra-key"),
    pytest.param(_first(), USER, ["sure"], "answer", id="not-a-mapping"),
]


@pytest.mark.parametrize(("make", "context", "answers", "reason"), REFUSALS)
def test_a_bad_resume_is_refused_before_anything_runs(
    make: Callable[[], tuple[ToolRunner, str]],
    context: ToolContext | None,
    answers: Any,
    reason: str,
) -> None:
    """TOOL_RUNTIME_RESUME_INVALID (validation), the reason in its details, nothing run."""
    tools, token = make()
    DONE.clear()
    refused = run(tools.resume(token, answers, context=context))
    assert refused.kind is ErrorKind.TOOL_RUNTIME_RESUME_INVALID
    assert refused.category is ErrorCategory.VALIDATION
    assert refused.error is not None
    assert refused.error.details["reason"] == reason
    assert refused.attempts == 0
    assert DONE == []


def test_a_refused_answer_leaves_the_token_usable() -> None:
    """Answers are checked before the token is consumed: the user can answer again."""
    tools = runner()
    _, token = pending(run(tools.run("delete_branch", {"branch": "x"}, context=USER)))
    refused = run(tools.resume(token, {"sure": "yes"}, context=USER))
    assert refused.error is not None
    assert refused.error.details == {"reason": "answer", "key": "sure"}
    assert "'sure'" in refused.error.message
    assert run(tools.resume(token, {"sure": False}, context=USER)).value == "kept"


@pytest.mark.parametrize(
    ("answer", "fits"),
    [
        ({"name": "Ada", "seats": 3, "size": "large", "floor": "2"}, True),
        ({"name": "Ada"}, False),
        ({"name": "Ada", "seats": "three"}, False),
        ({"name": "", "seats": 3}, False),
        ({"name": "Ada", "seats": 3, "size": "huge"}, False),
        ({"name": "Ada", "seats": 3, "admin": True}, False),
        ({"name": "Ada", "seats": True}, False),
    ],
    ids=["valid", "missing", "wrong-type", "constraint", "enum", "extra-field", "bool-as-int"],
)
def test_a_form_answer_must_validate(answer: dict[str, Any], fits: bool) -> None:
    """A form's answer is checked against the sealed schema, then the model; a misfit is
    refused naming the key and the body never sees it."""
    tools = runner()
    _, token = pending(run(tools.run("book", {"day": "mon"}, context=USER)))
    _, token = pending(run(tools.resume(token, {"room": "red"}, context=USER)))
    result = run(tools.resume(token, {"booking": answer}, context=USER))
    assert result.is_success is fits
    if not fits:
        assert result.kind is ErrorKind.TOOL_RUNTIME_RESUME_INVALID
        assert result.error is not None
        assert result.error.details["key"] == "booking"
        assert DONE == []


def test_a_body_that_asks_a_new_key_each_round_is_stopped() -> None:
    """Rounds are bounded: the call ends FATAL, saying so."""
    tools = runner()
    _, token = pending(run(tools.run("greedy", {}, context=USER)))
    rounds = 1
    while True:
        result = run(tools.resume(token, {f"q{rounds - 1}": True}, context=USER))
        if result.pending is None:
            break
        token = result.pending.token
        rounds += 1
        assert rounds < 50
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.error is not None
    assert "more than 8 times" in result.error.message
    assert rounds == 8  # eight pending rounds, then the ninth run is refused


def test_an_ask_after_a_write_was_answered_is_refused() -> None:
    """The write would be sent again on resume: FATAL, saying so, nothing pending."""
    upstream = Writes()
    upstream.release.set()  # (answers at once)
    with upstream.serve() as base:
        result = run(runner().run("write_then_ask", {"url": f"{base}/held"}, context=USER))
    assert upstream.writes == 1
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.pending is None
    assert result.error is not None
    assert "must ask before it acts" in result.error.message


@pytest.mark.parametrize(
    ("key", "request_"),
    [
        ("", "confirm"),
        ("a b", "confirm"),
        ("k", "not a request"),
    ],
    ids=["empty-key", "bad-key", "not-a-request"],
)
def test_ask_checks_its_arguments(key: str, request_: Any) -> None:
    """A wrong key or request is the tool's bug: FATAL, as any TypeError of a body."""
    request = tdk.Confirm("ok?") if request_ == "confirm" else request_

    @tdk.tool
    async def asking(context: ToolContext) -> bool:
        """Asks wrongly."""
        return await context.ask(key, request)

    result = run(asking.run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL


@pytest.mark.parametrize(
    "make",
    [
        lambda: tdk.Confirm(""),
        lambda: tdk.Choose("Pick", []),
        lambda: tdk.Choose("Pick", ["a", "a"]),
        lambda: tdk.Choose("Pick", "ab"),
        lambda: tdk.Form("Fill", dict),
        lambda: tdk.OpenUrl("Open", "javascript:alert(1)"),
        lambda: tdk.OpenUrl("Open", "https://user:pass@example.com/"),
    ],
    ids=[
        "blank",
        "no-options",
        "duplicate-option",
        "text-as-options",
        "not-a-model",
        "not-http",
        "credentials",
    ],
)
def test_requests_are_checked_when_made(make: Callable[[], Any]) -> None:
    """A malformed request raises where it is made."""
    with pytest.raises((TypeError, ValueError)):
        make()


def test_a_form_of_nested_fields_is_refused() -> None:
    """MCP forms are flat: a nested model is refused naming the field."""
    from pydantic import BaseModel

    class Nested(BaseModel):
        booking: Booking

    with pytest.raises(TypeError, match="booking"):
        tdk.Form("Fill", Nested)


# --- the store: single use, failing closed ----------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


def test_two_replicas_sharing_a_redis_store_consume_a_token_once(
    redis_server: RedisServer,
) -> None:
    """Two runners (replicas) with one key and one Redis: the same token resumed by both at
    once runs once; the other is told it was used."""
    from tdk.runner import RedisStore

    redis_server.start()
    redis_server.flush()

    async def scenario() -> list[ToolResult]:
        store = RedisStore(redis_server.url)
        first, second = (runner(store=store), runner(store=store))
        _, token = pending(await first.run("delete_branch", {"branch": "x"}, context=USER))
        return list(
            await asyncio.gather(
                first.resume(token, {"sure": True}, context=USER),
                second.resume(token, {"sure": True}, context=USER),
            )
        )

    results = run(scenario())
    assert sorted(r.is_success for r in results) == [False, True]
    [refused] = [r for r in results if not r.is_success]
    assert refused.error is not None
    assert refused.error.details["reason"] == "used"
    assert len(DONE) == 1


def test_the_store_down_refuses_the_resume(redis_server: RedisServer) -> None:
    """Redis unreachable: the resume is refused (retryable), never granted; the token still
    works once Redis is back."""
    from tdk.runner import RedisStore

    redis_server.start()
    redis_server.flush()

    async def scenario() -> tuple[ToolResult, ToolResult]:
        tools = runner(store=RedisStore(redis_server.url, timeout=1.0))
        _, token = pending(await tools.run("delete_branch", {"branch": "x"}, context=USER))
        redis_server.stop()
        refused = await tools.resume(token, {"sure": True}, context=USER)
        redis_server.start()
        return refused, await tools.resume(token, {"sure": True}, context=USER)

    refused, later = run(scenario())
    assert refused.kind is ErrorKind.TOOL_RUNTIME_RESUME_INVALID
    assert refused.error is not None
    assert refused.error.details["reason"] == "store_unavailable"
    assert refused.retryable is True
    assert later.value == "deleted"
    assert len(DONE) == 1


def test_asking_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """Without ``cryptography`` a pending call cannot be sealed: MISSING_REQUIREMENT naming
    the extra. ``import tdk`` never imports it."""
    script = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["cryptography"] = None  # as if it were not installed
        import tdk
        from _asks_tools import toolkit
        runner = tdk.ToolRunner(toolkit())
        result = asyncio.run(runner.run("delete_branch", {"branch": "x"}))
        print(result.kind.value)
        print(result.error.developer_message)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[1],
        check=True,
    )
    kind, message = done.stdout.splitlines()[:2]
    assert kind == "TOOL_RUNTIME_MISSING_REQUIREMENT"
    assert "tdk-tools[asks]" in message
