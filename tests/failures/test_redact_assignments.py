"""The separator-driven ``_scrub_assignments`` finds exactly what the forward pattern found.

``_reference_scrub`` is the former implementation (one regular expression tried at the start
of every word), judging names as the fast one does (``credential_parameter`` before ``=``,
``credential_key`` before ``:``), kept here as the specification of the fast one.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tdk._failures.redact import (
    REDACTED,
    SECRET_HEADER_NAMES,
    SECRET_QUERY_NAMES,
    credential_key,
    credential_parameter,
)
from tdk._failures.redact.positions import (
    _HEADER_VALUE,
    _QUERY_VALUE,
    _value_end,
    assignment_spans,
)
from tdk._failures.redact.spans import replace_spans


def _scrub_assignments(text: str) -> str:
    spans = assignment_spans(text, [])
    return replace_spans(text, spans) if spans else text


_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.%-])([A-Za-z0-9_.%-]++)([\"']?)\s*+([:=])\s*+(?:[bBrRuU]{1,2}(?=[\"']))?[\"']?"
)


def _reference_scrub(text: str) -> str:
    pieces: list[str] = []
    done = 0
    for match in _ASSIGNMENT.finditer(text):
        if match.start() < done and match.end(3) < done:
            continue
        name = match[1].lower()
        if "%" in name:
            name = unquote(name)
        if name in SECRET_HEADER_NAMES:
            unquoted = _QUERY_VALUE if match[2] else _HEADER_VALUE  # "Authorization": one value
        elif match[3] == "=" and credential_parameter(name):
            unquoted = _QUERY_VALUE
        elif match[3] == ":" and credential_key(name):
            several_words = not match[2] and any(c in name for c in "-_.")
            unquoted = _HEADER_VALUE if several_words else _QUERY_VALUE
        else:
            continue
        end = _value_end(unquoted, text, match.end())
        if end > match.end():
            if pieces and match.end() == done:
                # A value right after the previous one (``key:key=,``): one marker for both,
                # as redaction joins spans that touch.
                done = end
                continue
            pieces += (text[done : match.end()], REDACTED)
            done = end
    return "".join(pieces) + text[done:] if pieces else text


_NAMES = [
    *sorted(SECRET_HEADER_NAMES | SECRET_QUERY_NAMES),
    *("x", "Key", "api%5Fkey", "error", "X-RapidAPI-Key", "monkey", "primary", "sort_key"),
]
_PIECES = st.one_of(
    st.sampled_from(_NAMES),
    st.sampled_from([":", "=", " ", "  ", "\t", "\n", "'", '"', ",", "}", "&", "#", "%", "-"]),
    st.sampled_from(["(", ")", "[", "]", "{", "))"]),
    st.sampled_from(["\u00a0", "\u2003", "é", "abc", "s3cr3t", "a.b", "1"]),
    st.text(alphabet="ab=:'\" _-%.\n", max_size=6),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=24).map("".join))
@example("access_key:access_key=,")  # two values that touch: one marker
@example("api_key:token=x,password=y")
def test_same_result_as_the_forward_pattern(text: str) -> None:
    assert _scrub_assignments(text) == _reference_scrub(text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_same_result_on_any_text(text: str) -> None:
    assert _scrub_assignments(text) == _reference_scrub(text)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abc\nnext: 1",
        'api_key=\'abc\' token = "def" code=1 "key": "v" \'auth\':x',
        "a=b=c api_key==x key=:y",
        "password :\u00a0'x' api%5Fkey=z Cookie\t:\tc=d; e=f",
        "x=api_key=secret&token=t#frag",
        "session: 1, 'session': 2, session=3",
        ":=leading separators= api_key",
    ],
)
def test_same_result_on_known_shapes(text: str) -> None:
    assert _scrub_assignments(text) == _reference_scrub(text)
