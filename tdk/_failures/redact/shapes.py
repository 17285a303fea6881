"""Layer 3 of redaction: well-known token shapes (``sk-...``, ``ghp_...``, ``AKIA...``, JWTs,
``Bearer ...``), found wherever they are."""

from __future__ import annotations

import re
from typing import Final

from tdk._failures.redact.spans import Span, replace_spans

__all__ = ["TOKEN_HINTS", "TOKEN_SHAPES", "jwt_spans", "scrub_shapes"]

#: Every token shape but the JWT's (:func:`jwt_spans`), as one alternation.
TOKEN_SHAPES = re.compile(
    r"""
      \bBearer\s+[A-Za-z0-9._~+/=-]{8,}
    | \bBasic\s+[A-Za-z0-9+/=]{8,}
    | \bsk-(?:ant-)?[A-Za-z0-9_-]{16,}
    | \bAIza[0-9A-Za-z_-]{35}
    | \b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bxox[abpr]-[A-Za-z0-9-]{10,}
    | \bAKIA[0-9A-Z]{16}\b
    | \b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}
    | \bglpat-[A-Za-z0-9_-]{20,}
    """,
    re.VERBOSE,
)
#: Substrings every token shape contains; text with none of them skips the token pass.
TOKEN_HINTS: Final = ("Bearer", "Basic", "sk-", "AIza", "_", "xox", "AKIA", "glpat-")
#: A JSON Web Token: three base64url segments, the first (a JSON header) starting ``eyJ``.
#: Found from each ``eyJ`` (see :func:`jwt_spans`), not by the alternation above: as one of its
#: branches (``\beyJ...``), every ``eyJ`` of a long run such as ``eyJ-eyJ-...`` was tried as a
#: start, each reading to the end of the run, which was quadratic.
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+")
_JWT_RUN = re.compile(r"[A-Za-z0-9_-]*+")


def jwt_spans(text: str, spans: list[Span]) -> list[Span]:
    """Every JWT in ``text``; what precedes one in its run (``id-eyJ...``) is not part of it.

    A JWT starts at an ``eyJ`` after a word boundary. When the first such ``eyJ`` of a run of
    base64url characters does not start a JWT, no later one in that run does (each has less of
    the run after it, and the same text after the run), so the search resumes after the run.
    """
    at = text.find("eyJ")
    while at >= 0:
        previous = text[at - 1] if at else " "
        if previous.isalnum() or previous == "_":  # inside a word: no boundary here
            at = text.find("eyJ", at + 1)
            continue
        token = _JWT.match(text, at)
        if token is None:
            run = _JWT_RUN.match(text, at)
            assert run is not None  # it matches at least the "eyJ"
            at = text.find("eyJ", run.end())
            continue
        spans.append(token.span())
        at = text.find("eyJ", token.end())
    return spans


def _shape_spans(text: str) -> list[Span]:
    """Where the token shapes of ``text`` are."""
    spans: list[Span] = []
    for hint in TOKEN_HINTS:
        if hint in text:
            spans = [token.span() for token in TOKEN_SHAPES.finditer(text)]
            break
    if "eyJ" in text:
        jwt_spans(text, spans)
    return spans


def scrub_shapes(text: str) -> str:
    """``text`` with its token shapes replaced (and nothing else)."""
    spans = _shape_spans(text)
    return replace_spans(text, spans) if spans else text
