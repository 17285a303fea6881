"""``context.ask()``: a tool stops to ask the user, and runs again from the start with the
answer (the re-run model: a tool asks before it acts; ``docs/asks.md``).

A call's answers travel on its :class:`~tdk.ToolContext` (an :class:`AskState` a runner's
resume puts there). ``ask(key, request)`` hands back the answer under ``key`` when there is
one (checked against the request: one that does not fit is refused naming the key, never
handed to the body); without one, it ends the call with :class:`~tdk.errors.ToolInputRequiredError`,
whose result is pending (``result.pending``: the requests, and the token a runner seals).

An ask after a write of the same attempt was answered upstream is refused (FATAL): the re-run
would repeat the write. What the attempt's requests did is what tdk's HTTP hooks noted
(:mod:`tdk._execution.exchanges`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from tdk._execution.exchanges import CURRENT
from tdk._execution.requests import Choose, Confirm, Form, OpenUrl, Request, UnfitAnswerError
from tdk.errors import (
    FatalToolError,
    ToolApprovalDeniedError,
    ToolInputRequiredError,
    ToolResumeInvalidError,
)

__all__ = [
    "APPROVAL",
    "KEY_PATTERN",
    "NO_ASKS",
    "AskState",
    "Pending",
    "ask",
    "ask_state",
    "declined",
    "input_required",
]

#: What a key may be: it names an answer in a token, an MCP input request, a form.
KEY_PATTERN: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The key of an approval (``@tool(requires_approval=...)``).
APPROVAL: Final = "approval"


class Pending(BaseModel):
    """What a pending result (kind ``TOOL_RUNTIME_INPUT_REQUIRED``) waits for: the
    ``requests`` to show the user (key -> the request as JSON data: ``type``, ``message``
    and ``options``, ``schema`` or ``url``), and the ``token`` to resume the call with
    (``runner.resume(token, answers, context=...)``; None for a call no runner made).

    .. versionadded:: 0.1.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: dict[str, dict[str, Any]]
    """Key -> the request, as JSON data."""
    token: str | None = None
    """The sealed, single-use token of the call, made by the runner that ran it."""


@dataclass(frozen=True, slots=True)
class AskState:
    """A call's answers, and whether the runner requires its approval whatever the tool
    says (a destructive tool served by ``tdk serve``)."""

    answers: Mapping[str, Any] = field(default_factory=dict)
    """Key -> the answer, as given (checked against the sealed requests already)."""
    approve: bool = False
    """The call needs the user's approval before its body runs."""
    served: bool = False
    """The call came through a server (``tdk serve``, ``tdk.hosts.mcp``): a runner that
    does not say otherwise asks the approval of a tool declared ``destructive=True``."""
    rounds: int = 0
    """How many times the call was resumed already (a runner bounds it)."""


#: The state of a call nobody answered.
NO_ASKS: Final = AskState()


def ask_state(context: object) -> AskState:
    """The answers of the call ``context`` belongs to (none for a context without any)."""
    state = getattr(context, "_asks", None)
    return state if type(state) is AskState else NO_ASKS


def _check_ask(key: object, request: object) -> None:
    if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
        raise TypeError("ask()'s key must be 1-64 letters, digits, '_', '-' or '.'")
    if not isinstance(request, Confirm | Choose | Form | OpenUrl):
        raise TypeError(
            f"ask() takes a Confirm, Choose, Form or OpenUrl, not {type(request).__name__}"
        )


async def ask(context: object, key: str, request: Request) -> Any:
    """The answer under ``key`` to ``request`` (see the module docstring)."""
    _check_ask(key, request)
    exchanges = CURRENT.get()
    if exchanges is not None and exchanges.reached > 0:
        raise FatalToolError(
            "The tool asked the user after a write was sent upstream; it must ask before it acts.",
            developer_message=(
                f"context.ask({key!r}) came after a request of this attempt reached an "
                "upstream: a resumed call runs the body again from the start and would send "
                "it twice. Ask first, then write."
            ),
        )
    answers = ask_state(context).answers
    if key not in answers:
        raise input_required({key: request.to_dict()})
    raw = answers[key]
    if raw is False and not isinstance(request, Confirm):
        raise declined(key)
    try:
        return request.answer(raw)
    except UnfitAnswerError as unfit:
        raise unfit_answer(key, unfit) from None


def input_required(requests: Mapping[str, Mapping[str, Any]]) -> ToolInputRequiredError:
    """The error that makes a call's result pending on ``requests``."""
    shown = "; ".join(_question(request) for request in requests.values())
    return ToolInputRequiredError(
        "The tool needs the user's answer before it can go on.",
        requests=requests,
        additional_prompt_content=(
            f"Ask the user: {shown} The call resumes with the answer; do not call the tool "
            "again yourself."
        ),
    )


def _question(request: Mapping[str, Any]) -> str:
    message = str(request.get("message", ""))
    if request.get("type") == "choose":
        return f"{message} (one of: {', '.join(request.get('options', ()))})"
    if request.get("type") == "open_url":
        return f"{message} (open {request.get('url')})"
    if request.get("type") == "form":
        fields = ", ".join(request.get("schema", {}).get("properties", {}))
        return f"{message} (fields: {fields})"
    return message


def declined(key: str) -> ToolApprovalDeniedError:
    """The error of a call whose user declined the request under ``key``."""
    what = "to run this call" if key == APPROVAL else f"to answer '{key}'"
    return ToolApprovalDeniedError(
        f"The user declined {what}; nothing was done.",
        key=key,
        additional_prompt_content="Do not call the tool again unless the user asks for it.",
    )


def unfit_answer(key: str, unfit: UnfitAnswerError) -> ToolResumeInvalidError:
    """The error of an answer under ``key`` that does not fit its request."""
    return ToolResumeInvalidError(
        f"The answer for '{key}' was refused: {unfit}.",
        reason="answer",
        key=key,
    )
