"""Layer 1 of redaction: exact values the caller knows are secret (context secrets, a request's
credentials), scrubbed wherever they occur, in time bounded by a few passes over the text
however many secrets there are and whatever the text repeats (:func:`scrub_exact`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import Final

from tdk._failures.redact.spans import Span, replace_spans

__all__ = ["SHORTEST_EXACT_SECRET", "scrub_exact"]

#: Exact secret values shorter than this are not scrubbed (see :func:`redact_text`).
SHORTEST_EXACT_SECRET: Final = 4


def scrub_exact(text: str, secrets: Iterable[str]) -> str:
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
    return replace_spans(text, _occurrences(text, found)) if found else text


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
