"""``@tool(requires_approval=...)``: the user confirms a call before its body runs.

The approval is a :class:`~tdk.Confirm` under the key ``approval`` that shows the tool and
the arguments it would run with (validated, by their advertised names, secrets redacted), so
``runner.resume(token, {"approval": True}, context=...)`` runs the call, and ``False`` ends it
as declined (``TOOL_RUNTIME_APPROVAL_DENIED``). It is asked after the arguments validate and
the requirements are met, before the body: nothing has run when the user is asked. A runner
may require it of a call the tool does not ask it for (a destructive tool served by
``tdk serve``: see :class:`~tdk._execution.asks.AskState`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel
from pydantic_core import to_json

from tdk._execution.asks import APPROVAL, ask_state, declined, input_required, unfit_answer
from tdk._execution.context import ToolContext, context_of_call
from tdk._execution.requests import MAX_MESSAGE_CHARS, UnfitAnswerError
from tdk._failures.details import redact_json
from tdk.errors import FatalToolError

if TYPE_CHECKING:
    from tdk._define.definition import ToolSpec

__all__ = ["check_approval"]

#: Most characters of the arguments the approval's message repeats (all of them are in its
#: ``arguments``).
_SHOWN_ARGUMENTS: Final = MAX_MESSAGE_CHARS - 200


def check_approval(
    spec: ToolSpec,
    name: str,
    validated: BaseModel,
    context: ToolContext | None,
    secrets: tuple[str, ...],
) -> None:
    """Return when the call may run: no approval needed, or the user approved it. Raise the
    pending error asking for it, or the declined one."""
    state = ask_state(context)
    rule = spec.approval
    if rule is None and not state.approve:
        return
    if rule is not None and rule is not True and not state.approve:
        needed = rule(_by_parameter(spec, validated), context_of_call(context))
        if type(needed) is not bool:
            raise FatalToolError(
                "The tool's approval rule failed.",
                developer_message=(
                    f"requires_approval= returned a {type(needed).__name__}, not a bool"
                ),
            )
        if not needed:
            return
    if APPROVAL in state.answers:
        answer = state.answers[APPROVAL]
        if answer is True:
            return
        if answer is False:
            raise declined(APPROVAL)
        unfit = UnfitAnswerError("a confirmation is answered with true or false")
        raise unfit_answer(APPROVAL, unfit)
    raise input_required({APPROVAL: approval_request(name, validated, secrets)})


def approval_request(name: str, validated: BaseModel, secrets: tuple[str, ...]) -> dict[str, Any]:
    """The ``Confirm`` of a call of ``name`` with ``validated`` arguments, as JSON data, with
    the ``tool`` and its ``arguments`` (redacted) for hosts that show them apart."""
    arguments = redact_json(validated.model_dump(mode="json", by_alias=True), secrets)
    shown = to_json(arguments).decode()
    if len(shown) > _SHOWN_ARGUMENTS:
        shown = shown[: _SHOWN_ARGUMENTS - 1] + "…"
    return {
        "type": "confirm",
        "message": f"Allow the tool '{name}' to run with these arguments? {shown}",
        "tool": name,
        "arguments": arguments,
    }


def _by_parameter(spec: ToolSpec, validated: BaseModel) -> dict[str, Any]:
    """The validated arguments by Python parameter name (model instances kept), as the
    function would receive them, without its context."""
    values = dict(validated.__dict__)
    for field_name, parameter in spec.field_parameters:
        values[parameter] = values.pop(field_name)
    return values
