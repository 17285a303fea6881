"""The first pieces of acting as the user upstream (issue 27's outbound half): the OAuth
provider type, a user's token set, its sealing (AES-256-GCM, bound to its owner), and the
token stores, in memory and on a real ``redis-server`` started on a free port: sealed at
rest, one refresh lock per (user, provider) across clients, failing closed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from _redis_support import RedisServer, running_redis

from tdk.auth import (
    InMemoryTokenStore,
    OAuthProvider,
    RedisTokenStore,
    TokenSealer,
    TokenSet,
    TokenStore,
    TokenStoreError,
)

ACCESS = "gho_access-token-4f1e2d3c"
REFRESH = "ghr_refresh-token-9a8b7c6d"
TOKENS = TokenSet(ACCESS, REFRESH, expires_at=2_000_000_000.0, scopes=frozenset({"repo"}))
KEY = os.urandom(32)
#: Bound of one scenario, in seconds.
SCENARIO = 30.0


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, SCENARIO))


# -- the provider ------------------------------------------------------------------------------

GITHUB = {
    "name": "github",
    "authorize_url": "https://github.com/login/oauth/authorize",
    "token_url": "https://github.com/login/oauth/access_token",
    "client_id_from": "GITHUB_CLIENT_ID",
    "client_secret_from": "GITHUB_CLIENT_SECRET",
}


def test_a_provider_names_its_secrets_not_their_values() -> None:
    """The client id and secret are secrets read by name; PKCE is on, scope is not sent on
    refresh, unless asked."""
    provider = OAuthProvider(**GITHUB, authorize_params={"allow_signup": "false"})
    assert provider.secrets == ("GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET")
    assert (provider.pkce, provider.refresh_sends_scope) == (True, False)
    assert dict(provider.authorize_params) == {"allow_signup": "false"}
    assert hash(provider) == hash(OAuthProvider(**GITHUB))
    public = OAuthProvider(**{**GITHUB, "client_secret_from": None})
    assert public.secrets == ("GITHUB_CLIENT_ID",)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"name": "git hub"}, "name must be"),
        ({"token_url": "http://github.com/token"}, "token_url must be https"),
        ({"authorize_url": "github.com/authorize"}, "authorize_url must be an https URL"),
        ({"revocation_url": "https://u:p@github.com/revoke"}, "credentials"),
        ({"client_id_from": " "}, "client_id_from must name a secret"),
        ({"client_secret_from": "GITHUB_CLIENT_ID"}, "the same secret"),
        ({"authorize_params": {"a": 1}}, "authorize_params"),
    ],
    ids=["name", "http-token-url", "not-a-url", "credentials", "blank-secret", "same", "params"],
)
def test_a_provider_that_cannot_work_is_refused(change: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        OAuthProvider(**{**GITHUB, **change})


# -- a token set and its sealing -----------------------------------------------------------------


def test_a_token_response_becomes_a_set() -> None:
    """``expires_in`` becomes a time; a refresh answer without a refresh token keeps the old
    one (not rotated), with one replaces it (rotated); scopes in either spelling."""
    first = TokenSet.from_token_response(
        {"access_token": "a1", "refresh_token": "r1", "expires_in": 3600, "scope": "repo,user"},
        now=1000.0,
    )
    assert (first.expires_at, first.scopes, first.token_type) == (
        4600.0,
        frozenset({"repo", "user"}),
        "Bearer",
    )
    kept = TokenSet.from_token_response({"access_token": "a2"}, previous=first, now=2000.0)
    assert (kept.refresh_token, kept.scopes, kept.expires_at) == ("r1", first.scopes, None)
    rotated = TokenSet.from_token_response(
        {"access_token": "a3", "refresh_token": "r2", "expires_in": 60}, previous=first, now=0.0
    )
    assert rotated.refresh_token == "r2"
    assert rotated.expires_within(60, now=0.0)
    assert not rotated.expires_within(59, now=0.0)
    assert not kept.expires_within(10**9)
    with pytest.raises(ValueError, match="no access_token"):
        TokenSet.from_token_response({"error": "invalid_grant"})
    assert "a1" not in repr(first)
    assert "r1" not in repr(first)


def test_a_sealed_set_opens_only_for_its_owner() -> None:
    """Sealed for (alice, github): it opens for them, and as nothing for another user,
    another provider, another key, or once a byte of it is changed."""
    sealer = TokenSealer([KEY])
    blob = sealer.seal(TOKENS, user="alice", provider="github")
    assert ACCESS.encode() not in blob
    assert REFRESH.encode() not in blob
    assert sealer.open(blob, user="alice", provider="github") == TOKENS
    assert sealer.open(blob, user="bob", provider="github") is None
    assert sealer.open(blob, user="alice", provider="google") is None
    assert TokenSealer.ephemeral().open(blob, user="alice", provider="github") is None
    for position in (0, 5, 30, len(blob) - 1):
        changed = bytearray(blob)
        changed[position] ^= 1
        assert sealer.open(bytes(changed), user="alice", provider="github") is None
    assert sealer.open(b"short", user="alice", provider="github") is None


def test_keys_rotate() -> None:
    """A new key first seals; the old one, still in the ring, opens what it sealed."""
    old = TokenSealer([KEY])
    blob = old.seal(TOKENS, user="alice", provider="github")
    new_key = os.urandom(32)
    rotated = TokenSealer([new_key, KEY])
    assert rotated.open(blob, user="alice", provider="github") == TOKENS
    resealed = rotated.seal(TOKENS, user="alice", provider="github")
    assert TokenSealer([new_key]).open(resealed, user="alice", provider="github") == TOKENS
    assert old.open(resealed, user="alice", provider="github") is None


@pytest.mark.parametrize(
    "keys", [[], [b"short"], b"x" * 32, ["x" * 32]], ids=["none", "short", "bytes", "text"]
)
def test_keys_are_32_random_bytes(keys: Any) -> None:
    with pytest.raises(ValueError, match="32"):
        TokenSealer(keys)


# -- the stores ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
def using(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> Callable[[Callable[[TokenStore], Any]], Any]:
    """Run ``scenario(store)`` in a loop of its own, with a store made in it: in memory, or
    on Redis (a client of its own, closed at the end)."""

    def scenario_with(scenario: Callable[[TokenStore], Any]) -> Any:
        async def body() -> Any:
            if request.param == "memory":
                return await scenario(InMemoryTokenStore(TokenSealer([KEY])))
            redis_server.flush()
            client = aioredis.Redis.from_url(redis_server.url)
            try:
                return await scenario(RedisTokenStore(client, sealer=TokenSealer([KEY])))
            finally:
                await client.aclose()

        return run(body())

    return scenario_with


def test_a_store_keeps_each_users_tokens(using: Any) -> None:
    """Put, get, replace, delete, per (user, provider)."""

    async def scenario(store: TokenStore) -> list[Any]:
        await store.put("alice", "github", TOKENS)
        bobs = TokenSet("bob-access-token-1234", None)
        await store.put("bob", "github", bobs)
        seen = [await store.get("alice", "github"), await store.get("bob", "github")]
        seen.append(await store.get("alice", "google"))
        rotated = TokenSet("new-access-5555", "new-refresh-6666")
        await store.put("alice", "github", rotated)
        seen.append(await store.get("alice", "github"))
        await store.delete("alice", "github")
        seen.append(await store.get("alice", "github"))
        return seen

    alice, bob, google, rotated, deleted = using(scenario)
    assert alice == TOKENS
    assert bob.access_token == "bob-access-token-1234"
    assert (google, deleted) == (None, None)
    assert rotated.refresh_token == "new-refresh-6666"


def test_tokens_are_sealed_at_rest_on_redis(redis_server: RedisServer) -> None:
    """What Redis holds names no user and shows no token; sets swapped between two users'
    keys open as nothing."""
    users = ("alice@example.test", "bob@example.test")

    async def scenario() -> tuple[list[bytes], list[bytes], list[TokenSet | None]]:
        client = aioredis.Redis.from_url(redis_server.url)
        try:
            store = RedisTokenStore(client, sealer=TokenSealer([KEY]), prefix="t1")
            await store.put(users[0], "github", TOKENS)
            await store.put(users[1], "github", TokenSet("bob-token-0000", None))
            names = sorted(await client.keys("{t1:*"))
            blobs = [await client.get(name) for name in names]
            await client.set(names[0], blobs[1])
            await client.set(names[1], blobs[0])
            swapped = [await store.get(user, "github") for user in users]
            return names, blobs, swapped
        finally:
            await client.aclose()

    names, blobs, swapped = run(scenario())
    assert len(names) == 2
    assert all(b"example.test" not in name for name in names)
    assert all(ACCESS.encode() not in blob and REFRESH.encode() not in blob for blob in blobs)
    assert swapped == [None, None]


def test_one_holder_of_a_users_lock_at_a_time(using: Any) -> None:
    """Twenty calls that find alice's tokens stale at once refresh one at a time (each
    waits for the one before); bob's are not held up by hers."""

    async def scenario(store: TokenStore) -> tuple[int, list[str]]:
        inside = 0
        most = 0
        order: list[str] = []

        async def refresh(user: str) -> None:
            nonlocal inside, most
            async with store.lock(user, "github"):
                inside += 1 if user == "alice" else 0
                most = max(most, inside)
                order.append(user)
                await asyncio.sleep(0.01)
                inside -= 1 if user == "alice" else 0

        await asyncio.gather(*(refresh("alice") for _ in range(20)), refresh("bob"))
        return most, order

    most, order = using(scenario)
    assert most == 1
    assert sorted(order) == ["alice"] * 20 + ["bob"]
    assert order.index("bob") < 20  # (not queued behind alice's twenty)


