"""The one place that knows what a secret looks like.

Everything tdk writes for a model, a developer or a log passes through :func:`redact_text`
(free text) or :func:`redact_url` (URLs). Three layers, strongest first:

1. exact values the caller knows are secret (context secrets, the request's credentials);
2. credentials by position: URL userinfo, and the values under names that look like a
   credential's (:func:`credential_name`: ``Authorization``, ``X-RapidAPI-Key``,
   ``api_key``...) in header lines, queries, JSON and ``(name, value)`` pairs;
3. well-known token shapes (``sk-...``, ``ghp_...``, ``AKIA...``, JWTs, ``Bearer ...``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from contextvars import ContextVar, Token
from itertools import compress
from typing import Final
from urllib.parse import unquote, unquote_plus

REDACTED: Final = "[REDACTED]"
#: Where a credential lies in a text: (start, end), as ``re.Match.span()`` gives it.
Span = tuple[int, int]

#: Query parameter names whose values are credentials (compared case-insensitively), beside
#: those :func:`credential_name` finds (``code``, ``sig``, Azure SAS ``se``/``sv``,
#: OpenWeatherMap's ``appid``...).
SECRET_QUERY_NAMES: Final = frozenset(
    name.lower()
    for name in (
        "api_key", "apikey", "api-key", "key", "access_token", "token", "auth", "client_secret",
        "code", "refresh_token", "id_token", "password", "passwd", "pwd", "secret", "signature",
        "sig", "se", "sv", "session", "jwt", "x-amz-signature", "x-amz-credential",
        "x-amz-security-token", "x-goog-signature", "x-goog-credential", "private_token",
        "auth_token", "access_key", "secret_key", "api_secret", "private_key", "sessionid",
        "jsessionid", "client_assertion", "appid",
    )
)  # fmt: skip

#: Query names too common as ordinary words or fields ("error code: 404", {"key": "id"}) to
#: count anywhere but right before '=' in a URL-like text.
_AMBIGUOUS_NAMES: Final = frozenset(("code", "key", "auth", "sig", "se", "sv", "session"))


#: Header names whose values are credentials (lower-case).
SECRET_HEADER_NAMES: Final = frozenset(
    (
        "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
        "x-goog-api-key", "x-auth-token", "x-shopify-access-token", "private-token",
        "x-amz-security-token", "ocp-apim-subscription-key",
    )
)  # fmt: skip

#: Keys of structured data (``details``, JSON) whose values are credentials wherever they are.
#: :func:`credential_key` says the same of any key, by the rule of :func:`credential_name`.
SECRET_KEYS: Final = (SECRET_HEADER_NAMES | SECRET_QUERY_NAMES) - _AMBIGUOUS_NAMES

#: Words that make a name a credential's when one of the name's words is, or ends with, one of
#: them (``X-Vault-Token``, ``accessToken``, ``Stripe-Signature``, ``oauth``).
CREDENTIAL_WORDS: Final = (
    "token", "secret", "password", "passwd", "passphrase", "pwd", "auth", "authorization",
    "signature", "session", "sessionid", "sessid", "cookie", "credential", "credentials", "jwt",
    "bearer", "csrf", "xsrf",
)  # fmt: skip
#: ``key`` is a credential word only as a whole word (``X-RapidAPI-Key``, ``private_key``), or
#: at the end of a word after one of these (``apikey``, ``accessKey``): too many other words end
#: with it (``monkey``, ``hockey``, ``primaryKey``, ``sortkey``).
KEY_QUALIFIERS: Final = (
    "api", "access", "secret", "private", "auth", "pass", "app", "client", "master", "account",
    "subscription", "license", "signing", "session",
)  # fmt: skip
#: What a word of a credential name may end with (``key`` alone is checked apart).
_ENDINGS: Final = CREDENTIAL_WORDS + tuple(qualifier + "key" for qualifier in KEY_QUALIFIERS)
_WORD_SEPARATOR = re.compile(r"[-_.\s\[\]]")
#: What each name (lower-case) was judged to be: (has a credential word, is a well-known
#: header, is a credential parameter, is a credential key; see :func:`_judge`). Short names
#: only, and emptied when full: the names every error repeats (``KeyError``, field names)
#: cost one lookup.
_JUDGED: dict[str, tuple[bool, bool, bool, bool]] = {}
_JUDGED_MAX: Final = 4096
#: Values of names that only :func:`credential_name` marks (not the fixed lists above) are
#: scrubbed by exact value from this length on: ``X-Session-Affinity: true`` must not scrub
#: every "true" from a text.
SHORTEST_INFERRED_SECRET: Final = 8


def credential_name(name: str) -> bool:
    """Whether ``name`` (of a header, a parameter, a key) looks like a credential's.

    It does when one of its words (split on ``-``, ``_``, ``.``, spaces and brackets, compared
    case-insensitively) is, or ends with, a word of :data:`CREDENTIAL_WORDS`, or is ``key``
    (see :data:`KEY_QUALIFIERS`): ``X-RapidAPI-Key``, ``DD-API-KEY``, ``apikey``,
    ``X-CSRF-Token``, ``Stripe-Signature``, ``client_secret``; not ``monkey``, ``author`` or
    ``max_tokens``. A name with such a word among others counts too (``token_type``,
    ``Idempotency-Key``): a value hidden for nothing costs less than a credential shown.
    """
    return _judge(name.lower())[0]


def _judge(lowered: str) -> tuple[bool, bool, bool, bool]:
    """What the lower-case name ``lowered`` is: (has a credential word, is a well-known header,
    is a credential parameter, is a credential key)."""
    verdict = _JUDGED.get(lowered)
    if verdict is not None:
        return verdict
    word = False
    for part in _WORD_SEPARATOR.split(lowered):
        if part.endswith(_ENDINGS) or part == "key":
            word = True
            break
    verdict = (
        word,
        lowered in SECRET_HEADER_NAMES,
        word or lowered in SECRET_QUERY_NAMES,
        lowered not in _AMBIGUOUS_NAMES and (word or lowered in SECRET_KEYS),
    )
    if len(lowered) <= 64:
        if len(_JUDGED) >= _JUDGED_MAX:
            _JUDGED.clear()
        _JUDGED[lowered] = verdict
    return verdict


def credential_key(name: str) -> bool:
    """Whether the value under the key ``name`` of structured data (``details``, a JSON object,
    a ``(name, value)`` pair) is a credential: :func:`credential_name`, except for the bare
    words ``key``, ``auth`` and ``session`` (``{"key": "id"}``, ``"session": 3``); and the
    names of :data:`SECRET_KEYS`."""
    return _judge(name.lower())[3]


def credential_parameter(name: str) -> bool:
    """Whether the value of the query or path parameter ``name`` (decoded) is a credential:
    :func:`credential_name`, and the names of :data:`SECRET_QUERY_NAMES` (``code``, ``sig``,
    Azure SAS ``se``/``sv``...)."""
    return _judge(name.lower())[2]


#: Exact secret values shorter than this are not scrubbed (see :func:`redact_text`).
SHORTEST_EXACT_SECRET: Final = 4
#: Characters read past a cut so that a secret straddling it is still recognised whole.
_REDACTION_LOOKAHEAD: Final = 4096

#: The authority of a URL, read from just after its ``://`` (see :func:`_userinfo_spans`).
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


_TOKEN_SHAPES = re.compile(
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
_TOKEN_HINTS: Final = ("Bearer", "Basic", "sk-", "AIza", "_", "xox", "AKIA", "glpat-")
#: A JSON Web Token: three base64url segments, the first (a JSON header) starting ``eyJ``.
#: Found from each ``eyJ`` (see :func:`_jwt_spans`), not by the alternation above: as one of its
#: branches (``\beyJ...``), every ``eyJ`` of a long run such as ``eyJ-eyJ-...`` was tried as a
#: start, each reading to the end of the run, which was quadratic.
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{5,}+")
_JWT_RUN = re.compile(r"[A-Za-z0-9_-]*+")
#: The start of a (name, value) pair as Python writes it, up to the value's opening quote: a
#: repr of a list of header tuples, as httpx shows repeated headers
#: (``Headers([('x-api-key', '...'), ...])``) and ``headers.raw`` gives them (as bytes).
#: Only the pair of a credential name goes on to its value (:func:`_pair_spans`): a pair of
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


def _assignment_spans(text: str, spans: list[Span]) -> list[Span]:
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
        _, header, parameter, key = _JUDGED.get(name) or _judge(name)
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


#: The exact secret values of the tool call running in this context (its ``ToolContext``'s
#: secrets and auth token), set by the executor for the call's duration (see
#: :func:`call_secrets`). Every redaction made during the call scrubs them as well: texts tdk
#: builds deep inside the call (the HTTP hook's errors, httpx's own log lines) do not have to
#: be handed the context to be safe.
_CALL_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("tdk_call_secrets", default=())


def call_secrets(secrets: tuple[str, ...]) -> Token[tuple[str, ...]]:
    """Add ``secrets`` to the current call's, in this context (a call made inside another
    keeps the outer call's too); undo with :func:`end_call_secrets`.

    Worker threads the call starts with the context copied (as the executor's do) see them.
    """
    outer = _CALL_SECRETS.get()
    return _CALL_SECRETS.set((*outer, *secrets) if outer else secrets)


def end_call_secrets(token: Token[tuple[str, ...]]) -> None:
    """Restore the secrets that were current before :func:`call_secrets` returned ``token``."""
    try:
        _CALL_SECRETS.reset(token)
    except ValueError:  # a call closed in another context (its loop is gone): nothing to undo
        return


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
    ambient = _CALL_SECRETS.get()
    if ambient and secrets is not ambient:  # (the same tuple: the running call's own)
        secrets = (*secrets, *ambient) if secrets else ambient
    if secrets:  # exact values first, over the whole text (nothing is cut yet)
        text = _scrub_exact(text, secrets)
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


def _scrub_exact(text: str, secrets: Iterable[str]) -> str:
    """Every character covered by an occurrence of a secret (of at least
    ``SHORTEST_EXACT_SECRET`` characters) replaced, each run of them (overlapping occurrences,
    of one secret or of several) by one marker, in time bounded by a few passes over the text.

    First, which secrets occur: found with ``str``'s own search (in C), one secret after the
    other; or, where that would cost more (thousands of secrets, a long text), in one pass
    over the text with an index of the secrets (:func:`_found_in_one_pass`). Many secrets get
    a plan, built once for the secrets of a call: their last characters to search for first
    (a short search is cheap in C), and the index. Then where they occur
    (:func:`_occurrences`)."""
    if not isinstance(secrets, tuple):
        secrets = tuple(secrets)
    found = _found_by_search(text, secrets) if len(secrets) < _PLANNED else _found(text, secrets)
    return _replace(text, _occurrences(text, found)) if found else text


def _found(text: str, secrets: tuple[object, ...]) -> list[str]:
    """The secrets that occur in ``text``, for many secrets (see :class:`_Plan`): by the way
    estimated to cost least (in nanoseconds, as measured here). A short search per secret (a
    call, and a scan in C at about 4 characters a nanosecond); one pass in Python with the
    index (and its building, the first time); or, when the secrets have few distinct lengths,
    one pass in C per length (:func:`_pieces`). The one pass with the index gives up past a
    few passes' worth of work (groups of secrets of many lengths), and the cheaper of the
    other two decides."""
    plan = _plan_of(secrets)
    size = len(text)
    search_cost = len(plan.secrets) * (100 + size // 4)
    lengths_cost = sum(size * (190 + length // 4) for length in plan.by_length)
    pass_cost = size * 150 + (0 if plan.index is not None else len(plan.secrets) * 2_000)
    if pass_cost < min(search_cost, lengths_cost):
        found = _found_in_one_pass(text, plan)
        if found is not None:
            return found
    if lengths_cost < search_cost:
        return [
            secret
            for length, group in plan.by_length.items()
            if length <= size
            for secret in group.intersection(_pieces(text, length))
        ]
    candidates = list(compress(plan.secrets, map(text.__contains__, plan.probes)))
    if len(candidates) > _PLANNED and size < _SHORT_SEARCH_TEXT:
        # str's own search of a needle under 100 characters in a text under 30,000 can take
        # time n * m (a text repeating what the needles repeat): the short candidates are
        # found by a pass per length instead (fewer than 100 lengths: bounded).
        short: dict[int, set[str]] = {}
        for secret in candidates:
            if len(secret) < _SHORT_SEARCH_NEEDLE:
                short.setdefault(len(secret), set()).add(secret)
        found = [s for s in candidates if len(s) >= _SHORT_SEARCH_NEEDLE and s in text]
        for length, group in short.items():
            found += group.intersection(_pieces(text, length))
        return found
    return [secret for secret in candidates if secret in text]


#: Below these (text, needle) lengths, str's own search is the simple one, which can take
#: time n * m on periodic input (CPython's ``fastsearch``); above either, it is linear.
_SHORT_SEARCH_TEXT: Final = 30_000
_SHORT_SEARCH_NEEDLE: Final = 100


def _pieces(text: str, length: int) -> Iterator[str]:
    """Every ``length`` characters of ``text``, at each position in turn (made in C)."""
    ends = range(length, len(text) + 1)
    return map(text.__getitem__, map(slice, range(len(ends)), ends))


def _found_by_search(text: str, secrets: tuple[str, ...]) -> list[str]:
    """The secrets that occur in ``text``, each once."""
    try:  # searched for in C (map and compress call str's own search)
        found = compress(secrets, map(text.__contains__, secrets))
        return [s for s in dict.fromkeys(found) if len(s) >= SHORTEST_EXACT_SECRET]
    except TypeError:  # something that is not text among them (unhashable, even)
        usable = [s for s in secrets if isinstance(s, str) and len(s) >= SHORTEST_EXACT_SECRET]
        return [s for s in dict.fromkeys(usable) if s in text]


def _found_in_one_pass(text: str, plan: _Plan) -> list[str] | None:
    """The secrets that occur in ``text`` (enough of them: one at each position where some
    does, the longest), found in one pass: each position's first characters are looked up in
    the index of the secrets, and the lengths of the secrets there tried. None if that costs
    more than a few passes over the text (many long secrets repeating what the text repeats):
    the search then decides."""
    width, index = plan.indexed()
    size = len(text)
    budget = 8.0 * size  # positions' worth of work: a piece tried costs 1/2 + length/600
    found: dict[str, None] = {}
    get = index.get
    for position in range(size - width + 1):
        group = get(text[position : position + width])
        if group is not None:
            lengths, members = group
            for length in lengths:  # longest first: it covers the others found here
                if position + length <= size:
                    budget -= 0.5 + length / 600
                    piece = text[position : position + length]
                    if piece in members:
                        found[piece] = None
                        break
            if budget < 0:
                return None
    return list(found)


def _occurrences(text: str, found: list[str]) -> list[Span]:
    """Where each of ``found`` occurs (overlapping occurrences too), with ``str``'s own search.
    Past a few passes' worth of work (a secret that repeats itself, in a text that repeats it;
    thousands of secrets found), by the cheaper of two linear ways: a pass in C per distinct
    length of the secrets found, or one pass for all of them (Aho-Corasick), whose automaton
    costs about a microsecond per character of the secrets."""
    spans: list[Span] = []
    size = len(text)
    budget = 30 * size + 5_000_000  # estimated nanoseconds (a search: 100 + a length / 2)
    for secret in found:
        start = text.find(secret)
        while start >= 0:
            spans.append((start, start + len(secret)))
            budget -= 100 + len(secret) // 2
            if budget < 0:
                return _occurrences_in_passes(text, found)
            start = text.find(secret, start + 1)
        budget -= size // 8  # the search that found no more
    return spans


def _occurrences_in_passes(text: str, found: list[str]) -> list[Span]:
    """Where the secrets ``found`` occur, by the cheaper of a pass in C per length and
    Aho-Corasick (see :func:`_occurrences`)."""
    by_length: dict[int, set[str]] = {}
    for secret in found:
        by_length.setdefault(len(secret), set()).add(secret)
    size = len(text)
    lengths_cost = sum(size * (190 + length // 4) for length in by_length)
    automaton_cost = sum(map(len, found)) * 1_000 + size * 300
    if automaton_cost <= lengths_cost:
        return _aho_corasick(text, found)
    spans: list[Span] = []
    for length, group in by_length.items():
        starts = compress(range(size), map(group.__contains__, _pieces(text, length)))
        spans += _runs(starts, length)
    return spans


def _runs(starts: Iterable[int], length: int) -> list[Span]:
    """The runs covered by occurrences of ``length`` characters at ``starts`` (ascending)."""
    runs: list[Span] = []
    for start in starts:
        if runs and start <= runs[-1][1]:  # overlaps or touches the run before
            runs[-1] = (runs[-1][0], start + length)
        else:
            runs.append((start, start + length))
    return runs


def _aho_corasick(text: str, secrets: list[str]) -> list[Span]:
    """The runs of ``text`` covered by occurrences of ``secrets``, in one pass: Aho-Corasick,
    in time linear in the length of the text plus that of the secrets (only the few found)."""
    # The trie of the secrets; ``longest[node]``: the longest secret ending at ``node``.
    goto: list[dict[str, int]] = [{}]
    longest = [0]
    for secret in secrets:
        node = 0
        for char in secret:
            child = goto[node].get(char)
            if child is None:
                child = len(goto)
                goto[node][char] = child
                goto.append({})
                longest.append(0)
            node = child
        longest[node] = len(secret)
    # Failure links, breadth first: the longest proper suffix of a node's text in the trie.
    fail = [0] * len(goto)
    queue = list(goto[0].values())
    for node in queue:  # (the list grows as it is walked)
        for char, child in goto[node].items():
            queue.append(child)
            back = fail[node]
            while back and char not in goto[back]:
                back = fail[back]
            fail[child] = goto[back].get(char, 0)
            longest[child] = max(longest[child], longest[fail[child]])
    runs: list[Span] = []
    node = 0
    for index, char in enumerate(text):
        while node and char not in goto[node]:
            node = fail[node]
        node = goto[node].get(char, 0)
        if longest[node]:
            start = index + 1 - longest[node]
            while runs and runs[-1][1] >= start:  # overlaps or touches the run before: one
                start = min(start, runs.pop()[0])
            runs.append((start, index + 1))
    return runs


#: From this many secrets on, a call's secrets get a plan (:class:`_Plan`).
_PLANNED: Final = 64
#: Characters of a secret searched for first (its last ones: the first are often a prefix
#: that many share, ``ghp_``, ``sk_live_``).
_PROBE: Final = 8
#: Index = (width, by the first ``width`` characters: the lengths of the secrets starting so,
#: longest first, and the secrets).
_Index = tuple[int, dict[str, tuple[tuple[int, ...], frozenset[str]]]]


class _Plan:
    """How to find many secrets: the usable ones (text of at least ``SHORTEST_EXACT_SECRET``
    characters, each once), what to search for first for each, and, once a long text asks
    for it, an index by first characters."""

    __slots__ = ("_lock", "by_length", "index", "probes", "secrets")

    def __init__(self, secrets: tuple[object, ...]) -> None:
        usable = dict.fromkeys(
            s for s in secrets if isinstance(s, str) and len(s) >= SHORTEST_EXACT_SECRET
        )
        self.secrets: tuple[str, ...] = tuple(usable)
        self.probes = [s[-_PROBE:] for s in self.secrets]
        grouped: dict[int, list[str]] = {}
        for secret in self.secrets:
            grouped.setdefault(len(secret), []).append(secret)
        self.by_length = {length: frozenset(group) for length, group in grouped.items()}
        """The secrets by length."""
        self.index: _Index | None = None
        self._lock = threading.Lock()

    def indexed(self) -> _Index:
        """The index (built on first use)."""
        with self._lock:  # (worker threads redact too)
            if self.index is None:
                width = min(16, min(map(len, self.secrets), default=SHORTEST_EXACT_SECRET))
                groups: dict[str, set[str]] = {}
                for secret in self.secrets:
                    groups.setdefault(secret[:width], set()).add(secret)
                self.index = (
                    width,
                    {
                        head: (
                            tuple(sorted({len(s) for s in group}, reverse=True)),
                            frozenset(group),
                        )
                        for head, group in groups.items()
                    },
                )
            return self.index


#: The plans of the last few tuples of secrets, by identity (each with its tuple, which
#: keeps the identity from being reused).
_PLANS: dict[int, tuple[tuple[object, ...], _Plan]] = {}
_KEPT_PLANS: Final = 4
_PLANS_LOCK: Final = threading.Lock()


def _plan_of(secrets: tuple[object, ...]) -> _Plan:
    kept = _PLANS.get(id(secrets))
    if kept is not None and kept[0] is secrets:  # (else a reused id)
        return kept[1]
    plan = _Plan(secrets)
    with _PLANS_LOCK:
        if len(_PLANS) >= _KEPT_PLANS:
            _PLANS.pop(next(iter(_PLANS)))  # the oldest
        _PLANS[id(secrets)] = (secrets, plan)
    return plan


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


def _pair_spans(text: str, spans: list[Span]) -> list[Span]:
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


def _jwt_spans(text: str, spans: list[Span]) -> list[Span]:
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


def _userinfo_spans(text: str, spans: list[Span]) -> list[Span]:
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


def _shape_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for hint in _TOKEN_HINTS:
        if hint in text:
            spans = [token.span() for token in _TOKEN_SHAPES.finditer(text)]
            break
    if "eyJ" in text:
        _jwt_spans(text, spans)
    return spans


def _scrub_shapes(text: str) -> str:
    spans = _shape_spans(text)
    return _replace(text, spans) if spans else text


def _redact_positions_and_shapes(text: str) -> str:
    """``text`` with its credentials by position and its token shapes replaced.

    Every finder reads the same text, and what any of them finds is replaced (overlapping finds
    as one): none can hide a credential from another by replacing part of it first, as the
    token shape ``Bearer X-Api-Key`` would hide the header line ``X-Api-Key: k1`` from the
    finder of header lines.
    """
    # Each finder adds what it finds to the list it is given, and returns it. (No list until a
    # finder runs, and _shape_spans inline: this runs for every text.)
    spans: list[Span] | None = None
    for hint in _TOKEN_HINTS:
        if hint in text:
            spans = [token.span() for token in _TOKEN_SHAPES.finditer(text)]
            break
    if "eyJ" in text:
        spans = _jwt_spans(text, spans or [])
    if "(" in text and ("'" in text or '"' in text):
        spans = _pair_spans(text, spans or [])
    if "://" in text:
        spans = _userinfo_spans(text, spans or [])
    if "=" in text or ":" in text:
        spans = _assignment_spans(text, spans or [])
    return _replace(text, spans) if spans else text


def _replace(text: str, spans: list[Span]) -> str:
    """``text`` with each run of characters covered by spans (start, end) replaced by one
    marker: spans that overlap or touch make one run."""
    spans.sort()
    pieces: list[str] = []
    done = 0
    start, end = spans[0]
    for next_start, next_end in spans:
        if next_start <= end:  # overlaps or touches (the first span overlaps itself)
            end = max(end, next_end)
            continue
        pieces += (text[done:start], REDACTED)
        done = end
        start, end = next_start, next_end
    pieces += (text[done:start], REDACTED)
    return "".join(pieces) + text[end:]


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
    ambient = _CALL_SECRETS.get()
    if ambient and secrets is not ambient:
        secrets = (*secrets, *ambient) if secrets else ambient
    if secrets:  # first, on the whole URL: a secret may hold a "#", a "?" or an "@"
        url = _scrub_exact(url, secrets)
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
    base = _scrub_shapes(base)
    return base if base.isascii() else _SURROGATE.sub("\ufffd", base)


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
    return _scrub_shapes(decoded) != decoded
