"""``tdk serve --http --auth jwt|introspection``: the options saying who may call, checked
before anything is loaded, and the verifier they make (see ``docs/auth.md``).

``--auth jwt --issuer URL --audience AUD [--jwks-url URL]``: JWT access tokens signed by a
key the issuer publishes (its JWKS, found from its metadata when no URL is given).
``--auth introspection --introspection-url URL --issuer URL [--audience AUD]``: opaque
tokens, asked about at the issuer's introspection endpoint with this server's client
credentials, read from the environment (``TDK_INTROSPECTION_CLIENT_ID``,
``TDK_INTROSPECTION_CLIENT_SECRET``). ``--resource-url URL``: the URL clients reach the
server at (behind a proxy), which its protected-resource metadata names.

A served runner with ``user_auth`` also needs the login client its provider's callback signs
the browser in with at the issuer (``TDK_LOGIN_CLIENT_ID``, ``TDK_LOGIN_CLIENT_SECRET``: see
``tdk.hosts._mcp_login``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from tdk.auth._urls import checked_url

if TYPE_CHECKING:
    from tdk._define.toolkit import Toolkit
    from tdk.auth import Verifier
    from tdk.hosts._mcp_auth import Protection

__all__ = ["add_auth_options", "auth_refusal", "login_client", "protection_of"]

#: The environment variables of ``--auth introspection`` (as ``tdk.auth`` names them: this
#: module must not import it before the target is loaded).
_CLIENT_VARIABLES: Final = ("TDK_INTROSPECTION_CLIENT_ID", "TDK_INTROSPECTION_CLIENT_SECRET")
#: The environment variables of the login client of the provider's callback (as
#: ``tdk.hosts._mcp_login`` names them).
_LOGIN_VARIABLES: Final = ("TDK_LOGIN_CLIENT_ID", "TDK_LOGIN_CLIENT_SECRET")


def add_auth_options(serve: argparse.ArgumentParser) -> None:
    """The options of ``tdk serve`` that authenticate callers over HTTP."""
    group = serve.add_argument_group(
        "authentication (with --http; docs/auth.md)",
        "Every request then needs a bearer token of the issuer: a call's user_id is the "
        "token's sub, its scopes and claims are on the ToolContext. A runner with user_auth "
        "needs a login client at the issuer too (TDK_LOGIN_CLIENT_ID, "
        "TDK_LOGIN_CLIENT_SECRET): the provider's callback signs the browser in there.",
    )
    group.add_argument(
        "--auth",
        choices=("jwt", "introspection"),
        help="jwt: JWT access tokens verified with the issuer's keys; introspection: opaque "
        f"tokens asked about at --introspection-url, as the client {_CLIENT_VARIABLES[0]} "
        f"with the secret {_CLIENT_VARIABLES[1]} (both read from the environment)",
    )
    group.add_argument("--issuer", metavar="URL", help="the authorization server (its iss)")
    group.add_argument("--audience", metavar="AUD", help="the aud tokens must name (jwt: required)")
    group.add_argument(
        "--jwks-url",
        metavar="URL",
        help="jwt: where the issuer's keys are (default: the jwks_uri of its metadata)",
    )
    group.add_argument(
        "--introspection-url", metavar="URL", help="introspection: the RFC 7662 endpoint"
    )
    group.add_argument(
        "--resource-url",
        metavar="URL",
        help="the URL clients reach /mcp at, named by the protected-resource metadata "
        "(default: the URL served; give it behind a proxy)",
    )


def auth_refusal(options: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """Why the authentication options cannot serve (a usage error), or None."""
    given = [name for name in _URL_OPTIONS if getattr(options, name) is not None]
    if options.auth is None:
        if given or options.audience is not None:
            return (
                "--issuer, --audience, --jwks-url, --introspection-url and --resource-url "
                "go with --auth"
            )
        return None
    if not options.http:
        return "--auth authenticates HTTP requests: serve with --http"
    needed = {"jwt": ("issuer", "audience"), "introspection": ("introspection_url", "issuer")}
    missing = [name for name in needed[options.auth] if not getattr(options, name)]
    if missing:
        flags = " and ".join("--" + name.replace("_", "-") for name in missing)
        return f"--auth {options.auth} needs {flags}"
    other = "introspection_url" if options.auth == "jwt" else "jwks_url"
    if getattr(options, other) is not None:
        return f"--{other.replace('_', '-')} does not go with --auth {options.auth}"
    for name in given:
        problem = _url_problem(getattr(options, name), name)
        if problem is not None:
            return problem
    if options.auth == "introspection":
        unset = [name for name in _CLIENT_VARIABLES if not environ.get(name)]
        if unset:
            return (
                "--auth introspection reads this server's client credentials from the "
                f"environment: set {' and '.join(unset)}"
            )
    return None


def protection_of(
    options: argparse.Namespace, toolkit: Toolkit, environ: Mapping[str, str]
) -> Protection | None:
    """How the options (checked by :func:`auth_refusal`) protect the toolkit's server, or
    None without ``--auth``."""
    from tdk.hosts._mcp_auth import Protection, scopes_needed

    verifier = _verifier_of(options, environ)
    if verifier is None:
        return None
    needs = scopes_needed(item.definition for item in toolkit)
    return Protection(verifier, options.resource_url, needs, login_client(environ))


def login_client(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The login client of the provider's callback (its id and secret, from
    ``TDK_LOGIN_CLIENT_ID`` and ``TDK_LOGIN_CLIENT_SECRET``: see ``tdk.hosts._mcp_login``),
    or None when either is not set."""
    client_id, secret = (environ.get(name) for name in _LOGIN_VARIABLES)
    return (client_id, secret) if client_id and secret else None


def _verifier_of(options: argparse.Namespace, environ: Mapping[str, str]) -> Verifier | None:
    """The verifier the options ask for, or None."""
    from tdk.auth import IntrospectionVerifier, JWTVerifier

    if options.auth == "jwt":
        return JWTVerifier(
            issuer=options.issuer, audience=options.audience, jwks_url=options.jwks_url
        )
    if options.auth == "introspection":
        return IntrospectionVerifier.from_environment(
            options.introspection_url,
            issuer=options.issuer,
            audience=options.audience,
            environ=environ,
        )
    return None


#: The options that take a URL.
_URL_OPTIONS: Final = ("issuer", "jwks_url", "introspection_url", "resource_url")


def _url_problem(url: str, name: str) -> str | None:
    """Why ``--name URL`` cannot be used, or None. The authorization server's URLs are
    ``https``, or ``http`` on loopback (keys or answers read over plain HTTP from another
    machine could be swapped on the way); the resource URL is any http(s) URL (it is only
    named)."""
    try:
        checked_url(url, "--" + name.replace("_", "-"), plain_http=name == "resource_url")
    except ValueError as wrong:
        return str(wrong)
    return None
