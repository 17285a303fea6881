"""The one place that knows what a secret looks like.

Everything tdk writes for a model, a developer or a log passes through :func:`redact_text`
(free text) or :func:`redact_url` (URLs). Three layers, strongest first:

1. exact values the caller knows are secret (context secrets, the request's credentials):
   :mod:`.exact`, with those of the call running (:mod:`.ambient`);
2. credentials by position (:mod:`.positions`): URL userinfo, and the values under names that
   look like a credential's (:func:`credential_name`, :mod:`.names`: ``Authorization``,
   ``X-RapidAPI-Key``, ``api_key``...) in header lines, queries, JSON and ``(name, value)``
   pairs;
3. well-known token shapes (:mod:`.shapes`: ``sk-...``, ``ghp_...``, ``AKIA...``, JWTs,
   ``Bearer ...``).

Every finder gives spans of the text, and one replacement (:mod:`.spans`) replaces them all:
no finder can hide a credential from another by replacing part of it first. :mod:`.text` puts
the layers together for free text, :mod:`.url` for URLs. The modules import only each other,
and this package nothing else of tdk: the HTTP hook (:mod:`tdk.http`) uses it without the
rest of the error pipeline.
"""

from __future__ import annotations

from tdk._failures.redact.ambient import call_secrets, end_call_secrets
from tdk._failures.redact.exact import SHORTEST_EXACT_SECRET
from tdk._failures.redact.names import (
    SECRET_HEADER_NAMES,
    SECRET_KEYS,
    SECRET_QUERY_NAMES,
    SHORTEST_INFERRED_SECRET,
    credential_key,
    credential_name,
    credential_parameter,
)
from tdk._failures.redact.spans import REDACTED
from tdk._failures.redact.text import encodable, redact_text
from tdk._failures.redact.url import redact_url

__all__ = [
    "REDACTED",
    "SECRET_HEADER_NAMES",
    "SECRET_KEYS",
    "SECRET_QUERY_NAMES",
    "SHORTEST_EXACT_SECRET",
    "SHORTEST_INFERRED_SECRET",
    "call_secrets",
    "credential_key",
    "credential_name",
    "credential_parameter",
    "encodable",
    "end_call_secrets",
    "redact_text",
    "redact_url",
]
