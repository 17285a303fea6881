"""Workers in processes of their own refresh a user's tokens once between them (issue 27,
MISSION section 15): the loopback "GitHub" in a process (``OAuthProviderProcess``), a real
``redis-server``, and 4 python processes, each with a runner whose ``UserAuth`` keeps tokens
in a ``RedisTokenStore`` (one shared ``TokenSealer`` key), released together to run a tool
with alice's tokens that expire soon: ONE refresh grant at the provider, and every worker's
call runs with the token it gave. And a Redis token store that is down: no token, no ask, a
sign-in that cannot be saved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from _acting_support import (
    Seen,
    acting_runner,
    fingerprint,
    github_tools,
    run,
    seed_tokens,
    sign_in,
)
from _oauth_provider_server import OAuthProviderProcess, OAuthProviderServer, provider_for
from _redis_support import RedisServer, running_redis

from tdk import ErrorKind, ToolContext
from tdk.auth import RedisTokenStore, TokenSealer, TokenSet

WORKERS = 4
#: Bound of the workers' start and of their run, in seconds (each takes far less).
BOUND = 60.0
HERE = Path(__file__).parent

#: One worker: a runner of the GitHub tools acting as the user, its tokens in Redis. It says
#: it is ready (its imports done, its runner made), waits for the barrier file, runs whoami
#: once for alice and prints the result's JSON.
WORKER = """
import asyncio, json, os, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1], str(Path(sys.argv[1]).parent)]
import redis.asyncio as aioredis
from _acting_support import Seen, acting_runner, github_tools
from _oauth_provider_server import ProviderEndpoints, provider_for
from tdk import ToolContext
from tdk.auth import RedisTokenStore, TokenSealer

provider_url, redis_url, key, ready, go = sys.argv[2:7]

async def main():
    endpoints = ProviderEndpoints()
    endpoints.url = provider_url
    client = aioredis.Redis.from_url(redis_url)
    store = RedisTokenStore(client, sealer=TokenSealer([bytes.fromhex(key)]))
    kit = github_tools(endpoints, provider_for(endpoints), Seen())
    runner = acting_runner(endpoints, kit, store)
    Path(ready).touch()
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    try:
        result = await runner.run("whoami", {}, context=ToolContext(user_id="alice"))
    finally:
        await client.aclose()
    print(json.dumps(result.to_dict()))

asyncio.run(main())
"""


@pytest.fixture
def provider() -> Iterator[OAuthProviderProcess]:
    with OAuthProviderProcess() as running:
        yield running


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    with running_redis(folder) as server:
        yield server


async def _seed(redis_url: str, key: bytes, tokens: TokenSet) -> None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        await RedisTokenStore(client, sealer=TokenSealer([key])).put("alice", "github", tokens)
    finally:
        await client.aclose()


async def _kept(redis_url: str, key: bytes) -> TokenSet | None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        return await RedisTokenStore(client, sealer=TokenSealer([key])).get("alice", "github")
    finally:
        await client.aclose()


def test_workers_in_processes_refresh_once(
    provider: OAuthProviderProcess, redis_server: RedisServer, tmp_path: Path
) -> None:
    """4 workers, released together, each needing alice's expiring tokens refreshed:
    exactly one refresh grant at the provider, and the 4 calls run with its token."""
    key = os.urandom(32)
    provider.control(expires_in=30)  # within the workers' refresh margin (60 s)
    seeded = TokenSet.from_token_response(provider.tokens_for("alice"))
    provider.control(expires_in=3600)
    run(_seed(redis_server.url, key, seeded))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    go = tmp_path / "go"

    workers = []
    for number in range(WORKERS):
        ready = tmp_path / f"ready-{number}"
        arguments = [str(HERE), provider.url, redis_server.url, key.hex(), str(ready), str(go)]
        workers.append(
            subprocess.Popen(
                [sys.executable, str(script), *arguments],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    try:
        deadline = time.monotonic() + BOUND
        while not all((tmp_path / f"ready-{n}").exists() for n in range(WORKERS)):
            assert time.monotonic() < deadline, "the workers did not start"
            assert all(worker.poll() is None for worker in workers), "a worker ended early"
            time.sleep(0.02)
        go.touch()  # the barrier: every worker runs its call now
        outputs = [worker.communicate(timeout=BOUND) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()

    for worker, (_, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err.decode()
    results = [json.loads(out) for out, _ in outputs]
    assert [result["error"] for result in results] == [None] * WORKERS
    assert provider.stats()["grants"] == {"authorization_code": 1, "refresh_token": 1}
    kept = run(_kept(redis_server.url, key))
    assert kept is not None
    assert kept.access_token != seeded.access_token
    assert kept.refresh_token != seeded.refresh_token
    tokens = {result["value"]["token"] for result in results}
    assert tokens == {fingerprint(kept.access_token)}
    assert {result["value"]["login"] for result in results} == {"alice"}


# -- the token store down ----------------------------------------------------------------------


async def _scenario_with_store_down(server: OAuthProviderServer, redis: RedisServer) -> None:
    """alice's tokens kept on Redis; Redis stops: her call fails retryable (no token given,
    no sign-in asked: her tokens may be there); bob's sign-in cannot be saved."""
    client = aioredis.Redis.from_url(redis.url, socket_connect_timeout=2, socket_timeout=2)
    store = RedisTokenStore(client, sealer=TokenSealer([os.urandom(32)]))
    seen = Seen()
    runner = acting_runner(server, github_tools(server, provider_for(server), seen), store)
    try:
        await seed_tokens(server, store, "alice", expires_in=3600)
        asked = await runner.run("whoami", {}, context=ToolContext(user_id="bob"))
        params = sign_in(server, asked, "bob")
        redis.stop()

        result = await runner.run("whoami", {}, context=ToolContext(user_id="alice"))
        outcome = await runner.complete_authorization(params, user_id="bob")
    finally:
        await client.aclose()

    assert result.error is not None
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_RETRY
    assert result.pending is None
    assert seen.runs == {}
    assert (outcome.attached, outcome.reason) == (False, "store_unavailable")


def test_a_token_store_that_is_down_gives_no_token(
    redis_server: RedisServer,
) -> None:
    """Redis down: a call acting as the user fails closed and retryable, and a callback says
    the sign-in cannot be saved."""
    with OAuthProviderServer() as server:
        run(_scenario_with_store_down(server, redis_server))
