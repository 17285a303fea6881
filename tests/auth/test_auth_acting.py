"""Tools acting as the user upstream (issue 27, MISSION section 15), in process against the
loopback "GitHub" (``_oauth_provider_server``, authlib): the declaration, the authorization
ask and its link, the callback (``runner.complete_authorization``) with each way it can go
wrong, the user's token on the call, and the runner's checks at construction. The refresh and
the upstream's 401 are in ``test_auth_acting_refresh``; workers in processes sharing Redis in
``test_auth_refresh_workers``."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from _acting_support import (
    ASK,
    STATE_KEY,
    Seen,
    acting_runner,
    fingerprint,
    github_tools,
    run,
    seed_tokens,
    sign_in,
)
from _authlib_loopback import Mode
from _oauth_provider_server import (
    CLIENT,
    CLIENT_ID_SECRET,
    CLIENT_SECRET_SECRET,
    OAuthProviderServer,
    client_secrets,
    provider_for,
)

from tdk import ErrorKind, ToolContext, Toolkit, tool
from tdk.auth import InMemoryTokenStore, OAuthProvider, UserAuth
from tdk.runner import ToolRunner


@pytest.fixture
def server() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as running:
        yield running


@pytest.fixture
def github(server: OAuthProviderServer) -> OAuthProvider:
    return provider_for(server)


# -- the declaration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scopes", "declared"),
    [
        ((), {"provider": "github", "scopes": []}),
        (("repo",), {"provider": "github", "scopes": ["repo"]}),
        (("repo", "read:org"), {"provider": "github", "scopes": ["repo", "read:org"]}),
    ],
    ids=["provider", "one-scope", "two-scopes"],
)
def test_the_definition_says_which_authorization_a_tool_needs(
    github: OAuthProvider, scopes: tuple[str, ...], declared: dict[str, Any]
) -> None:
    """``requirements.auth`` names the provider and the scopes, in the definition's JSON;
    the provider's client secrets are the runner's (UserAuth's), not the tool's."""
    requirement = github.with_scopes(*scopes) if scopes else github

    @tool(requires_auth=requirement)
    def my_repos(context: ToolContext) -> int:
        """The user's repositories."""
        return 0

    dumped = json.loads(my_repos.definition.model_dump_json())
    assert dumped["requirements"] == {
        "secrets": [],
        "metadata": [],
        "scopes": [],
        "auth": declared,
    }


def test_without_a_runner_the_token_comes_from_the_context(server: OAuthProviderServer) -> None:
    """Run by a toolkit alone, a tool acting as the user needs ``ToolContext(auth_token=)``:
    without one it does not run (``missing_auth`` names the provider, in tdk's words); with
    one, the body gets that token and the provider honours it."""
    seen = Seen()
    kit = github_tools(server, provider_for(server), seen)

    missing = run(kit.run("whoami", {}, context=ToolContext(user_id="alice")))
    assert missing.error is not None
    assert missing.error.kind is ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert missing.error.details["missing_auth"] == "github"
    assert "github" in missing.error.message
    assert "[REDACTED]" not in (missing.error.developer_message or "")
    assert seen.runs == {}

    token = server.tokens_for("alice")["access_token"]
    given = run(kit.run("whoami", {}, context=ToolContext(auth_token=token)))
    assert given.error is None, given.to_dict()
    assert given.value == {"login": "alice", "token": fingerprint(token)}
    assert seen.tokens == [token]


# -- the whole flow ----------------------------------------------------------------------------


def test_a_user_signs_in_once_and_the_call_goes_on(
    server: OAuthProviderServer, github: OAuthProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """No token: the call asks the user to open the provider's authorization link (PKCE
    S256, this runner's redirect URI, the tool's scopes, a sealed state); alice signs in,
    the callback attaches her tokens, and the call sent again runs with an access token the
    provider honours. No token, code or verifier reaches a result or a log record."""
    caplog.set_level(logging.DEBUG)
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, seen), store)
    alice = ToolContext(user_id="alice")

    asked = run(runner.run("whoami", {}, context=alice))
    assert asked.error is not None
    assert asked.error.kind is ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED
    assert asked.pending is not None
    assert list(asked.pending.requests) == [ASK]
    request = asked.pending.requests[ASK]
    assert request["type"] == "open_url"
    assert "github" in request["message"]
    link = urlsplit(request["url"])
    assert f"{link.scheme}://{link.netloc}{link.path}" == server.authorize_url
    query = {name: values[0] for name, values in parse_qs(link.query).items()}
    assert {name: query[name] for name in ("response_type", "client_id", "redirect_uri")} == {
        "response_type": "code",
        "client_id": CLIENT[0],
        "redirect_uri": server.callback,
    }
    assert (query["scope"], query["code_challenge_method"]) == ("repo", "S256")
    assert len(query["code_challenge"]) == 43  # base64url of a SHA-256 digest
    assert len(query["state"]) > 40
    assert seen.runs == {}

    params = sign_in(server, asked, "alice")
    attached = run(runner.complete_authorization(params, user_id="alice"))
    assert (attached.attached, attached.provider, attached.reason) == (True, "github", "attached")
    assert params["code"] not in attached.message

    answered = run(runner.resume(asked.pending.token, {ASK: None}, context=alice))
    assert answered.error is None, answered.to_dict()
    assert seen.tokens
    assert answered.value == {
        "login": "alice",
        "token": fingerprint(seen.tokens[-1]),
    }
    assert server.access_token_valid(seen.tokens[-1])
    assert server.grants == {"authorization_code": 1}
    assert server.last_token_form["code_verifier"]  # the exchange proved the challenge

    kept = run(store.get("alice", "github"))
    assert kept is not None
    assert kept.access_token == seen.tokens[-1]
    shown = [json.dumps(asked.to_dict()), json.dumps(answered.to_dict())]
    shown += [record.getMessage() for record in _ours(caplog.records)]
    said = "\n".join(shown)
    for value in (kept.access_token, kept.refresh_token, params["code"]):
        assert value
        assert value not in said
    assert server.last_token_form["code_verifier"] not in said


