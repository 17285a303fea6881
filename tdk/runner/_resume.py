"""A runner's asks: the pending result sealed into a token, and a resume checked against it.

When a call ends pending (``context.ask()``, an approval), the runner seals what the call was
into ``result.pending.token`` (:mod:`tdk.runner._seal`). ``runner.resume(token, answers,
context=...)`` opens it and refuses, before anything runs, a token that is tampered with,
truncated, expired, already used, another user's, another tool's or another call's (a host
that sends the call again, as MCP does, has its tool and arguments compared), or answers
that do not fit what was asked; then consumes the token in the runner's store (once, across
replicas: a store that cannot answer refuses the resume) and runs the call again from the
start, with every answer so far and the call's own idempotency key.

A body that asks something new on every round is stopped after :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from hashlib import sha256
from typing import Any, Final

from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit
from tdk._execution.arguments import Arguments
from tdk._execution.asks import Pending, ask_state
from tdk._execution.call_scope import failed_instead
from tdk._execution.context import ToolContext
from tdk._execution.requests import UnfitAnswerError, check_answer
from tdk._execution.result import ToolResult
from tdk.errors import FatalToolError, ToolError, ToolRequirementError, ToolResumeInvalidError
from tdk.runner._seal import MAX_TOKEN_CHARS, Sealer, TokenUnreadableError
from tdk.runner._store import UpdateStore, consume_once

__all__ = ["DEFAULT_ASK_EXPIRY", "MAX_ROUNDS", "Asks", "Resumed"]

#: How long a token can be resumed, by default (seconds).
DEFAULT_ASK_EXPIRY: Final = 900.0
#: The most times one call may be resumed (a body asking a new key each round stops there).
MAX_ROUNDS: Final = 8
#: The most characters of answers one resume takes (as JSON).
MAX_ANSWERS_CHARS: Final = 32 * 1024
_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Resumed:
    """A resume that passed every check: the call to run again."""

    tool: str
    arguments: dict[str, Any]
    context: ToolContext
    call_id: str | None
    """The id of the call as first made (a host matches the result to the model's call)."""


class Asks:
    """The sealing and resuming of one runner's pending calls."""

    __slots__ = ("_expiry", "_hashes", "_sealer", "_store", "_toolkit")

    def __init__(
        self, toolkit: Toolkit, store: UpdateStore, state_key: str | bytes | None, expiry: float
    ) -> None:
        if isinstance(expiry, bool) or not isinstance(expiry, int | float):
            raise TypeError(f"ask_expiry must be a number of seconds, not {expiry!r}")
        if not math.isfinite(expiry) or expiry <= 0:
            raise ValueError(f"ask_expiry must be a finite number of seconds > 0, not {expiry!r}")
        self._sealer = Sealer(state_key)
        self._toolkit = toolkit
        self._store = store
        self._expiry = float(expiry)
        self._hashes: dict[str, str] = {}

    def sealed(
        self, result: ToolResult, tool: Tool[..., Any], arguments: Arguments, context: object
    ) -> ToolResult:
        """``result`` (pending) with its token; or the failure saying why the call cannot be
        resumed (asked too many rounds, arguments JSON cannot carry, no cryptography)."""
        pending = result.pending
        assert pending is not None
        state = ask_state(context)
        if state.rounds >= MAX_ROUNDS:
            return _cannot_resume(
                result,
                f"The tool asked the user more than {MAX_ROUNDS} times in one call.",
                f"the call was resumed {MAX_ROUNDS} times and asked again: a body must ask "
                "the same keys on every run, not a new one each round",
            )
        payload = {
            "v": _VERSION,
            "tool": tool.name,
            "def": self._definition_hash(tool),
            "args": _plain_arguments(arguments),
            "user": getattr(context, "user_id", None),
            "key": getattr(context, "idempotency_key", None) or None,
            "exp": time.time() + self._expiry,
            "id": secrets.token_urlsafe(16),
            "q": pending.requests,
            "ans": dict(state.answers),
            "r": state.rounds + 1,
            "cid": result.call_id,
        }
        try:
            token = self._sealer.seal(payload)
        except ToolRequirementError as missing:
            return failed_instead(result, missing.to_error_info()).model_copy(
                update={"pending": None}
            )
        except (TypeError, ValueError):
            return _cannot_resume(
                result,
                "The call cannot be resumed: its arguments cannot be sealed.",
                "the call's arguments or answers are not JSON data",
            )
        if len(token) > MAX_TOKEN_CHARS:
            return _cannot_resume(
                result,
                "The call cannot be resumed: its arguments are too large.",
                f"the sealed call is {len(token)} characters, more than {MAX_TOKEN_CHARS}",
            )
        return result.model_copy(
            update={"pending": Pending(requests=pending.requests, token=token)}
        )

    async def opened(
        self,
        token: object,
        answers: object,
        context: ToolContext | None,
        sent: tuple[str, Arguments] | None,
    ) -> Resumed | ToolError:
        """The call ``token`` seals, to run with ``answers``; or why the resume is refused.
        ``sent``: the tool and arguments of a call sent again (MCP), which must be the
        token's."""
        try:
            payload = self._sealer.open(token)
        except TokenUnreadableError as unreadable:
            return _refused("tampered", f"The resume token was refused: {unreadable}.")
        except ToolRequirementError as missing:
            return missing
        refusal = self._refusal(payload, context, sent)
        if refusal is None and callable(answers):  # (a host's, read as the token asked)
            answers = answers(payload["q"])
        if refusal is None:
            refusal = _unfit(payload["q"], answers)
        if refusal is not None:
            return refusal
        ttl = max(1.0, float(payload["exp"]) - time.time() + 1.0)
        try:
            first = await consume_once(self._store, f"tdk:ask:{payload['id']}", ttl)
        except Exception:  # the store cannot say whether it was used: never run it twice
            return _refused(
                "store_unavailable",
                "The answer cannot be checked right now; resume again in a moment.",
                retryable=True,
            )
        if not first:
            return _refused("used", "This answer was already used: the call ran with it.")
        assert isinstance(answers, Mapping)
        return Resumed(
            payload["tool"],
            payload["args"],
            _context_of(payload, answers, context),
            payload.get("cid"),
        )

    def _refusal(
        self, payload: dict[str, Any], context: ToolContext | None, sent: tuple[str, Any] | None
    ) -> ToolError | None:
        if payload.get("v") != _VERSION:
            return _refused("tampered", "The resume token was refused: it is of another kind.")
        if float(payload["exp"]) <= time.time():
            return _refused("expired", "The question has expired; call the tool again.")
        name = payload["tool"]
        tool = self._toolkit.get(name) if name in self._toolkit else None
        if tool is None or (sent is not None and sent[0].lower() != name.lower()):
            return _refused("other_tool", "The resume token belongs to another tool.")
        if self._definition_hash(tool) != payload["def"]:
            return _refused("changed", "The tool changed since the question; call it again.")
        if getattr(context, "user_id", None) != payload["user"]:
            return _refused("other_user", "The resume token belongs to another user.")
        if sent is not None and _canonical_arguments(sent[1]) != _canonical_arguments(
            payload["args"]
        ):
            return _refused("other_call", "The resume token belongs to a call of other arguments.")
        return None

    def _definition_hash(self, tool: Tool[..., Any]) -> str:
        known = self._hashes.get(tool.name)
        if known is None:
            text = tool.definition.model_dump_json(exclude={"toolkit"})
            known = self._hashes[tool.name] = sha256(text.encode()).hexdigest()[:32]
        return known


def _unfit(asked: Mapping[str, Any], answers: object) -> ToolError | None:
    """Why ``answers`` do not fit the requests ``asked``, or None."""
    if not isinstance(answers, Mapping):
        return _refused("answer", "The answers must be an object of key -> answer.")
    try:
        size = len(json.dumps(answers, default=str))
    except (TypeError, ValueError):
        size = MAX_ANSWERS_CHARS + 1
    if size > MAX_ANSWERS_CHARS:
        return _refused("answer", "The answers are too large.")
    for key, raw in answers.items():
        if not isinstance(key, str) or key not in asked:
            shown = str(key)[:64]
            return _refused("answer", f"'{shown}' was not asked.", key=shown)
        try:
            check_answer(asked[key], raw)
        except UnfitAnswerError as unfit:
            return _refused("answer", f"The answer for '{key}' was refused: {unfit}.", key=key)
    return None


def _context_of(
    payload: Mapping[str, Any], answers: Mapping[str, Any], context: ToolContext | None
) -> ToolContext:
    """The context of the call resumed: ``context`` with the call's own idempotency key and
    every answer so far."""
    base = context if context is not None else ToolContext()
    key = payload["key"]
    keyed = base._with_key(key) if key else base
    state = ask_state(context)
    merged = {**payload["ans"], **answers}
    return keyed._answered(replace(state, answers=merged, approve=False, rounds=payload["r"]))


def _refused(
    reason: str, message: str, *, key: str | None = None, retryable: bool | None = None
) -> ToolResumeInvalidError:
    return ToolResumeInvalidError(
        message,
        reason=reason,
        key=key,
        retryable=retryable,
        developer_message=f"runner.resume() refused the token: {reason}",
    )


def _cannot_resume(result: ToolResult, message: str, developer: str) -> ToolResult:
    info = FatalToolError(message, developer_message=developer, tool_name=result.tool)
    return failed_instead(result, info.to_error_info()).model_copy(update={"pending": None})


def _plain_arguments(arguments: Arguments) -> dict[str, Any]:
    """The arguments as JSON data (a JSON text parsed: the call validated them)."""
    if arguments is None:
        return {}
    if isinstance(arguments, str | bytes | bytearray):
        parsed = json.loads(arguments)
        return parsed if isinstance(parsed, dict) else {}
    plain = json.loads(json.dumps(dict(arguments)))  # (TypeError: not JSON data)
    return plain if isinstance(plain, dict) else {}


def _canonical_arguments(arguments: Any) -> str:
    """The arguments as one canonical JSON text (sorted keys), or "" for what is not JSON."""
    try:
        return json.dumps(_plain_arguments(arguments), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return ""
