"""An agent loop on top of ToolRunner: a scripted "model" calls tools that call a flaky upstream.

The upstream is a real HTTP server on 127.0.0.1 (stdlib ``http.server``, in a thread). The run
shows the three layers of retrying at work:

1. the model sends bad arguments: the validation error goes straight back to the model, which
   fixes them (the runner never repeats a call that cannot succeed);
2. the upstream answers 429 with ``Retry-After: 0.05``: the runner waits it out and retries
   with the same arguments, and the model sees only the success;
3. the upstream goes down: retries fail, the circuit opens, calls fail fast with
   ``retry_after_ms``; the model waits that long, the upstream is back, a probe call closes
   the circuit.

Run: python examples/agent_loop.py   (takes well under a second)
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

import httpx

from tdk import CircuitBreaker, RetryPolicy, Toolkit, ToolResult, ToolRunner, tool

try:  # the httpx hook classifies 4xx/5xx (and reads Retry-After) without raise_for_status()
    from tdk.http import install
except ImportError:  # pragma: no cover - without it, raise_for_status() below does the job
    install = None


class Upstream(BaseHTTPRequestHandler):
    """A weather and quotes API that rate limits once, and whose quotes go down on demand."""

    weather_calls = 0
    quotes_up = False

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        if url.path == "/weather":
            type(self).weather_calls += 1
            if type(self).weather_calls == 1:
                self.answer(429, {"error": "slow down"}, {"Retry-After": "0.05"})
            else:
                self.answer(200, {"city": query["city"], "temperature": 21})
        elif url.path == "/quote" and type(self).quotes_up:
            self.answer(200, {"symbol": query["symbol"], "price": 101.5})
        else:
            self.answer(503, {"error": "quotes are down"})

    def answer(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextmanager
def serve() -> Iterator[str]:
    """Run the upstream on a free port of 127.0.0.1; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


CLIENT = httpx.AsyncClient()  # main() points it at the upstream and installs tdk's hook


@tool(read_only=True)
async def get_weather(
    city: Annotated[str, "The city's name."],
    units: Annotated[Literal["metric", "imperial"], "Unit system of the answer."] = "metric",
) -> dict[str, Any]:
    """Get the current weather in a city."""
    response = await CLIENT.get("/weather", params={"city": city, "units": units})
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


@tool(read_only=True)
async def get_quote(symbol: Annotated[str, "The ticker symbol."]) -> dict[str, Any]:
    """Get the latest price of a stock."""
    response = await CLIENT.get("/quote", params={"symbol": symbol})
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def show(result: ToolResult) -> None:
    if result.error is None:
        print(f"  -> {json.dumps(result.value)}  (attempts: {result.attempts})")
        return
    error = result.error
    wait = "" if error.retry_after_ms is None else f", retry_after_ms={error.retry_after_ms}"
    stopped = error.details.get("retry_stopped")
    print(f"  -> {error.kind.value} [{error.category.value}] attempts={result.attempts}{wait}")
    print(f"     {error.message}" + (f"  (retries stopped: {stopped})" if stopped else ""))


async def model(runner: ToolRunner) -> None:
    """A scripted model: it reads each result and decides the next call, as a planner would."""
    step = 0

    async def call(name: str, arguments: dict[str, Any]) -> ToolResult:
        nonlocal step
        step += 1
        print(f"step {step}: model calls {name}({json.dumps(arguments)})")
        result = await runner.run(name, arguments, call_id=f"call-{step}")
        show(result)
        return result

    print("== 1. a validation error goes back to the model, which fixes its arguments")
    result = await call("get_weather", {"city": "Paris", "units": "kelvin"})
    assert result.category == "validation"
    assert result.attempts == 0
    print("  model: my arguments were wrong; the message says which, I fix them")

    print("\n== 2. a 429 with Retry-After is waited out by the runner")
    result = await call("get_weather", {"city": "Paris", "units": "metric"})
    assert result.is_success
    assert result.attempts == 2

    print("\n== 3. the upstream goes down: the circuit opens, then closes again")
    for _ in range(2):
        result = await call("get_quote", {"symbol": "ACME"})
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "circuit_open"
    result = await call("get_quote", {"symbol": "ACME"})
    assert result.kind == "TOOL_RUNTIME_CIRCUIT_OPEN"
    assert result.retry_after_ms is not None
    print(f"  model: the tool is paused; I wait {result.retry_after_ms} ms before trying again")
    Upstream.quotes_up = True  # meanwhile, the upstream recovers
    await asyncio.sleep(result.retry_after_ms / 1000)
    result = await call("get_quote", {"symbol": "ACME"})
    assert result.is_success

    stats = runner.stats()
    circuits = {name: state.value for name, state in stats.circuits.items()}
    print(
        f"\nrunner stats: {stats.calls} calls, {stats.attempts} attempts, {stats.retries} retries"
    )
    print(f"circuits: {circuits}")


async def main() -> None:
    runner_log = logging.getLogger("tdk.runner")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("     runner: %(message)s"))
    runner_log.addHandler(handler)
    runner_log.setLevel(logging.INFO)

    with serve() as base_url:
        CLIENT.base_url = httpx.URL(base_url)
        if install is not None:
            install(CLIENT)
        runner = ToolRunner(
            Toolkit("agent", [get_weather, get_quote]),
            timeout=2.0,
            deadline=5.0,
            retry=RetryPolicy(max_attempts=2, initial_delay=0.02),
            circuit_breaker=CircuitBreaker(failure_threshold=3, reset_timeout=0.3),
        )
        async with CLIENT:
            await model(runner)


if __name__ == "__main__":
    asyncio.run(main())
