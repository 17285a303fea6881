"""ToolCall: one call as a model made it, for :meth:`tdk.ToolRunner.run_many`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ToolCall(BaseModel):
    """One call: a tool name, its arguments (a mapping, or a JSON object as text) and the
    caller's id for the call, as :meth:`tdk.ToolRunner.run_many` runs it and the parsers of
    :mod:`tdk.hosts` return it.

    ::

        ToolCall(name="search", arguments='{"query": "tdk"}', call_id="call_1")

    .. versionadded:: 0.1.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The tool to call (compared ignoring case)."""
    arguments: dict[str, Any] | str | None = None
    """The arguments, as the model sent them: text that is not a JSON object is answered with
    ``TOOL_RUNTIME_BAD_INPUT_VALUE`` when the call runs."""
    call_id: str | None = None
    """Echoed back in the result's ``call_id``: the id the model gave the call."""
    problem: str | None = None
    """Why the call cannot run as the model sent it, when a host's parser found it malformed
    (a call without an id, say). :meth:`~tdk.ToolRunner.run_many` answers such a call with
    ``TOOL_RUNTIME_BAD_INPUT_VALUE`` saying so, without running the tool."""
