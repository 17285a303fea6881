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

from tdk.testing.canaries import Canaries, Leak
from tdk.testing.clock import FakeClock
from tdk.testing.dialects import DIALECTS, Answer
from tdk.testing.fuzz import FuzzReport, fuzz
from tdk.testing.mcp_client import ERAS, McpClients
from tdk.testing.model_wire import Returned
from tdk.testing.scripted_model import ScriptedModel
from tdk.testing.snapshot import Change, SnapshotCheck, check_snapshot
from tdk.testing.upstream import Upstream, UpstreamRoute

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
