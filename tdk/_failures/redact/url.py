"""The redaction of URLs (:func:`redact_url`): no userinfo or fragment, and the values of
credential parameters, exact secrets and token shapes replaced; every other part kept."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote_plus

from tdk._failures.redact.ambient import CALL_SECRETS
from tdk._failures.redact.exact import scrub_exact
from tdk._failures.redact.names import credential_parameter
from tdk._failures.redact.shapes import scrub_shapes
from tdk._failures.redact.spans import REDACTED
from tdk._failures.redact.text import encodable

__all__ = ["redact_url"]


_PATH_PARAMETER = re.compile(r";(?P<name>[^;=/?#]*)=(?P<value>[^;/?#]*)")


def redact_url(url: str, secrets: Iterable[str] = ()) -> str:
    """Return ``url`` without userinfo or fragment, and with every credential in it replaced.

    The value of a query parameter, or of a path parameter (``;jsessionid=...``), is replaced
    when the parameter's name (decoded) looks like a credential's
    (:func:`credential_parameter`: ``api_key``, ``X-Amz-Signature``, ``sig``...) or the value
    (decoded) has a token shape; other values are kept (``?city=Oslo&page=2``). Exact
    ``secrets`` (with those of the call running) and token shapes are replaced anywhere, the
    path included (``/bot<token>/``). Plain string work, no parsing: it runs on every
    classified upstream error.
    """
    ambient = CALL_SECRETS.get()
    if ambient and secrets is not ambient:
        secrets = (*secrets, *ambient) if secrets else ambient
    if secrets:  # first, on the whole URL: a secret may hold a "#", a "?" or an "@"
        url = scrub_exact(url, secrets)
    base, has_query, query = url.partition("#")[0].partition("?")
    if "@" in base:
        scheme, has_scheme, rest = base.partition("://")
        authority, slash, path = rest.partition("/") if has_scheme else ("", "", base)
        if "@" in authority:
            base = f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
    if ";" in base:
        base = _PATH_PARAMETER.sub(_path_parameter, base)
    if has_query:
        pairs = []
        for pair in query.split("&"):
            if pair:
                name, equals, value = pair.partition("=")
                shown = REDACTED if _credential_value(name, value) else value
                pairs.append(f"{name}{equals}{shown}")
        if pairs:
            base = f"{base}?{'&'.join(pairs)}"
    base = scrub_shapes(base)
    return encodable(base)


def _path_parameter(match: re.Match[str]) -> str:
    if _credential_value(match["name"], match["value"]):
        return f";{match['name']}={REDACTED}"
    return match[0]


def _credential_value(name: str, value: str) -> bool:
    """Whether the value of the parameter ``name`` (both as sent in a URL) is a credential."""
    if not value:
        return False
    if credential_parameter(unquote_plus(name) if "%" in name or "+" in name else name):
        return True
    decoded = unquote_plus(value) if "%" in value or "+" in value else value
    return scrub_shapes(decoded) != decoded
