"""``ToolContext``: secrets, metadata and identity, immutable and safe to print."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import pickle
import uuid
from typing import Any

import pytest

from tdk import ToolContext, tool
from tdk._execution.context import secret_values
from tdk.errors import ErrorCategory, ErrorKind, ToolRequirementError

TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
AUTH = "user-credential-42"


@pytest.fixture
def context() -> ToolContext:
    return ToolContext(
        secrets={"GITHUB_TOKEN": TOKEN, "EMPTY": ""},
        metadata={"org": "acme", "seats": 0},
        user_id="u-1",
        auth_token=AUTH,
    )


def test_defaults_are_empty() -> None:
    """A bare context has no secrets, no metadata and no identity."""
    bare = ToolContext()
    assert dict(bare.secrets) == {}
    assert dict(bare.metadata) == {}
    assert bare.user_id is None
    assert bare.auth_token is None


def test_get_secret(context: ToolContext) -> None:
    """A present secret is returned as is."""
    assert context.get_secret("GITHUB_TOKEN") == TOKEN


@pytest.mark.parametrize("name", ["MISSING", "EMPTY", "github_token"], ids=str.lower)
def test_missing_secret_raises_a_requirement_error(context: ToolContext, name: str) -> None:
    """An absent, empty or differently-cased secret raises ToolRequirementError naming it."""
    with pytest.raises(ToolRequirementError) as caught:
        context.get_secret(name)
    error = caught.value
    assert error.message == f"The secret '{name}' is not available to this tool."
    assert error.details["missing_secrets"] == [name]
    assert error.kind is ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert error.category is ErrorCategory.CONFIGURATION
    assert error.retryable is False
    assert str(error) == (
        "[TOOL_RUNTIME_MISSING_REQUIREMENT] ToolRequirementError: "
        f"The secret '{name}' is not available to this tool."
    )


def test_get_metadata(context: ToolContext) -> None:
    """Metadata values are returned as is, falsy ones included."""
    assert context.get_metadata("org") == "acme"
    assert context.get_metadata("seats") == 0


def test_missing_metadata_raises_a_requirement_error(context: ToolContext) -> None:
    """Absent metadata raises ToolRequirementError naming the key."""
    with pytest.raises(ToolRequirementError) as caught:
        context.get_metadata("locale")
    assert caught.value.details == {"missing_metadata": ["locale"]}
    assert caught.value.message == "The metadata 'locale' is not available to this tool."


def test_repr_hides_secret_values_and_the_auth_token(context: ToolContext) -> None:
    """``repr()`` names the secrets but shows neither their values nor the auth token."""
    text = repr(context)
    assert TOKEN not in text
    assert AUTH not in text
    assert text == (
        "ToolContext(secrets={'GITHUB_TOKEN': '***', 'EMPTY': '***'}, "
        "metadata={'org': 'acme', 'seats': 0}, user_id='u-1', auth_token='***')"
    )
    assert TOKEN not in str(context)
    assert TOKEN not in f"{context!r} {[context]}"


def test_repr_without_auth_token() -> None:
    """An absent auth token shows as None."""
    assert (
        repr(ToolContext()) == "ToolContext(secrets={}, metadata={}, user_id=None, auth_token=None)"
    )


def test_context_is_immutable(context: ToolContext) -> None:
    """Attributes cannot be reassigned and the mappings cannot be changed."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.user_id = "u-2"  # type: ignore[misc]
    with pytest.raises(TypeError):
        context.secrets["OTHER"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        context.metadata["org"] = "other"  # type: ignore[index]


def test_context_copies_the_mappings_it_is_given() -> None:
    """Changing the dicts after building the context does not change it."""
    secrets = {"A": "1"}
    built = ToolContext(secrets=secrets)
    secrets["A"] = "2"
    assert built.get_secret("A") == "1"


def test_options_are_keyword_only() -> None:
    """Positional arguments are refused."""
    with pytest.raises(TypeError):
        ToolContext({"A": "1"})  # type: ignore[misc]


def test_equality(context: ToolContext) -> None:
    """Two contexts with the same content are equal."""
    assert context == ToolContext(
        secrets={"GITHUB_TOKEN": TOKEN, "EMPTY": ""},
        metadata={"org": "acme", "seats": 0},
        user_id="u-1",
        auth_token=AUTH,
    )
    assert context != ToolContext(user_id="u-1")


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda c: pickle.loads(pickle.dumps(c))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_context_copies_and_pickles(context: ToolContext, clone: object) -> None:
    """Copies and pickles are equal to the original and stay read-only."""
    other = clone(context)  # type: ignore[operator]
    assert other == context
    with pytest.raises(TypeError):
        other.secrets["OTHER"] = "x"


@pytest.mark.parametrize(
    ("secrets", "auth_token", "scrubbed", "kept"),
    [
        pytest.param(
            {"A": "tok en/1234:x@y"},
            None,
            [
                "tok en/1234:x@y",
                "tok%20en/1234:x@y",
                "tok%20en%2F1234%3Ax%40y",
                "tok+en%2F1234%3Ax%40y",
            ],
            [],
            id="as-in-a-path-and-a-query",
        ),
        pytest.param(
            {"A": 12345678, "B": b"bytes-secret"},
            None,
            ["12345678", "bytes-secret"],
            [],
            id="numbers-and-bytes-as-text",
        ),
        pytest.param({"A": None, "B": ""}, "tok-9999", ["tok-9999"], [], id="none-and-empty"),
        pytest.param({"A": "//", "B": "é"}, None, [], ["//", "%2F%2F", "%C3%A9"], id="too-short"),
        pytest.param(
            {"A": "key-\udcff-123"},
            None,
            ["key-\udcff-123", "key-%FF-123"],
            [],
            id="undecodable-environment-byte",
        ),
    ],
)
def test_secret_values_are_what_redaction_scrubs(
    secrets: dict[str, object], auth_token: str | None, scrubbed: list[str], kept: list[str]
) -> None:
    """Every usable secret, as text and in the percent-encoded forms a URL carries; nothing
    that would only destroy text."""
    context = ToolContext(secrets=secrets, auth_token=auth_token)  # type: ignore[arg-type]
    values = secret_values(context)
    for value in scrubbed:
        assert value in values
    for value in kept:
        assert value not in values


def test_a_subclass_that_skips_our_post_init_still_works() -> None:
    """A subclass whose ``__post_init__`` does not call ours still has its secrets scrubbed."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class TenantContext(ToolContext):
        tenant: str = "t1"

        def __post_init__(self) -> None:
            if not self.tenant:
                raise ValueError("tenant required")

    @tool
    def boom(context: ToolContext) -> int:
        """Fail with the secret in the message."""
        raise ValueError(f"bad {context.get_secret('K')}")

    result = boom.run_sync({}, context=TenantContext(secrets={"K": "tenant-secret-1"}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert "tenant-secret-1" not in str(result.to_dict())


@pytest.mark.parametrize(
    "given", [pytest.param({}, id="not-given"), pytest.param({"idempotency_key": None}, id="none")]
)
def test_a_context_given_no_key_makes_its_own(given: dict[str, None]) -> None:
    """Without a key (or with None, as before keys became ``str``), a context has a random
    UUID of its own: what a tool reads is always a ``str``."""
    own = ToolContext(**given).idempotency_key  # type: ignore[arg-type]
    assert isinstance(own, str)
    assert uuid.UUID(own).version == 4
    assert own != ToolContext(**given).idempotency_key  # type: ignore[arg-type]


def test_a_key_made_at_random_does_not_make_contexts_differ() -> None:
    """Contexts compare by the key a caller gave, not by one made at random."""
    assert ToolContext(user_id="u") == ToolContext(user_id="u")
    assert ToolContext(idempotency_key="k") == ToolContext(idempotency_key="k")
    assert ToolContext(idempotency_key="k") != ToolContext(idempotency_key="j")
    assert ToolContext(idempotency_key="k") != ToolContext()


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda c: pickle.loads(pickle.dumps(c))],
    ids=["copy", "deepcopy", "pickle"],
)
@pytest.mark.parametrize("key", [None, "call-1"], ids=["own-key", "given-key"])
def test_copies_keep_the_key(clone: Any, key: str | None) -> None:
    """Copies and pickles keep the key, whether the caller gave it or not."""
    context = ToolContext(idempotency_key=key)
    other = clone(context)
    assert other.idempotency_key == context.idempotency_key
    assert repr(other) == repr(context)


def test_a_tool_reads_a_key_however_it_is_called() -> None:
    """Called directly, a tool reads its context's key; each ``run()`` is a logical call of
    its own with a new key, unless the caller gave one."""
    seen: list[str] = []

    @tool
    def create(context: ToolContext) -> str:
        """Create something, once per key."""
        seen.append(context.idempotency_key)
        return "ok"

    context = ToolContext()
    create(context)
    asyncio.run(create.run({}, context=context))
    asyncio.run(create.run({}, context=context))
    asyncio.run(create.run({}, context=ToolContext(idempotency_key="k-9")))
    assert seen[0] == context.idempotency_key
    assert len(set(seen[:3])) == 3
    assert seen[3] == "k-9"
    assert all(isinstance(key, str) and key for key in seen)


@pytest.mark.parametrize("key", [None, "call-1"], ids=["own-key", "given-key"])
def test_a_replaced_context_keeps_calls_apart(key: str | None) -> None:
    """``dataclasses.replace`` of a context keeps the caller's key, and a key the context
    made stays made: calls with the copy still get keys of their own."""
    seen: list[str] = []

    @tool
    async def create(context: ToolContext) -> str:
        """Create something, once per key."""
        seen.append(context.idempotency_key)
        return "ok"

    copy_ = dataclasses.replace(ToolContext(idempotency_key=key), user_id="u-2")
    assert copy_.user_id == "u-2"
    for _ in range(2):
        asyncio.run(create.run({}, context=copy_))
    assert (seen[0] == seen[1]) is (key is not None)
    assert copy_ == dataclasses.replace(ToolContext(idempotency_key=key), user_id="u-2")