def test_a_token_the_body_leaks_is_scrubbed_from_its_error(
    server: OAuthProviderServer, github: OAuthProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """The user's token is a secret of the call: a body that puts it in its error does not
    show it to the model, nor to tdk's log."""
    caplog.set_level(logging.DEBUG)
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, seen), store)
    run(seed_tokens(server, store, "alice", expires_in=3600))

    result = run(runner.run("leaky", {}, context=ToolContext(user_id="alice")))
    assert result.error is not None
    assert seen.tokens
    token = seen.tokens[0]
    assert token not in json.dumps(result.to_dict())
    tdk_said = [r.getMessage() for r in _ours(caplog.records) if r.name.startswith("tdk")]
    assert tdk_said
    assert not [line for line in tdk_said if token in line]


def _ours(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """The records of this side: the tests' loop runs in the main thread; the provider's
    threads log what a provider knows (the tokens it issues)."""
    return [record for record in records if record.thread == threading.main_thread().ident]


# -- the callback ------------------------------------------------------------------------------


def _flip(text: str) -> str:
    middle = len(text) // 2
    return text[:middle] + ("A" if text[middle] != "A" else "B") + text[middle + 1 :]


Params = Callable[[dict[str, str], str], dict[str, str]]


@dataclass(frozen=True)
class Callback:
    """One way the provider's callback can come: the parameters it brings (from those the
    provider sent and the pending call's resume token), who opens it, how the provider
    behaves; and the outcome."""

    reason: str
    params: Params = lambda sent, resume: sent
    opened_by: str | None = "alice"
    token_mode: Mode = "ok"
    deny: bool = False
    ask_expiry: float = 600.0
    wait: float = 0.0
    provider: str | None = "github"


def _forged(make: Callable[[str, str], str]) -> Callback:
    """A callback bringing the state ``make(state sent, resume token)``: "forged"."""
    return Callback(
        "forged", lambda sent, resume: sent | {"state": make(sent["state"], resume)}, provider=None
    )


CALLBACKS = {
    "other-user": Callback("other_user", opened_by="bob"),
    "anonymous-user": Callback("other_user", opened_by=None),
    "tampered-state": _forged(lambda state, resume: _flip(state)),
    "truncated-state": _forged(lambda state, resume: state[:-6]),
    "made-up-state": _forged(lambda state, resume: secrets.token_urlsafe(90)),
    "resume-token-as-state": _forged(lambda state, resume: resume),
    "huge-state": _forged(lambda state, resume: "A" * 100_000),
    "no-state": Callback("forged", lambda p, r: {"code": p["code"]}, provider=None),
    "expired": Callback("expired", ask_expiry=0.2, wait=0.5),
    "declined-at-provider": Callback("declined", deny=True),
    "no-code": Callback("exchange_failed", lambda p, r: {"state": p["state"]}),
    "token-endpoint-html": Callback("exchange_failed", token_mode="html"),
    "token-endpoint-500": Callback("exchange_failed", token_mode="500"),
    "token-endpoint-huge": Callback("exchange_failed", token_mode="huge"),
    "token-endpoint-hangs": Callback("exchange_failed", token_mode="hang"),
}  # fmt: skip


@pytest.mark.parametrize("case", CALLBACKS.values(), ids=CALLBACKS.keys())
def test_a_callback_that_cannot_attach_attaches_nothing(
    server: OAuthProviderServer, github: OAuthProvider, case: Callback
) -> None:
    """Each callback that is not alice's own good one attaches nothing, says why in tdk's
    words (no code, no state, no provider text), and alice's call asks again."""
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(
        server, github_tools(server, github, seen), store, ask_expiry=case.ask_expiry, timeout=2.0
    )
    alice = ToolContext(user_id="alice")
    asked = run(runner.run("whoami", {}, context=alice))
    assert asked.pending is not None
    if case.deny:
        server.deny = {"alice"}
    sent = sign_in(server, asked, "alice")
    time.sleep(case.wait)  # past the link's expiry (no bound on time is asserted)
    server.token_mode = case.token_mode

    outcome = run(
        runner.complete_authorization(
            case.params(sent, asked.pending.token), user_id=case.opened_by
        )
    )
    assert (outcome.attached, outcome.reason, outcome.provider) == (
        False,
        case.reason,
        case.provider,
    )
    for value in (*sent.values(), asked.pending.token):
        assert value not in outcome.message
    assert "<html" not in outcome.message.lower()

    server.token_mode = "ok"
    server.deny = set()
    for user in ("alice", "bob", ""):
        assert run(store.get(user, "github")) is None
    assert "authorization_code" not in server.grants
    again = run(runner.run("whoami", {}, context=alice))  # (sent again: a resume token expires too)
    assert again.pending is not None
    assert list(again.pending.requests) == [ASK]
    assert seen.runs == {}


def test_a_link_attaches_once(server: OAuthProviderServer, github: OAuthProvider) -> None:
    """A callback replayed (the same code and state) attaches nothing more: "used"; the
    tokens of the first stay, and the provider traded the code once."""
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, Seen()), store)
    asked = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))
    params = sign_in(server, asked, "alice")

    first = run(runner.complete_authorization(params, user_id="alice"))
    kept = run(store.get("alice", "github"))
    replayed = run(runner.complete_authorization(params, user_id="alice"))

    assert (first.reason, replayed.reason) == ("attached", "used")
    assert replayed.attached is False
    after = run(store.get("alice", "github"))
    assert kept is not None
    assert after is not None
    assert after.access_token == kept.access_token
    assert server.grants == {"authorization_code": 1}


