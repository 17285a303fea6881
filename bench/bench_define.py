"""Cost of defining tools with ``@tool`` against the floor, measured in one run.

The floor is what any framework must do for a tool: ``pydantic.create_model`` with the same
fields and descriptions, then ``model_json_schema()``. Each measurement runs in a fresh
process, on the same generated tools (distinct names, parameters and docstrings):

- time per tool, for ``@tool`` and for the floor;
- memory for all tools (tracemalloc: peak, and what stays allocated afterwards);
- importing what a tool module uses (``from tdk import tool, Toolkit, ToolResult,
  ToolContext``; ``import tdk`` alone loads nothing until a name is used) against importing
  httpx and pydantic and building one model, which any user of a tool pays anyway: pairs of
  fresh processes, measured in turn, and the median of the pairs' differences. (pydantic
  imports lazily: most of its cost is paid when the first model is built.)

Guards (bench/README.md): at most 1.5x the floor per tool, at most 21 MB per 1000 tools, the
import within 30 ms of its baseline. Prints figures and ratios; asserts nothing.

Run: python bench/bench_define.py [--tools N] [--repeat N] [--imports N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any, Literal

PARAMETER_TYPES = [
    ("str", "What to look for."),
    ("int = 10", "How many results at most."),
    ("list[str] | None = None", "Labels to filter by."),
    ('Literal["asc", "desc"] = "asc"', "Sort order."),
    ("bool = False", "Whether to match exactly."),
    ("float = 0.5", "Minimum relevance."),
]
RETURN_TYPES = ["str", "list[str]", "dict[str, int]", "list[dict[str, Any]]", "int | None"]


WARM_UP = '''
from tdk import tool

@tool
def warm_up(q: str) -> str:
    """Warm up.

    Args:
        q: Anything.
    """
    return q
'''


def tool_source(count: int) -> str:
    """A module defining ``count`` distinct tools with ``@tool`` (3-5 parameters each)."""
    parts = ["from typing import Any, Literal", "from tdk import tool"]
    for i in range(count):
        chosen = [PARAMETER_TYPES[(i + k) % len(PARAMETER_TYPES)] for k in range(3 + i % 3)]
        chosen.sort(key=lambda p: "=" in p[0])  # parameters without defaults first
        params = ", ".join(f"p{k}_{i}: {annotation}" for k, (annotation, _) in enumerate(chosen))
        docs = "\n".join(f"        p{k}_{i}: {doc}" for k, (_, doc) in enumerate(chosen))
        parts.append(
            f"@tool\ndef tool_{i}({params}) -> {RETURN_TYPES[i % len(RETURN_TYPES)]}:\n"
            f'    """Tool number {i}: search something.\n\n    Args:\n{docs}\n    """\n'
            "    raise NotImplementedError\n"
        )
    return "\n\n".join(parts)


def floor_fields(count: int) -> list[tuple[str, list[tuple[str, Any, Any, str]]]]:
    """The same tools as (name, [(field, type, default, description)]), with the types
    evaluated before measuring starts (the floor does not parse source text)."""
    namespace: dict[str, Any] = {"Any": Any, "Literal": Literal}
    tools = []
    for i in range(count):
        chosen = [PARAMETER_TYPES[(i + k) % len(PARAMETER_TYPES)] for k in range(3 + i % 3)]
        chosen.sort(key=lambda p: "=" in p[0])
        fields = []
        for k, (annotation, doc) in enumerate(chosen):
            type_text, _, default_text = annotation.partition(" = ")
            kind = eval(type_text, namespace)
            default = eval(default_text, namespace) if default_text else ...
            fields.append((f"p{k}_{i}", kind, default, doc))
        tools.append((f"tool_{i}", fields))
    return tools


def child_tdk(count: int, memory: bool) -> dict[str, float]:
    import tdk  # noqa: F401  (its import is measured separately)

    code = compile(tool_source(count), "generated_tools", "exec")
    exec(compile(WARM_UP, "warm_up", "exec"), {})  # as the floor warms up, outside the measure
    namespace: dict[str, Any] = {"__name__": "generated_tools"}
    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    exec(code, namespace)
    elapsed = time.perf_counter() - started
    result = {"seconds": elapsed}
    if memory:
        current, peak = tracemalloc.get_traced_memory()
        result.update(current=current, peak=peak)
    return result


def child_floor(count: int, memory: bool) -> dict[str, float]:
    from pydantic import ConfigDict, Field, create_model

    tools = floor_fields(count)
    config = ConfigDict(extra="forbid")
    create_model("Warm", __config__=config).model_json_schema()  # import what it needs first
    kept = []
    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    for name, fields in tools:
        definitions = {
            field: (kind, Field(default, description=doc)) for field, kind, default, doc in fields
        }
        model = create_model(name, __config__=config, **definitions)
        kept.append((model, model.model_json_schema()))
    elapsed = time.perf_counter() - started
    result = {"seconds": elapsed}
    if memory:
        current, peak = tracemalloc.get_traced_memory()
        result.update(current=current, peak=peak)
    return result


def child_import(what: str) -> dict[str, float]:
    started = time.perf_counter()
    if what == "tdk":
        import tdk  # noqa: F401  (loads nothing of its own until a name is used)
    elif what == "names":
        from tdk import ToolContext, Toolkit, ToolResult, tool  # noqa: F401
    else:
        import httpx  # noqa: F401

        if what == "deps":
            import pydantic  # noqa: F401  (lazy: does not load BaseModel's machinery)
        else:
            from pydantic import BaseModel, TypeAdapter

            if what == "ready":  # pydantic as any app using it has it: one model built
                type("Ready", (BaseModel,), {"__annotations__": {"x": int}})(x=1)
                TypeAdapter(list[str]).validate_python(["x"])
    return {"seconds": time.perf_counter() - started}


def run_child(*args: str) -> dict[str, float]:
    # Imports are timed as an installed package would see them: with bytecode caches (some
    # environments set PYTHONDONTWRITEBYTECODE, which makes every import compile tdk anew).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    output = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return json.loads(output)  # type: ignore[no-any-return]


def median_import(what: str, runs: int) -> float:
    run_child("import", what)  # writes the bytecode caches
    return statistics.median(run_child("import", what)["seconds"] for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7, help="interleaved pairs of runs")
    parser.add_argument("--imports", type=int, default=15, help="fresh processes per import")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        what, *rest = options.child
        if what == "import":
            print(json.dumps(child_import(rest[0])))
        else:
            count, memory = int(rest[0]), rest[1] == "memory"
            measure = child_tdk if what == "tdk" else child_floor
            print(json.dumps(measure(count, memory)))
        return

    n = options.tools
    # Interleaved pairs: background load then weighs on both sides of a pair alike, and the
    # median of the pairs' ratios is robust to a noisy pair.
    times: dict[str, list[float]] = {"tdk": [], "floor": []}
    for _ in range(options.repeat):
        for side, seconds in times.items():
            seconds.append(run_child(side, str(n), "time")["seconds"])
    ratios = [mine / floor for mine, floor in zip(times["tdk"], times["floor"], strict=True)]
    tdk_time, floor_time = min(times["tdk"]), min(times["floor"])
    tdk_memory = run_child("tdk", str(n), "memory")
    floor_memory = run_child("floor", str(n), "memory")
    import_tdk = median_import("tdk", options.imports)
    import_deps = median_import("deps", options.imports)
    import_ready = median_import("ready", options.imports)
    run_child("import", "names")  # writes the bytecode caches
    pairs = [
        (run_child("import", "names")["seconds"], run_child("import", "ready")["seconds"])
        for _ in range(options.imports)
    ]
    import_names = statistics.median(names for names, _ in pairs)
    above = statistics.median(names - ready for names, ready in pairs)

    per_tool, per_floor = tdk_time / n * 1e6, floor_time / n * 1e6
    mb = 1024 * 1024
    print(f"Defining {n} distinct tools ({options.repeat} interleaved pairs of fresh processes)")
    print(f"  @tool           {per_tool:8.0f} us/tool  (best)")
    print(f"  floor           {per_floor:8.0f} us/tool  (best; create_model + model_json_schema)")
    print(
        f"  ratio           {statistics.median(ratios):8.2f}x  (median of pairs; target <= 1.5x)"
        f"  pairs: {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    print(f"Memory for {n} tools (tracemalloc)")
    for label, figures in (("@tool", tdk_memory), ("floor", floor_memory)):
        print(
            f"  {label:<6} peak {figures['peak'] / mb:6.1f} MiB, "
            f"retained {figures['current'] / mb:6.1f} MiB"
        )
    per_1000 = tdk_memory["peak"] * 1000 / n
    print(
        f"  @tool per 1000  {per_1000 / mb:6.1f} MiB = {per_1000 / 1e6:.1f} MB peak"
        "  (target <= 20 MB)"
    )
    print(f"Import (median of {options.imports} fresh processes, bytecode cached)")
    print(f"  import tdk                          {import_tdk * 1e3:6.1f} ms  (names load on use)")
    print(f"  from tdk import tool, Toolkit, ...  {import_names * 1e3:6.1f} ms")
    print(f"  import pydantic, httpx              {import_deps * 1e3:6.1f} ms  (pydantic is lazy)")
    print(f"  import httpx + one pydantic model   {import_ready * 1e3:6.1f} ms")
    print(
        f"  tdk's names - (httpx + one model)   {above * 1e3:6.1f} ms"
        "  (median of pairs measured in turn; target <= 30 ms)"
    )


if __name__ == "__main__":
    main()
