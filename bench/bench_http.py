"""What the upstream hook costs, measured against the same request without it.

Two comparisons in one run, on ``httpx.MockTransport`` (no network, so that the hook's own
cost is not hidden by socket time):

1. success: a plain ``httpx.Client`` getting a 200 vs the same client with the hook installed
   (target: under 2% overhead);
2. a 429 with ``Retry-After``: request, hook and structured error, caught, vs the bare request
   that just returns the 429 (guard: at most 1.65x).

Run: ``.venv/bin/python bench/bench_http.py [--number N] [--rounds N]``. Prints ratios;
asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import httpx

import tdk.http
from tdk.errors import UpstreamRateLimitError

URL = "https://api.example.com/v1/items?page=2"
OK_BODY = b'{"items": [1, 2, 3]}'
LIMITED_BODY = b'{"error": {"message": "Rate limit reached.", "code": "rate_limit_exceeded"}}'
JSON = {"Content-Type": "application/json"}


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers=JSON, content=OK_BODY)


def limited(request: httpx.Request) -> httpx.Response:
    headers = {**JSON, "Retry-After": "7", "x-request-id": "req_123"}
    return httpx.Response(429, headers=headers, content=LIMITED_BODY)


def client(handler: Callable[[httpx.Request], httpx.Response], *, hook: bool) -> httpx.Client:
    plain = httpx.Client(transport=httpx.MockTransport(handler))
    return tdk.http.install(plain) if hook else plain


def per_call_us(call: Callable[[], object], *, number: int) -> float:
    """Mean time per call over ``number`` calls, in microseconds."""
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number * 1e6


def interleaved(
    first: Callable[[], object], second: Callable[[], object], *, number: int, rounds: int
) -> tuple[float, float]:
    """Best round of each, the two measured alternately so that the load of a shared machine
    hits both alike (noise only ever adds time, so the minimum is the cleanest estimate)."""
    for call in (first, second):
        per_call_us(call, number=number // 5)  # warm up
    gc.collect()
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        a.append(per_call_us(first, number=number))
        b.append(per_call_us(second, number=number))
    return min(a), min(b)


def main(number: int, rounds: int) -> None:
    plain_ok = client(ok, hook=False)
    hooked_ok = client(ok, hook=True)
    plain_429 = client(limited, hook=False)
    hooked_429 = client(limited, hook=True)

    def classified() -> object:
        try:
            hooked_429.get(URL)
        except UpstreamRateLimitError as error:
            return error
        raise AssertionError("the hook did not raise")

    assert plain_429.get(URL).status_code == 429
    assert isinstance(classified(), UpstreamRateLimitError)

    bare, hooked = interleaved(
        lambda: plain_ok.get(URL), lambda: hooked_ok.get(URL), number=number, rounds=rounds
    )
    overhead = (hooked / bare - 1) * 100
    bare_429, classified_429 = interleaved(
        lambda: plain_429.get(URL), classified, number=number, rounds=rounds
    )
    ratio = classified_429 / bare_429
    # The hook's own cost on a success, without the request around it (noise-free):
    response = plain_ok.get(URL)
    alone = min(
        per_call_us(lambda: tdk.http.raise_for_upstream(response), number=100_000) for _ in range(5)
    )

    print(f"{'case':44} {'bare us':>9} {'tdk us':>9} {'result':>9} {'guard':>9}")
    print(f"{'200, hook installed vs plain client':44} {bare:9.2f} {hooked:9.2f} "
          f"{overhead:+8.2f}% {'< 2%':>9}")  # fmt: skip
    print(f"{'200, the hook call alone vs plain request':44} {bare:9.2f} {alone:9.3f} "
          f"{alone / bare * 100:+8.2f}% {'< 2%':>9}")  # fmt: skip
    print(f"{'429 classified end to end vs bare 429':44} {bare_429:9.2f} {classified_429:9.2f} "
          f"{ratio:8.2f}x {'<= 1.65x':>9}")  # fmt: skip
    for each in (plain_ok, hooked_ok, plain_429, hooked_429):
        each.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=500, help="requests per round")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds")
    options = parser.parse_args()
    main(options.number, options.rounds)
