"""``scripted_model``: fake OpenAI and Anthropic APIs on a loopback server, for the official
SDK clients, playing a script of tool calls and recording what came back.

::

    async def scenario(scripted_model):
        async with scripted_model.openai([("search_issues", {"q": "bug"})], "Two bugs.") as llm:
            ...  # the agent loop, with llm.chat.completions.create(...)
        assert scripted_model.results[0].json()["kind"] == "UPSTREAM_RUNTIME_RATE_LIMIT"

Each client (``openai(*turns, api="chat" | "responses")``, ``anthropic(*turns)``) is the real
``openai.AsyncOpenAI`` or ``anthropic.AsyncAnthropic``, pointed at a server on 127.0.0.1 that
answers request N with turn N of its script: a text (the final answer) or tool calls. Like the
real APIs, it refuses (400) a request that does not answer every call of the previous turn.
Every request body is kept (:attr:`ScriptedModel.requests`), and every tool result sent back
is a :class:`~tdk.testing.model_wire.Returned` in :attr:`ScriptedModel.results`; both are shown
to ``tdk_secrets`` when the test uses it. A request past the end of its script is refused
too, and fails the test (:meth:`ScriptedModel.problems`).

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from tdk.testing.canaries import witness
from tdk.testing.model_wire import (
    API_PATHS,
    Returned,
    Turn,
    answer_of,
    api_refusal,
    returned_in,
    turn,
)

__all__ = ["ScriptedModel"]

#: The largest request body read, in bytes (a conversation with every tool's schema).
MAX_BODY: Final = 16 * 1024 * 1024
_API_KEY: Final = "sk-scripted-model"


class _Script:
    """The turns of one client, and how far it got."""

    def __init__(self, api: str, turns: list[Turn]) -> None:
        self.api = api
        self.turns = turns
        self.played = 0
        self.lock = threading.Lock()


class ScriptedModel:
    """The fake model APIs of a test; the server starts with the first client and stops with
    :meth:`close` (the fixture's teardown)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.results: list[Returned] = []
        """Every tool result sent back to the model, once each, in order."""
        self._scripts: list[_Script] = []
        self._problems: list[str] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def openai(self, *turns: object, api: str = "chat", **options: Any) -> Any:
        """An ``openai.AsyncOpenAI`` whose API plays ``turns`` (``api``: ``"chat"`` for Chat
        Completions, ``"responses"`` for the Responses API); ``options`` go to the client."""
        if api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")
        try:
            from openai import AsyncOpenAI
        except ImportError as missing:
            raise ImportError(
                "scripted_model.openai() needs the openai package: pip install 'tdk-tools[testing]'"
            ) from missing
        number = self._script(api, turns)
        options.setdefault("max_retries", 0)
        return AsyncOpenAI(api_key=_API_KEY, base_url=f"{self._url()}/{number}/v1", **options)

    def anthropic(self, *turns: object, **options: Any) -> Any:
        """An ``anthropic.AsyncAnthropic`` whose Messages API plays ``turns``; ``options`` go
        to the client."""
        try:
            from anthropic import AsyncAnthropic
        except ImportError as missing:
            raise ImportError(
                "scripted_model.anthropic() needs the anthropic package: "
                "pip install 'tdk-tools[testing]'"
            ) from missing
        number = self._script("anthropic", turns)
        options.setdefault("max_retries", 0)
        return AsyncAnthropic(api_key=_API_KEY, base_url=f"{self._url()}/{number}", **options)

    def problems(self) -> str | None:
        """What went wrong with the scripts (a request past the end of one...), or None."""
        if not self._problems:
            return None
        return "scripted_model:\n" + "\n".join(f"  - {each}" for each in self._problems)

    def close(self) -> None:
        """Stop the server (the fixture's teardown)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _script(self, api: str, turns: tuple[object, ...]) -> int:
        steps = [turn(step, number, api) for number, step in enumerate(turns, start=1)]
        with self._lock:
            self._scripts.append(_Script(api, steps))
            return len(self._scripts) - 1

    def _url(self) -> str:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="scripted_model", daemon=True
            )
            self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, number: int, path: str, body: Mapping[str, Any]) -> tuple[int, object]:
        """The status and body answering ``body`` sent to ``path`` of script ``number``."""
        if not 0 <= number < len(self._scripts):
            return 404, {"error": {"message": f"no script {number}"}}
        script = self._scripts[number]
        if path != API_PATHS[script.api]:
            return 404, api_refusal(
                script.api, f"this client's fake API serves {API_PATHS[script.api]}"
            )
        with self._lock:
            self.requests.append(dict(body))
        witness("model request", f"{script.api} request", body)
        if body.get("stream"):
            return 400, api_refusal(script.api, "the scripted model does not stream")
        with script.lock:
            returned = self._record(script, body)
            if script.played >= len(script.turns):
                problem = (
                    f"a {script.api} request came after the end of its script "
                    f"({len(script.turns)} turns)"
                )
                self._problems.append(problem)
                return 400, api_refusal(script.api, f"scripted_model: {problem}")
            if script.played:
                asked = {call.call_id for call in script.turns[script.played - 1].calls}
                missing = sorted(asked - returned)
                if missing:
                    message = f"tool calls without a result: {', '.join(missing)}"
                    return 400, api_refusal(script.api, message)
            step = script.turns[script.played]
            script.played += 1
        return 200, answer_of(script.api, step, script.played)

    def _record(self, script: _Script, body: Mapping[str, Any]) -> set[str]:
        """Keep the tool results of ``body`` not kept yet; the call ids it answers."""
        names = {call.call_id: call.name for step in script.turns for call in step.calls}
        answered = set()
        for call_id, content, is_error in returned_in(script.api, body):
            answered.add(call_id)
            key = f"{id(script)}:{call_id}"
            if key not in self._seen:
                self._seen.add(key)
                self.results.append(Returned(call_id, names.get(call_id, ""), content, is_error))
        return answered


def _handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    """The request handler of ``model``'s server: ``POST /<script>/v1/...``."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            number_text, _, rest = self.path.lstrip("/").partition("/")
            length = int(self.headers.get("Content-Length") or 0)
            if not number_text.isdigit() or not 0 <= length <= MAX_BODY:
                self._send(400, {"error": {"message": "not a request of scripted_model"}})
                return
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                self._send(400, {"error": {"message": "the body is not JSON"}})
                return
            if not isinstance(body, dict):
                self._send(400, {"error": {"message": "the body is not a JSON object"}})
                return
            path = "/" + rest.partition("?")[0]
            self._send(*model.answer(int(number_text), path, body))

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the requests are in :attr:`ScriptedModel.requests`."""

    return Handler
