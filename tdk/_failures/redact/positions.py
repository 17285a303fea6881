"""Layer 2 of redaction: credentials by position in free text. The values under names that look
like a credential's (:mod:`.names`) in header lines, queries, JSON and ``name: value`` or
``name=value`` prose (:func:`assignment_spans`); the values of credential-named ``(name,
value)`` pairs, as Python writes header lists (:func:`pair_spans`); and the userinfo of every
URL (:func:`userinfo_spans`). Each finder adds the spans it finds to the list it is given."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final
from urllib.parse import unquote

from tdk._failures.redact.names import JUDGED, credential_key, judge
from tdk._failures.redact.spans import Span

__all__ = ["assignment_spans", "pair_spans", "userinfo_spans"]

#: The authority of a URL, read from just after its ``://`` (see :func:`userinfo_spans`).
_AUTHORITY = re.compile(r"[^/\s?#]*+")
# Every ``name:`` / ``name=`` is found from its separator: the separators are found with
# ``str.find``, and the name is read backwards from each, on the reversed text.
# This finds exactly the matches of the forward pattern
#     (?<![A-Za-z0-9_.%-])([A-Za-z0-9_.%-]++)(["']?)\s*+([:=])\s*+["']?
# (a whole run of name characters, an optional quote, spaces, the separator), which tried a
# match at the start of every word and was several times slower on ordinary prose; a test
# compares the two on generated texts. The name decides whether the value after it goes.
_NAME_BEFORE_REVERSED = re.compile(r"\s*+([\"']?)([A-Za-z0-9_.%-]++)")
_AFTER_SEPARATOR = re.compile(r"\s*+(?:[bBrRuU]{1,2}(?=[\"']))?[\"']?")
_HEADER_VALUE = re.compile(r"[^\r\n\"',}]*+")
_QUERY_VALUE = re.compile(r"[^&\s#'\"<>]*+")
#: A value that opens with a quote runs to its closing quote, commas and spaces included (a
#: backslash escapes one character): ``{'x-api-key': 'k1, k2'}`` is a repeated header.
_QUOTED_VALUE: Final = {
    "'": re.compile(r"(?:\\.|[^\\'])*+"),
    '"': re.compile(r'(?:\\.|[^\\"])*+'),
}


#: Closing brackets, and the opening bracket of each.
_OPENERS: Final = {")": "(", "]": "[", "}": "{"}
#: What may end an unquoted value in prose: closing brackets and punctuation.
_TRAILING: Final = frozenset(")]},.;:!?")


def _value_end(unquoted: re.Pattern[str], text: str, start: int) -> int:
    """Where the credential's value that starts at ``start`` ends: at its closing quote when it
    opens with one (``text[start - 1]``); else where ``unquoted`` stops, but before the first
    closing bracket at its end (among trailing punctuation) that was not opened in it:
    ``(password=hunter2).`` and ``f(key=g(x)),`` keep their last ``)``."""
    quoted = _QUOTED_VALUE.get(text[start - 1])
    if (
        quoted is None
        and unquoted is _QUERY_VALUE  # (a header line runs to its end, brackets or not)
        and start < len(text)
        and text[start] in _BRACKETS
    ):
        return _bracketed_end(text, start)  # ["...", ...], ('...',), {"value": "..."}
    value = (quoted or unquoted).match(text, start)
    assert value is not None  # every value pattern matches the empty string
    end = value.end()
    if quoted is not None or end == start or text[end - 1] not in _TRAILING:
        return end
    tail = end
    while tail > start and text[tail - 1] in _TRAILING:
        tail -= 1
    # Brackets of the value before its tail are counted, not paired: linear, and only the
    # tail's brackets and punctuation can ever be left out of the value.
    body = text[start:tail]
    open_brackets = {
        close: body.count(open_) - body.count(close) for close, open_ in _OPENERS.items()
    }
    for index in range(tail, end):
        char = text[index]
        if char in _OPENERS:
            if open_brackets[char] <= 0:
                return index
            open_brackets[char] -= 1
    return end


#: Opening brackets, and the closing one of each.
_BRACKETS: Final = {"[": "]", "(": ")", "{": "}"}
#: What a bracketed value is read by: its brackets, and the quoted strings whose brackets do
#: not count (each string read from its opening quote by ``_QUOTED_VALUE``).
_BRACKET_OR_QUOTE = re.compile(r"""[][(){}'"]""")


def _bracketed_end(text: str, start: int) -> int:
    """Where a bracketed value (a list, tuple or object) that opens at ``start`` ends: just
    after its matching closing bracket; at the end of the text when it has none, or a string
    in it never closes (a value cut short hides what follows it, and reading to the end once
    keeps every scan linear: each character is read once)."""
    depth = 0
    at = start
    while True:
        found = _BRACKET_OR_QUOTE.search(text, at)
        if found is None:
            return len(text)
        char = found[0]
        if char in _BRACKETS:
            depth += 1
        elif char in _OPENERS:
            depth -= 1
            if depth == 0:
                return found.end()
        else:  # a quoted string: to its closing quote, or the value has no end in sight
            string = _QUOTED_VALUE[char].match(text, found.end())
            assert string is not None  # it matches the empty string
            if string.end() >= len(text):
                return len(text)
            at = string.end() + 1
            continue
        at = found.end()


#: The start of a (name, value) pair as Python writes it, up to the value's opening quote: a
#: repr of a list of header tuples, as httpx shows repeated headers
#: (``Headers([('x-api-key', '...'), ...])``) and ``headers.raw`` gives them (as bytes).
#: Only the pair of a credential name goes on to its value (:func:`pair_spans`): a pair of
#: any other name consumes nothing, so an unbalanced quote in it cannot hide the next pair.
_PAIR_OPENER = re.compile(
    r"""\(\s*b?(?P<q1>['"])(?P<name>[A-Za-z0-9_.-]{1,64})(?P=q1)\s*,\s*b?(?P<q2>['"])"""
)


def _separators(text: str) -> Iterator[int]:
    """Positions of every ':' and '=' in ``text``, in order (``str.find``: far faster than a
    regular expression scanning for either)."""
    colon, equals = text.find(":"), text.find("=")
    while colon >= 0 or equals >= 0:
        if equals < 0 or 0 <= colon < equals:
            yield colon
            colon = text.find(":", colon + 1)
        else:
            yield equals
            equals = text.find("=", equals + 1)


def assignment_spans(text: str, spans: list[Span]) -> list[Span]:
    """The values of credential names before ``:`` or ``=`` (see the comment on
    ``_NAME_BEFORE_REVERSED``), in order, none overlapping another."""
    done = 0
    size = len(text)
    reversed_text = text[::-1]
    for at in _separators(text):
        before = _NAME_BEFORE_REVERSED.match(reversed_text, size - at)
        if before is None or (size - before.end() < done and at + 1 < done):
            continue  # no name, or inside a value already found (but not ending it:
            # in "key=X-Api-Key: k1", the value "X-Api-Key:" ends where another begins)
        name = before[2][::-1].lower()
        if "%" in name:
            name = unquote(name)
        _, header, parameter, key = JUDGED.get(name) or judge(name)
        if header and not before[1]:  # a header line: the value runs to the end of the line
            unquoted = _HEADER_VALUE
        elif header:  # "Authorization": ... (JSON, a dict's repr): one value
            unquoted = _QUERY_VALUE
        elif text[at] == "=":  # api_key=..., key=...
            if not parameter:
                continue
            unquoted = _QUERY_VALUE
        elif not key:  # "key": "id", primary key: 5
            continue
        elif before[1] or not ("-" in name or "_" in name or "." in name):
            unquoted = _QUERY_VALUE  # "api_key": ..., password: ...: one word
        else:  # X-RapidAPI-Key: ...: a header line
            unquoted = _HEADER_VALUE
        after = _AFTER_SEPARATOR.match(text, at + 1)
        assert after is not None  # it matches the empty string
        end = _value_end(unquoted, text, after.end())
        if end > after.end():
            spans.append((after.end(), end))
            done = end
    return spans


def pair_spans(text: str, spans: list[Span]) -> list[Span]:
    """The values of credential-named pairs: each runs to its closing quote, or to the end of
    the text when that is not in sight (a text cut to length, or redacted by windows)."""
    done = 0
    for opener in _PAIR_OPENER.finditer(text):
        if opener.start() < done or not credential_key(opener["name"]):
            continue
        value = _QUOTED_VALUE[opener["q2"]].match(text, opener.end())
        assert value is not None  # it matches the empty string
        if value.end() > opener.end():
            spans.append((opener.end(), value.end()))
            done = value.end()
    return spans


def userinfo_spans(text: str, spans: list[Span]) -> list[Span]:
    """The userinfo of every URL in ``text``.

    Each ``://`` is found with ``str.find`` and read outwards: its authority runs to the first
    ``/``, ``?``, ``#`` or space, and the userinfo to the LAST ``@`` in it (a password may
    itself contain ``@``). Any scheme counts, even none (``://user:pw@host``): a regular
    expression that checked the scheme tried every word of a long run such as ``a.a.a...``
    as its start, each reading to the ``://``, which was quadratic.
    """
    at = text.find("://")
    while at >= 0:
        start = at + 3
        authority = _AUTHORITY.match(text, start)
        assert authority is not None  # it matches the empty string
        sign = text.rfind("@", start, authority.end())
        if sign > start:
            spans.append((start, sign))
        at = text.find("://", at + 1)
    return spans
