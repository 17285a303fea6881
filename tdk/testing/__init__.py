"""A testing kit for tool authors: the failures that matter, tested before production.

The pytest plugin (registered as ``tdk`` through the ``pytest11`` entry point, loaded in every
pytest run where tdk is installed; ``-p no:tdk`` turns it off) gives the fixtures:

- ``tdk_upstream`` (:class:`Upstream`): respx routes answering as real APIs fail (rate limits
  in the GitHub, OpenAI, Stripe, Anthropic and IETF dialects, 5xx, 422 field errors, a
  timeout, a reset after the request was sent), counting requests;
- ``tdk_clock`` (:class:`FakeClock`): a fake clock and sleep for ``ToolRunner``;
- ``tdk_secrets`` (:class:`Canaries`): canary secrets, and a failure naming every sink one
  reached (result, log record, span, MCP answer, model request);
- ``tdk_mcp`` (:class:`McpClients`): the official MCP client in memory, in both protocol eras;
- ``scripted_model`` (:class:`ScriptedModel`): fake OpenAI and Anthropic APIs for the official
  SDK clients, playing a script of tool calls;
- ``tdk_snapshot``: contract snapshots (:func:`check_snapshot`), as ``tdk schema TARGET
  --check FILE`` does on the command line.

And :func:`fuzz`, on hypothesis. What the kit needs is the ``testing`` extra
(``pip install 'tdk-tools[testing]'``); this package and the plugin load without it, and each
part that needs a missing package says which. ``import tdk`` never imports this package.

See ``docs/testing.md``.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tdk.testing.canaries import Canaries, Leak
    from tdk.testing.clock import FakeClock
    from tdk.testing.dialects import DIALECTS, Answer
    from tdk.testing.fuzz import FuzzReport, fuzz
    from tdk.testing.mcp_client import ERAS, McpClients
    from tdk.testing.model_wire import Returned
    from tdk.testing.scripted_model import ScriptedModel
    from tdk.testing.snapshot import Change, SnapshotCheck, check_snapshot
    from tdk.testing.upstream import Upstream, UpstreamRoute

#: Each public name -> its module, loaded on first use: the plugin imports this package in
#: every pytest run of a project where tdk is installed, and loads a part only when a test
#: asks for it.
_LAZY: dict[str, str] = {
    "Answer": "tdk.testing.dialects",
    "Canaries": "tdk.testing.canaries",
    "Change": "tdk.testing.snapshot",
    "DIALECTS": "tdk.testing.dialects",
    "ERAS": "tdk.testing.mcp_client",
    "FakeClock": "tdk.testing.clock",
    "FuzzReport": "tdk.testing.fuzz",
    "Leak": "tdk.testing.canaries",
    "McpClients": "tdk.testing.mcp_client",
    "Returned": "tdk.testing.model_wire",
    "ScriptedModel": "tdk.testing.scripted_model",
    "SnapshotCheck": "tdk.testing.snapshot",
    "Upstream": "tdk.testing.upstream",
    "UpstreamRoute": "tdk.testing.upstream",
    "check_snapshot": "tdk.testing.snapshot",
    "fuzz": "tdk.testing.fuzz",
}

__all__ = [
    "DIALECTS",
    "ERAS",
    "Answer",
    "Canaries",
    "Change",
    "FakeClock",
    "FuzzReport",
    "Leak",
    "McpClients",
    "Returned",
    "ScriptedModel",
    "SnapshotCheck",
    "Upstream",
    "UpstreamRoute",
    "check_snapshot",
    "fuzz",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tdk.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