def test_bob_opening_alices_link_leaves_it_to_alice(
    server: OAuthProviderServer, github: OAuthProvider
) -> None:
    """The link is alice's: bob opening it attaches nothing to anyone, and alice can still
    use it."""
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, Seen()), store)
    asked = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))
    params = sign_in(server, asked, "alice")

    bob = run(runner.complete_authorization(params, user_id="bob"))
    alice = run(runner.complete_authorization(params, user_id="alice"))

    assert (bob.reason, alice.reason) == ("other_user", "attached")
    assert run(store.get("bob", "github")) is None
    assert run(store.get("alice", "github")) is not None


def test_a_call_sent_again_before_the_sign_in_asks_again(
    server: OAuthProviderServer, github: OAuthProvider
) -> None:
    """The host sends the call again before the user finished signing in, and the runner
    does not wait for the callback (``sign_in_wait=0``): it asks again, with a link of its
    own (a new state), and the body does not run."""
    seen = Seen()
    runner = acting_runner(server, github_tools(server, github, seen), sign_in_wait=0)
    alice = ToolContext(user_id="alice")
    asked = run(runner.run("whoami", {}, context=alice))
    assert asked.pending is not None

    again = run(runner.resume(asked.pending.token, {ASK: None}, context=alice))

    assert again.pending is not None
    assert list(again.pending.requests) == [ASK]
    states = [
        parse_qs(urlsplit(result.pending.requests[ASK]["url"]).query)["state"]
        for result in (asked, again)
        if result.pending is not None
    ]
    assert states[0] != states[1]
    assert seen.runs == {}


