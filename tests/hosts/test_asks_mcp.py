"""Asks over MCP, with the official SDK's client: ``InputRequiredResult`` on 2026-07-28
connections, inline elicitation on 2025 ones, and ``_meta["tdk/pending"]`` for clients
without elicitation; a resent call must be the token's; ``tdk serve`` asks the approval of
tools declared destructive (MISSION section 16)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import mcp
import pytest
from _asks_tools import DONE, toolkit
from _mcp_support import run, text_of
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tdk import ToolContext, ToolRunner
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

#: The era each mode of the client speaks.
ERAS = [pytest.param("2026-07-28", id="2026"), pytest.param("legacy", id="2025")]
USER = ToolContext(user_id="u-1")


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    DONE.clear()
    yield
    DONE.clear()


def served(confirm_destructive: bool | None = None) -> Any:
    kit = toolkit()
    tools = ToolRunner(kit, confirm_destructive=confirm_destructive)
    return tdk_mcp.server(kit, runner=tools, context=USER)


async def session(
    server: Any, mode: str, body: Callable[[mcp.Client], Awaitable[T]], **options: Any
) -> T:
    async with mcp.Client(server, mode=mode, **options) as client:  # type: ignore[arg-type]
        return await body(client)


class User:
    """An elicitation callback that answers as a user would, and records what it was shown."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.shown: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.shown.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        properties = params.requested_schema.get("properties", {})
        if "choice" in properties:
            return types.ElicitResult(action="accept", content={"choice": self.answers["choice"]})
        if properties:
            return types.ElicitResult(action="accept", content=self.answers["form"])
        return types.ElicitResult(action="accept" if self.answers.get("yes", True) else "decline")


@pytest.mark.parametrize("mode", ERAS)
def test_a_client_with_elicitation_is_asked_and_the_call_finishes(mode: str) -> None:
    """Both eras: the client's callback is asked (a choice, then a form) and the call ends
    with the tool's value; the body acted once."""
    user = User(choice="blue", form={"name": "Ada", "seats": 2})

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("book", {"day": "mon"})

    answered = run(session(served(), mode, body, elicitation_callback=user))
    assert answered.is_error is False
    assert answered.structured_content == {"day": "mon", "room": "blue", "name": "Ada", "seats": 2}
    assert [p.message for p in user.shown] == ["Which room?", "Who and how many?"]
    assert DONE == ["booked blue"]


@pytest.mark.parametrize("mode", ERAS)
def test_a_declined_confirmation_reaches_the_body_as_false(mode: str) -> None:
    """Declining a Confirm hands the body ``False``."""
    user = User(yes=False)

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("delete_branch", {"branch": "main"})

    answered = run(session(served(), mode, body, elicitation_callback=user))
    assert text_of(answered) == "kept"


@pytest.mark.parametrize("mode", ERAS)
def test_an_address_to_open_is_a_url_elicitation(mode: str) -> None:
    """An ``OpenUrl`` is sent as a URL elicitation."""
    user = User()

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("sign_in", {})

    answered = run(session(served(), mode, body, elicitation_callback=user))
    assert text_of(answered) == "signed in"
    [shown] = user.shown
    assert isinstance(shown, types.ElicitRequestURLParams)
    assert shown.url == "https://github.com/login"


def test_a_modern_client_gets_an_input_required_result_sealed() -> None:
    """On 2026-07-28 the answer is an ``InputRequiredResult``: one elicitation per key, and
    the sealed token as ``requestState`` (nothing of the call readable in it)."""

    async def body(client: mcp.Client) -> Any:
        return await client.session.call_tool(
            "pay", {"amount": 7, "api_key": "sk-live-0123456789abcdef"}, allow_input_required=True
        )

    answered = run(session(served(), "2026-07-28", body, elicitation_callback=User()))
    assert isinstance(answered, types.InputRequiredResult)
    assert answered.input_requests is not None
    [(key, asked)] = answered.input_requests.items()
    assert key == "approval"
    assert isinstance(asked, types.ElicitRequest)
    assert "'pay'" in asked.params.message
    assert "sk-live-0123456789abcdef" not in asked.params.message
    assert answered.request_state is not None
    assert answered.request_state.startswith("tdk1.")
    assert "pay" not in answered.request_state
    assert DONE == []


