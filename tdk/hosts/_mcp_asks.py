"""Asks over MCP: what a client is sent when a call stops to ask the user, in each era.

- 2026-07-28 clients that declared elicitation: an ``InputRequiredResult`` whose input
  requests are form or URL elicitations (one per key), with the sealed token as its
  ``requestState``. The client sends the whole call again with ``inputResponses`` and the
  state: the runner resumes it (:meth:`~tdk.ToolRunner.resume`), checking that the call sent
  again is the token's (tool and arguments), so a state replayed, tampered with or moved to
  another call is refused.
- 2025 clients that declared elicitation: the SDK's ``elicitation/create`` requests, inline,
  one per key, then the call resumed at once (rounds bounded by the runner).
- Clients without elicitation: the pending result as an ``isError`` result whose text tells
  the model what to ask the user, and ``_meta["tdk/pending"]`` (the requests and the token)
  for hosts that render them; such a host sends the call again with
  ``_meta["tdk/resume"] = {"token": ..., "answers": {...}}``.

How a request is shown: a ``Confirm`` is a form without fields (accept: yes; decline: no); a
``Choose`` a form of one field, ``choice``, whose values are the options; a ``Form`` its own
flat schema; an ``OpenUrl`` a URL elicitation (accept: done). Declining or cancelling any
of them answers ``False``.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp_types.version import is_version_at_least

from tdk._execution.asks import AskState, ask_state
from tdk._execution.context import ToolContext
from tdk._execution.result import ToolResult
from tdk.runner import ToolRunner
from tdk.runner._resume import MAX_ROUNDS

__all__ = ["pending_meta", "served_call"]

#: The first protocol revision whose servers answer with ``InputRequiredResult``.
_INPUT_REQUIRED_ERA: Final = "2026-07-28"
#: The ``_meta`` key a host without elicitation sends a resume under.
RESUME_META: Final = "tdk/resume"
#: The form field of a ``Choose``.
CHOICE: Final = "choice"


async def served_call(
    runner: ToolRunner,
    request: ServerRequestContext[Any],
    params: types.CallToolRequestParams,
    context: ToolContext | None,
    call_id: str | None,
) -> ToolResult | types.InputRequiredResult:
    """The answer to one ``tools/call``: the call run (or resumed) by ``runner``, as a
    result, or the ``InputRequiredResult`` of a pending call for a modern client."""
    served = _served(context)
    sent = (params.name, params.arguments)
    resume = _resume_of(params, request.meta)
    if resume is None:
        result = await runner.run(params.name, params.arguments, context=served, call_id=call_id)
    else:
        result = await runner._resume(resume[0], resume[1], served, call_id, sent)
    capability = _elicitation(request)
    modern = is_version_at_least(request.protocol_version, _INPUT_REQUIRED_ERA)
    for _ in range(MAX_ROUNDS + 1):  # (2025 clients: the runner bounds the rounds too)
        pending = result.pending
        if pending is None or pending.token is None or capability is None:
            return result
        if modern:
            return types.InputRequiredResult(
                input_requests={
                    key: types.ElicitRequest(params=_elicitation_params(key, asked, modern))
                    for key, asked in pending.requests.items()
                },
                request_state=pending.token,
            )
        answers = await _elicited(request, pending.requests)
        if answers is None:  # the client could not ask: the model is told instead
            return result
        result = await runner._resume(pending.token, answers, served, call_id, sent)
    return result


def pending_meta(answered: dict[str, Any], result: ToolResult) -> dict[str, Any]:
    """``answered`` (a failure's wire form) with ``_meta["tdk/pending"]``, the requests and
    the token, when ``result`` is pending."""
    pending = result.pending
    if pending is None:
        return answered
    meta = {**answered.get("_meta", {}), "tdk/pending": pending.model_dump(mode="json")}
    return {**answered, "_meta": meta}


def _served(context: ToolContext | None) -> ToolContext:
    """``context`` marked as served: a runner that does not say otherwise asks the approval
    of tools declared destructive."""
    base = context if context is not None else ToolContext()
    state = ask_state(context)
    return base._answered(AskState(answers=state.answers, served=True, rounds=state.rounds))


def _resume_of(
    params: types.CallToolRequestParams, meta: Mapping[str, Any] | None
) -> tuple[object, object] | None:
    """The token and the answers of a call sent again: ``requestState`` and
    ``inputResponses`` (2026-07-28), or ``_meta["tdk/resume"]``; None for a first call."""
    if params.request_state is not None:
        responses = dict(params.input_responses or {})
        return params.request_state, _answers_from(responses)
    resume = (meta or {}).get(RESUME_META)
    if isinstance(resume, Mapping):
        return resume.get("token"), resume.get("answers")
    return None


def _answers_from(
    responses: Mapping[str, Any],
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The answers of ``responses`` (elicitation results by key), read once the runner has
    opened the token and knows what each key asked."""

    def answers(asked: Mapping[str, Any]) -> dict[str, Any]:
        return {key: _answer(asked.get(key, {}), response) for key, response in responses.items()}

    return answers


def _answer(asked: Mapping[str, Any], response: object) -> Any:
    """The answer an elicitation result gives to the request ``asked`` (its JSON form)."""
    action = getattr(response, "action", None)
    content = getattr(response, "content", None)
    if action != "accept":
        return False  # declined, cancelled, or not an elicitation result at all
    kind = asked.get("type")
    if kind in ("confirm", "open_url"):
        return True
    if kind == "choose":
        return (content or {}).get(CHOICE)
    return dict(content or {})


def _elicitation(request: ServerRequestContext[Any]) -> types.ElicitationCapability | None:
    capabilities = request.session.client_capabilities
    return None if capabilities is None else capabilities.elicitation


def _elicitation_params(
    key: str, asked: Mapping[str, Any], modern: bool
) -> types.ElicitRequestFormParams | types.ElicitRequestURLParams:
    message = str(asked.get("message", ""))
    kind = asked.get("type")
    if kind == "open_url":
        return types.ElicitRequestURLParams(
            message=message,
            url=str(asked.get("url")),
            elicitation_id=None if modern else f"{key}-{secrets.token_urlsafe(8)}",
        )
    if kind == "choose":
        field = {"type": "string", "title": "Choice", "enum": list(asked.get("options", ()))}
        schema = {"type": "object", "properties": {CHOICE: field}, "required": [CHOICE]}
    elif kind == "form":
        schema = dict(asked.get("schema", {}))
    else:  # a confirmation: accept or decline
        schema = {"type": "object", "properties": {}}
    return types.ElicitRequestFormParams(message=message, requested_schema=schema)


async def _elicited(
    request: ServerRequestContext[Any], requests: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The answers of a 2025 client, asked inline; None when it could not be asked."""
    answers: dict[str, Any] = {}
    session = request.session
    for key, asked in requests.items():
        params = _elicitation_params(key, asked, modern=False)
        response: Any = None
        with contextlib.suppress(Exception):  # no answer: the model is told instead
            if isinstance(params, types.ElicitRequestURLParams):
                response = await session.elicit_url(
                    params.message, params.url, params.elicitation_id or key, request.request_id
                )
            else:
                response = await session.elicit_form(
                    params.message, params.requested_schema, request.request_id
                )
        if response is None:
            return None
        answers[key] = _answer(asked, response)
    return answers