def test_a_call_sent_again_waits_for_the_callback_that_is_on_its_way(
    server: OAuthProviderServer, github: OAuthProvider
) -> None:
    """An MCP 2025 client answers the sign-in ask as soon as the user opens the link: the
    call sent again waits for the provider's callback (``sign_in_wait``), then runs once,
    without a second link."""
    seen = Seen()
    runner = acting_runner(server, github_tools(server, github, seen), sign_in_wait=60)
    alice = ToolContext(user_id="alice")
    asked = run(runner.run("whoami", {}, context=alice))
    assert asked.pending is not None
    token = asked.pending.token
    assert token is not None
    params = sign_in(server, asked, "alice")  # (the browser is back; the callback not yet)

    async def resumed_while_signing_in() -> tuple[bool, str, Any]:
        resuming = asyncio.create_task(runner.resume(token, {ASK: None}, context=alice))
        await asyncio.sleep(0.2)
        waiting = not resuming.done()  # (a runner that did not wait would have asked again)
        attached = await runner.complete_authorization(params, user_id="alice")
        return waiting, attached.reason, await resuming

    waiting, reason, again = run(resumed_while_signing_in())

    assert (waiting, reason) == (True, "attached")
    assert again.error is None, again.to_dict()
    assert again.value["login"] == "alice"
    assert seen.runs == {"whoami": 1}


@pytest.mark.parametrize(
    ("state_key", "reason"),
    [(STATE_KEY, "attached"), (b"another key, 32 bytes long......", "forged")],
    ids=["replica-same-key", "other-key"],
)
def test_a_link_is_completed_by_any_replica_with_the_key(
    server: OAuthProviderServer, github: OAuthProvider, state_key: bytes, reason: str
) -> None:
    """The state is sealed with the runner's ``state_key``: a replica sharing it (and the
    token store) completes a link another made; a server with another key sees a forgery."""
    store = InMemoryTokenStore()
    kit = github_tools(server, github, Seen())
    runner = acting_runner(server, kit, store)
    replica = ToolRunner(
        kit,
        user_auth=UserAuth(store, redirect_uri=server.callback, secrets=client_secrets()),
        state_key=state_key,
    )
    asked = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))
    params = sign_in(server, asked, "alice")

    outcome = run(replica.complete_authorization(params, user_id="alice"))

    assert outcome.reason == reason
    assert (run(store.get("alice", "github")) is not None) == (reason == "attached")


def test_a_declined_sign_in_ends_the_call(
    server: OAuthProviderServer, github: OAuthProvider
) -> None:
    """The host answers the ask with False (the user will not sign in): the call ends
    ``TOOL_RUNTIME_APPROVAL_DENIED``, its body never run."""
    seen = Seen()
    runner = acting_runner(server, github_tools(server, github, seen))
    alice = ToolContext(user_id="alice")
    asked = run(runner.run("create_repo", {"name": "x"}, context=alice))
    assert asked.pending is not None

    refused = run(runner.resume(asked.pending.token, {ASK: False}, context=alice))

    assert refused.error is not None
    assert refused.error.kind is ErrorKind.TOOL_RUNTIME_APPROVAL_DENIED
    assert refused.pending is None
    assert seen.runs == {}
    assert server.repos_created == []


# -- who the call acts for ---------------------------------------------------------------------


@pytest.mark.parametrize("user_id", [None, ""], ids=["no-id", "empty-id"])
def test_a_caller_without_an_id_shares_no_ones_tokens(
    server: OAuthProviderServer, github: OAuthProvider, user_id: str | None
) -> None:
    """A caller authenticated without an id (claims, no ``sub``, or an empty one) is
    refused: the anonymous user's tokens (kept under no id) are not given to it."""
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, seen), store)
    run(seed_tokens(server, store, "", expires_in=3600, login="anonymous"))
    assert run(runner.run("whoami", {}, context=None)).error is None  # the anonymous user's
    seen.runs.clear()

    caller = ToolContext(user_id=user_id, claims={"iss": "https://as"})
    refused = run(runner.run("whoami", {}, context=caller))

    assert refused.error is not None
    assert refused.error.kind is ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert refused.pending is None
    assert seen.runs == {}


def test_each_user_gets_their_own_token(server: OAuthProviderServer, github: OAuthProvider) -> None:
    """alice's tokens serve alice only: bob, with none, is asked to sign in."""
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, seen), store)
    run(seed_tokens(server, store, "alice", expires_in=3600))

    alice = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))
    bob = run(runner.run("whoami", {}, context=ToolContext(user_id="bob")))

    assert alice.error is None
    assert alice.value["login"] == "alice"
    assert bob.pending is not None
    assert list(bob.pending.requests) == [ASK]
    assert seen.runs == {"whoami": 1}