def _resent(name: str, arguments: dict[str, Any]) -> Callable[[mcp.Client], Awaitable[Any]]:
    """A modern client that takes the ``requestState`` of a call of ``delete_branch`` and
    sends it again with another call (or twice with the same one)."""

    async def body(client: mcp.Client) -> list[Any]:
        first = await client.session.call_tool(
            "delete_branch", {"branch": "x"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        yes = {"sure": types.ElicitResult(action="accept")}
        answers = []
        for _ in range(2):
            answers.append(
                await client.session.call_tool(
                    name,
                    arguments,
                    input_responses=yes,  # type: ignore[arg-type]
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            )
        return answers

    return body


@pytest.mark.parametrize(
    ("name", "arguments", "reasons"),
    [
        ("delete_branch", {"branch": "x"}, [None, "used"]),
        ("delete_branch", {"branch": "main"}, ["other_call", "other_call"]),
        ("sign_in", {}, ["other_tool", "other_tool"]),
    ],
    ids=["replayed", "other-arguments", "other-tool"],
)
def test_a_request_state_is_good_for_its_own_call_once(
    name: str, arguments: dict[str, Any], reasons: list[str | None]
) -> None:
    """A ``requestState`` resent with another tool or other arguments is refused, and the
    call's own is good once."""
    answers = run(
        session(served(), "2026-07-28", _resent(name, arguments), elicitation_callback=User())
    )
    got = [None if not answered.is_error else _reason(answered) for answered in answers]
    assert got == reasons
    assert len(DONE) == (1 if reasons[0] is None else 0)


def _reason(answered: types.CallToolResult) -> str:
    assert answered.meta is not None
    assert answered.meta["tdk/error"]["kind"] == "TOOL_RUNTIME_RESUME_INVALID"
    text = text_of(answered)
    for reason, words in {
        "used": "already used",
        "other_call": "other arguments",
        "other_tool": "another tool",
    }.items():
        if words in text:
            return reason
    return text


def test_a_tampered_request_state_is_refused() -> None:
    """A state changed by the client is refused; the body never runs."""

    async def body(client: mcp.Client) -> Any:
        first = await client.session.call_tool(
            "delete_branch", {"branch": "x"}, allow_input_required=True
        )
        state = first.request_state
        changed = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        return await client.session.call_tool(
            "delete_branch",
            {"branch": "x"},
            input_responses={"sure": types.ElicitResult(action="accept")},  # type: ignore[dict-item]
            request_state=changed,
            allow_input_required=True,
        )

    answered = run(session(served(), "2026-07-28", body, elicitation_callback=User()))
    assert answered.is_error is True
    assert answered.meta["tdk/error"]["kind"] == "TOOL_RUNTIME_RESUME_INVALID"
    assert DONE == []


@pytest.mark.parametrize("mode", ERAS)
def test_a_client_without_elicitation_is_told_what_to_ask(mode: str) -> None:
    """No elicitation: an ``isError`` result whose text tells the model what to ask, and
    ``_meta["tdk/pending"]`` for a host that renders it and resumes with ``tdk/resume``."""

    async def body(client: mcp.Client) -> tuple[types.CallToolResult, types.CallToolResult]:
        first = await client.call_tool("delete_branch", {"branch": "main"})
        assert first.meta is not None
        token = first.meta["tdk/pending"]["token"]
        resumed = await client.call_tool(
            "delete_branch",
            {"branch": "main"},
            meta={"tdk/resume": {"token": token, "answers": {"sure": True}}},
        )
        return first, resumed

    first, resumed = run(session(served(), mode, body))
    assert first.is_error is True
    assert "Delete main?" in text_of(first)
    assert first.meta is not None
    assert first.meta["tdk/error"]["kind"] == "TOOL_RUNTIME_INPUT_REQUIRED"
    assert first.meta["tdk/pending"]["requests"] == {
        "sure": {"type": "confirm", "message": "Delete main?"}
    }
    assert resumed.is_error is False
    assert text_of(resumed) == "deleted"


@pytest.mark.parametrize(
    ("confirm", "asked"),
    [(None, True), (False, False)],
    ids=["served-default", "runner-says-no"],
)
def test_a_served_destructive_tool_asks_approval_unless_the_runner_says_otherwise(
    confirm: bool | None, asked: bool
) -> None:
    """``destructive=True``, served: the approval is elicited first (the runner may say
    otherwise)."""
    user = User()

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("drop_table", {"table": "users"})

    answered = run(session(served(confirm), "2026-07-28", body, elicitation_callback=user))
    assert text_of(answered) == "dropped"
    assert bool(user.shown) is asked


@pytest.mark.parametrize("mode", ERAS)
def test_tdk_serve_asks_over_stdio(mode: str, tmp_path: Path) -> None:
    """A ``tdk serve`` subprocess: a destructive tool's approval and a tool's own question
    reach the official client's callback, in both eras."""
    tools = Path(__file__).parents[1] / "_asks_tools.py"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tdk", "serve", str(tools)],
        cwd=str(tmp_path),
    )
    user = User(yes=True)

    async def scenario() -> list[str]:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with mcp.Client(
                stdio_client(params, errlog=errlog), mode=mode, elicitation_callback=user
            ) as client:
                dropped = await client.call_tool("drop_table", {"table": "users"})
                deleted = await client.call_tool("delete_branch", {"branch": "main"})
                return [text_of(dropped), text_of(deleted)]

    assert run(scenario()) == ["dropped", "deleted"]
    assert len(user.shown) == 2
    assert "'drop_table'" in user.shown[0].message