def test_a_lock_held_too_long_is_a_timeout(using: Any) -> None:
    """A call that cannot have the lock within ``wait`` gets ``TimeoutError``."""

    async def scenario(store: TokenStore) -> None:
        async with store.lock("alice", "github"):
            with pytest.raises(TimeoutError):
                async with store.lock("alice", "github", wait=0.1):
                    pass

    using(scenario)


def test_the_lock_of_a_worker_that_died_expires(redis_server: RedisServer) -> None:
    """Across two clients (two workers): the lock one took and never released (its process
    died) is the other's once ``hold`` has passed."""

    async def scenario() -> bool:
        first = aioredis.Redis.from_url(redis_server.url)
        second = aioredis.Redis.from_url(redis_server.url)
        try:
            dying = RedisTokenStore(first, sealer=TokenSealer([KEY]), prefix="t2")
            other = RedisTokenStore(second, sealer=TokenSealer([KEY]), prefix="t2")
            held = dying.lock("alice", "github", hold=0.3)
            await held.__aenter__()  # (and never left: the worker died)
            async with other.lock("alice", "github", wait=5.0):
                return True
        finally:
            await first.aclose()
            await second.aclose()

    assert run(scenario())


def test_redis_that_cannot_be_reached_fails_closed(tmp_path: Path) -> None:
    """A store whose Redis is gone raises ``TokenStoreError`` (no token, never a stale or
    another user's one), naming no URL and no token."""
    server = RedisServer(tmp_path)

    async def scenario() -> list[str]:
        client = aioredis.Redis.from_url(server.url, socket_connect_timeout=1)
        store = RedisTokenStore(client, sealer=TokenSealer([KEY]))
        said = []
        try:
            for action in (
                store.get("alice", "github"),
                store.put("alice", "github", TOKENS),
                store.delete("alice", "github"),
            ):
                with pytest.raises(TokenStoreError) as failed:
                    await action
                said.append(str(failed.value))
            with pytest.raises(TokenStoreError):
                async with store.lock("alice", "github"):
                    pass
        finally:
            await client.aclose()
        return said

    for text in run(scenario()):
        assert text.startswith("the token store cannot be reached")
        assert ACCESS not in text
