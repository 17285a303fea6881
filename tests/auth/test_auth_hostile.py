"""Acting as the user against hostile input (issue 27, red team): ``requires_auth=`` given
objects that are not what ``with_scopes`` makes, a token endpoint answering what no
provider should, and a refresh slower than the store's lock is held."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _oauth_provider_server import OAuthProviderServer, provider_for

from tdk import ToolContext, ToolDefinitionError, tool
from tdk.auth import AuthRequirement, OAuthProvider


@pytest.fixture
def server() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as running:
        yield running


class _Scope(str):
    """A scope that is text only by inheritance (its comparisons may be anything)."""

    __slots__ = ()


class _Unlistable:
    """Scopes that raise when listed."""

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("not listed")


HOSTILE_SCOPES = [
    pytest.param("repo", id="a-string"),
    pytest.param(5, id="an-int"),
    pytest.param(None, id="none"),
    pytest.param(["repo"], id="a-list"),
    pytest.param(_Unlistable(), id="raises-when-listed"),
    pytest.param((_Scope("repo"),), id="a-str-subclass"),
]


@pytest.mark.parametrize("scopes", HOSTILE_SCOPES)
def test_requires_auth_with_scopes_that_are_not_a_tuple_of_strings_is_a_definition_error(
    server: OAuthProviderServer, scopes: Any
) -> None:
    """``AuthRequirement(provider, scopes)`` made by hand with scopes that are not a tuple
    of plain strings: a ToolDefinitionError naming the problem (never ``r``, ``e``, ``p``,
    ``o`` as four scopes, nor another exception)."""
    requirement = AuthRequirement(provider_for(server), scopes)
    with pytest.raises(ToolDefinitionError) as raised:

        @tool(requires_auth=requirement)
        def my_repos(context: ToolContext) -> int:
            """The user's repositories."""
            return 0

    kinds = {problem["kind"] for problem in raised.value.details["problems"]}
    assert kinds == {"invalid_auth"}
    assert "requires_auth=" in str(raised.value)


def test_a_provider_subclass_is_a_definition_error(server: OAuthProviderServer) -> None:
    """A subclass of OAuthProvider (its equality, its hash may be anything) is refused."""
    base = provider_for(server)

    class Provider(OAuthProvider):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("compared")

        __hash__ = OAuthProvider.__hash__

    fields = {name: getattr(base, name) for name in OAuthProvider.__dataclass_fields__}
    with pytest.raises(ToolDefinitionError):

        @tool(requires_auth=Provider(**fields).with_scopes("repo"))
        def my_repos(context: ToolContext) -> int:
            """The user's repositories."""
            return 0
