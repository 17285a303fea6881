"""Cost of tdk's OpenTelemetry support per call, against the bare pydantic floor.

Three modes, each in a fresh process: ``absent`` (``opentelemetry`` cannot be imported, as
without the extra), ``idle`` (the API installed, no provider set: tdk's check is two
attribute reads), ``recording`` (an SDK ``TracerProvider`` with an in-memory exporter and a
``MeterProvider`` with an in-memory reader: every call is a span and a histogram point).
Each prints ``await tool.run(args)`` on the success path next to the floor measured in the
same process (validate the arguments with a pydantic model, call, validate the output).

Run: python bench/bench_otel.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from typing import Annotated

ARGS = {"query": "python", "limit": 5}


def measure(mode: str, calls: int) -> None:
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails
    elif mode == "recording":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    from pydantic import BaseModel, TypeAdapter

    from tdk import tool

    async def search_fn(
        query: Annotated[str, "What to search for."], limit: Annotated[int, "How many."]
    ) -> list[str]:
        """Search."""
        return [query] * limit

    search = tool(name="search", read_only=True)(search_fn)

    class Arguments(BaseModel):
        query: str
        limit: int

    output = TypeAdapter(list[str])

    async def floor() -> object:
        model = Arguments.model_validate(ARGS)
        return output.dump_python(await search_fn(**model.__dict__), mode="json")

    async def ours() -> object:
        return await search.run(ARGS)

    async def best(path: object) -> float:
        times = []
        for _ in range(7):
            started = time.perf_counter()
            for _ in range(calls):
                await path()  # type: ignore[operator]
            times.append((time.perf_counter() - started) / calls * 1e6)
        return min(times)

    async def both() -> tuple[float, float]:
        await ours()
        return await best(floor), await best(ours)

    floor_us, ours_us = asyncio.run(both())
    print(f"{mode:<10} {floor_us:8.2f} {ours_us:8.2f} {ours_us / floor_us:7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--mode", choices=["absent", "idle", "recording"])
    options = parser.parse_args()
    if options.mode:
        measure(options.mode, options.calls)
        return
    print(f"{'mode':<10} {'floor us':>8} {'tdk us':>8} {'ratio':>8}")
    for mode in ("absent", "idle", "recording"):
        subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--calls", str(options.calls)], check=True
        )


if __name__ == "__main__":
    main()
