"""The redaction of free text (:func:`redact_text`): the three layers over one text, cut to a
limit after redaction when asked; and :func:`encodable`, the one repair every text tdk writes
gets."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from tdk._failures.redact.ambient import CALL_SECRETS
from tdk._failures.redact.exact import scrub_exact
from tdk._failures.redact.positions import assignment_spans, pair_spans, userinfo_spans
from tdk._failures.redact.shapes import TOKEN_HINTS, TOKEN_SHAPES, jwt_spans
from tdk._failures.redact.spans import Span, replace_spans

__all__ = ["encodable", "redact_text"]

#: Characters read past a cut so that a secret straddling it is still recognised whole.
_REDACTION_LOOKAHEAD: Final = 4096


def redact_text(text: str, secrets: Iterable[str] = (), *, limit: int | None = None) -> str:
    """Return ``text`` with every known secret, positional credential and token shape replaced.

    ``secrets`` are exact values to scrub (longest first, so that a secret containing another
    is scrubbed whole), together with those of the tool call running in this context. Values
    shorter than four characters are ignored: scrubbing ``"a"`` would destroy the text without
    protecting anything. With ``limit``, the result is cut to that many characters, with a
    marker saying how much was cut; the cut happens after redaction, so a secret that straddles
    the limit is never half-kept. Lone surrogates (which an upstream's ``\\ud800`` escape or a
    file name read with ``surrogateescape`` can leave) become U+FFFD: the result encodes as
    UTF-8, as every JSON writer and log handler needs.
    """
    ambient = CALL_SECRETS.get()
    if ambient and secrets is not ambient:  # (the same tuple: the running call's own)
        secrets = (*secrets, *ambient) if secrets else ambient
    if secrets:  # exact values first, over the whole text (nothing is cut yet)
        text = scrub_exact(text, secrets)
    if limit is not None and len(text) > limit:
        text = _redact_head(text, limit)
    else:
        text = _redact_positions_and_shapes(text)
    return encodable(text)


#: A UTF-16 surrogate on its own, which no UTF-8 text can hold.
_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that it encodes as UTF-8 (the
    same ``text`` when it holds none)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _redact_head(text: str, limit: int) -> str:
    """The first ``limit`` characters of the redacted ``text``, without redacting all of it.

    Only a window is redacted. Replacements shorten the text, pulling characters from further
    on under the limit; the window grows until every character kept lies at least
    ``_REDACTION_LOOKAHEAD`` characters before its end, so that any credential starting there
    was seen whole by the patterns.
    """
    window = limit + _REDACTION_LOOKAHEAD
    while True:
        head = text[:window]
        redacted = _redact_positions_and_shapes(head)
        shrunk = len(head) - len(redacted)
        if window >= len(text) or limit + shrunk + _REDACTION_LOOKAHEAD <= window:
            break
        window *= 2
    if len(redacted) <= limit and window >= len(text):
        return redacted
    return f"{redacted[:limit]}... [{len(text) - limit} more characters]"


def _redact_positions_and_shapes(text: str) -> str:
    """``text`` with its credentials by position and its token shapes replaced.

    Every finder reads the same text, and what any of them finds is replaced (overlapping finds
    as one): none can hide a credential from another by replacing part of it first, as the
    token shape ``Bearer X-Api-Key`` would hide the header line ``X-Api-Key: k1`` from the
    finder of header lines.
    """
    # Each finder adds what it finds to the list it is given, and returns it. (No list until a
    # finder runs, and the token shapes' own pass inline: this runs for every text.)
    spans: list[Span] | None = None
    for hint in TOKEN_HINTS:
        if hint in text:
            spans = [token.span() for token in TOKEN_SHAPES.finditer(text)]
            break
    if "eyJ" in text:
        spans = jwt_spans(text, spans or [])
    if "(" in text and ("'" in text or '"' in text):
        spans = pair_spans(text, spans or [])
    if "://" in text:
        spans = userinfo_spans(text, spans or [])
    if "=" in text or ":" in text:
        spans = assignment_spans(text, spans or [])
    return replace_spans(text, spans) if spans else text