def test_tokens_with_fewer_scopes_ask_for_the_missing_ones(
    server: OAuthProviderServer, github: OAuthProvider
) -> None:
    """Tokens granted fewer scopes than the tool needs: the call asks again, for the scopes
    granted and the tool's."""
    seen = Seen()
    store = InMemoryTokenStore()
    runner = acting_runner(server, github_tools(server, github, seen), store)
    answer = server.tokens_for("alice", scope="read:user")
    from_provider = run(seed_tokens(server, store, "alice", expires_in=3600))
    narrow = type(from_provider).from_token_response(answer)
    run(store.put("alice", "github", narrow))

    asked = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))

    assert asked.pending is not None
    query = parse_qs(urlsplit(asked.pending.requests[ASK]["url"]).query)
    assert sorted(query["scope"][0].split()) == ["read:user", "repo"]
    assert seen.runs == {}


# -- the runner's checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({}, [CLIENT_ID_SECRET, CLIENT_SECRET_SECRET]),
        ({CLIENT_ID_SECRET: CLIENT[0]}, [CLIENT_SECRET_SECRET]),
        ({CLIENT_SECRET_SECRET: CLIENT[1], CLIENT_ID_SECRET: ""}, [CLIENT_ID_SECRET]),
    ],
    ids=["none", "no-secret", "empty-id"],
)
def test_a_runner_needs_the_providers_client_secrets(
    server: OAuthProviderServer,
    github: OAuthProvider,
    given: dict[str, str],
    missing: list[str],
) -> None:
    """``ToolRunner(user_auth=)`` refuses to start without the client id and secret of a
    provider its tools act at, naming the secrets (never a value)."""
    kit = github_tools(server, github, Seen())
    with pytest.raises(ValueError, match="client secrets") as refused:
        ToolRunner(kit, user_auth=UserAuth(redirect_uri=server.callback, secrets=given))
    said = str(refused.value)
    for name in (CLIENT_ID_SECRET, CLIENT_SECRET_SECRET):
        assert (name in said) == (name in missing)
    assert CLIENT[1] not in said


def test_a_public_client_needs_only_its_id(server: OAuthProviderServer) -> None:
    """A provider without a client secret (PKCE alone) needs its id only."""
    public = provider_for(server, public=True)
    kit = github_tools(server, public, Seen())
    user_auth = UserAuth(redirect_uri=server.callback, secrets=client_secrets(public=True))
    ToolRunner(kit, user_auth=user_auth, state_key=STATE_KEY)


def test_two_providers_of_one_name_are_refused(server: OAuthProviderServer) -> None:
    """Tokens are kept by the provider's name: two different providers named alike in one
    toolkit are refused at construction."""

    @tool(requires_auth=provider_for(server))
    def one(context: ToolContext) -> int:
        """One."""
        return 1

    @tool(requires_auth=provider_for(server, token_auth="client_secret_post"))
    def two(context: ToolContext) -> int:
        """Two."""
        return 2

    user_auth = UserAuth(redirect_uri=server.callback, secrets=client_secrets())
    with pytest.raises(ValueError, match="two different providers are named 'github'"):
        ToolRunner(Toolkit("kit", [one, two]), user_auth=user_auth)


_SERVED_WITHOUT_USER_AUTH = """
from tdk import ToolContext, tool
from tdk.auth import OAuthProvider

GITHUB = OAuthProvider(
    name="github",
    authorize_url="http://127.0.0.1:9/authorize",
    token_url="http://127.0.0.1:9/token",
    client_id_from="GITHUB_CLIENT_ID",
)


@tool(requires_auth=GITHUB.with_scopes("repo"))
def whoami(context: ToolContext) -> str:
    \"\"\"Who the user is at GitHub.\"\"\"
    return "someone"
"""


def test_tdk_serve_says_a_tool_acting_as_the_user_needs_a_runner_with_user_auth(
    tmp_path: Path,
) -> None:
    """Served without a runner given ``user_auth`` (a module's tools, a plain toolkit), a
    tool acting as the user cannot run: the operator is told at start, as for a secret."""
    tools = tmp_path / "github_tools.py"
    tools.write_text(_SERVED_WITHOUT_USER_AUTH)
    ended = subprocess.run(
        [sys.executable, "-m", "tdk", "serve", str(tools)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 0, ended.stderr
    said = (
        "tdk serve: whoami acts as the user at 'github', but the served runner has no "
        "user_auth: its calls will answer TOOL_RUNTIME_MISSING_REQUIREMENT"
    )
    assert ended.stderr.count(said) == 1, ended.stderr
