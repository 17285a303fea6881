"""Redaction takes time linear in its input, whatever the outside sends.

Argument keys, tool names and upstream bodies reach :func:`redact_text` from the outside, up to
64 KiB at a time, on the event loop. Each case is the hostile input for the shape of one scan:
a long run that every start of a pattern reads to its end, or that a loop walks once per
element. Quadratic scans took seconds on these. Each case is timed at 16 KiB and at 64 KiB in
the same run, every part of the input grown alike (the text, and the number and length of the
secrets): linear work takes about four times as long on four times the input, quadratic work
sixteen times (``tests/_linear.py``). No bound on the clock: a busy machine slows both alike.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from functools import partial
from itertools import accumulate
from typing import Any

import httpx
import pytest
from _linear import assert_linear

from tdk import ToolContext, tool
from tdk._failures.redact import REDACTED, redact_text, redact_url
from tdk.http._classify import request_secrets

SIZE = 65_536


def repeat(piece: str, size: int = SIZE) -> str:
    return piece * (size // len(piece))


def scaled(count: int, size: int) -> int:
    """``count`` (right for 64 KiB) for an input of ``size``."""
    return count * size // SIZE


def many_secrets(size: int = SIZE) -> list[str]:
    """Exact values a query of ``token=`` pairs brings (5,000 for 64 KiB): each is a secret to
    scrub, and each shares a long prefix with the text of "a"s they are searched in."""
    return [f"aaaaaa{i:04d}" for i in range(scaled(5_000, size))]


def github_tokens(size: int = SIZE) -> tuple[str, ...]:
    return tuple(f"ghp_{i:036d}" for i in range(scaled(1_500, size)))


def periodic_secrets(size: int = SIZE) -> tuple[str, ...]:
    """Secrets of one length (10,000 for 64 KiB), whose heads and tails repeat a text of "a"s
    (below 30,000 characters, where str's own search of a short needle can take time n * m)."""
    return tuple("a" * 80 + f"{i:05d}" + "a" * 8 for i in range(scaled(10_000, size)))


def random_text(size: int = SIZE) -> str:
    return "".join(random.Random(1).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=size))


def echoed_secrets(size: int = SIZE) -> tuple[str, ...]:
    """Distinct 100-character pieces of :func:`random_text` (10,000 for 64 KiB): secrets an
    upstream echoes, all found."""
    text = random_text(size)
    starts = random.Random(2).sample(range(size - 100), scaled(10_000, size))
    return tuple(text[i : i + 100] for i in starts)


def many_pairs(size: int = SIZE) -> str:
    """A query whose every pair carries a credential (64 KiB: httpx refuses longer URLs)."""
    pairs = "&".join(f"token=aaaaaa{i:04d}" for i in range(scaled(3_800, size)))
    return "https://h.example/p?" + pairs


PERIODIC_SECRETS = periodic_secrets()
RANDOM_TEXT = random_text()
ECHOED_SECRETS = echoed_secrets()


def text(build: Callable[[int], str], *args: Any, **kwargs: Any) -> Callable[[int], Any]:
    """A case: ``redact_text`` of ``build(size)`` (and the other arguments, or what they give
    for the size when they are functions of it)."""

    def call_at(size: int) -> Callable[[], object]:
        given = [arg(size) if callable(arg) else arg for arg in args]
        return partial(redact_text, build(size), *given, **kwargs)

    return call_at


def url(build: Callable[[int], str]) -> Callable[[int], Any]:
    return lambda size: partial(redact_url, build(size))


CASES = [
    pytest.param(text(lambda n: repeat("a.", n) + "://"), id="userinfo-scheme-run"),
    pytest.param(
        text(lambda n: repeat("a.", n // 16) + "://" + repeat("b", n - n // 16)),
        id="userinfo-authority-after-a-scheme-run",
    ),
    pytest.param(text(lambda n: repeat("a://", n)), id="userinfo-many-schemes"),
    pytest.param(text(lambda n: repeat("eyJ-", n)), id="jwt-run-of-starts"),
    pytest.param(text(lambda n: repeat("eyJaaaaa.", n)), id="jwt-run-of-segments"),
    pytest.param(text(lambda n: repeat("-eyJaaaaa.bbbbb", n)), id="jwt-two-segments"),
    pytest.param(text(lambda n: repeat("sk-", n) + repeat("xoxb-", n)), id="token-prefix-runs"),
    pytest.param(text(lambda n: repeat("Bearer" + " " * 60, n)), id="token-after-spaces"),
    pytest.param(text(lambda n: repeat("a", n) + ":"), id="name-before-a-separator"),
    pytest.param(text(lambda n: repeat(":=", n)), id="separators-without-names"),
    pytest.param(text(lambda n: repeat("a=", n)), id="separators-with-names"),
    pytest.param(text(lambda n: repeat("ab-", n) + ": v"), id="long-name-of-many-words"),
    pytest.param(text(lambda n: repeat("x-", n) + "key: v"), id="long-credential-name"),
    pytest.param(
        text(lambda n: repeat("password" + " " * 100 + "=" + " " * 100 + "&", n)),
        id="spaces-around-separators",
    ),
    pytest.param(text(lambda n: repeat("api_key=", n)), id="chain-of-assignments"),
    pytest.param(text(lambda n: "api_key: [" + repeat("'\\'", n)), id="bracket-escaped-quotes"),
    pytest.param(text(lambda n: "token: " + repeat("[", n)), id="bracket-never-closed"),
    pytest.param(text(lambda n: repeat("api_key: [1] ", n)), id="many-bracketed-values"),
    pytest.param(text(lambda n: repeat("api_key=[\n", n)), id="many-unclosed-brackets"),
    pytest.param(text(lambda n: repeat('"token": ["\n', n)), id="many-unclosed-strings"),
    pytest.param(text(lambda n: repeat("Authorization: x\n", n)), id="header-lines"),
    pytest.param(text(lambda n: repeat("'api_key': '", n)), id="unclosed-quoted-values"),
    pytest.param(text(lambda n: "(password=" + repeat(")", n)), id="closing-brackets"),
    pytest.param(
        text(lambda n: "password=" + repeat("(", n) + repeat(").,", n)),
        id="brackets-and-punctuation",
    ),
    pytest.param(text(lambda n: repeat("token=b).", n)), id="tails-of-many-values"),
    pytest.param(text(lambda n: repeat("('x-api-key', ", n)), id="pair-openers"),
    pytest.param(text(lambda n: repeat("(" + " " * 60, n) + "'"), id="pair-openers-spaced"),
    pytest.param(text(lambda n: repeat("('aaaa', 'b'), ", n)), id="pairs-of-other-names"),
    pytest.param(
        text(lambda n: repeat("ghp_" + "a" * 36 + " ", n), limit=300), id="head-window-shrinks"
    ),
    pytest.param(text(lambda n: repeat("a", n), many_secrets), id="many-exact-secrets"),
    pytest.param(
        text(lambda n: "a" * (n * 17 // 16), ["aaaa"]),
        4 * SIZE,  # (past the searches' worth of work that 17 KiB fits in, at both sizes)
        id="a-secret-at-every-position",
    ),
    pytest.param(
        text(
            lambda n: "ab" * (n // 2),
            lambda n: ("ab" * scaled(10_000, n), "ab" * (scaled(10_000, n) + 1) + "a"),
        ),
        id="long-secrets-repeating-what-the-text-repeats",
    ),
    pytest.param(
        text(lambda n: "ghp_" * (n // 4), lambda n: (*github_tokens(n), "ghp_")),
        4 * SIZE,  # (375 secrets are found another way than 1,500)
        id="thousands-of-secrets-sharing-a-prefix",
    ),
    pytest.param(text(lambda n: repeat("a", n), many_secrets, limit=300), id="many-secrets-limit"),
    pytest.param(
        text(lambda n: "a" * scaled(29_999, n), periodic_secrets),
        id="thousands-sharing-the-text-period",
    ),
    pytest.param(text(random_text, echoed_secrets), id="thousands-of-secrets-all-found"),
    pytest.param(url(lambda n: "https://h/" + repeat(";a=b", n)), id="url-path-parameters"),
    pytest.param(url(lambda n: "https://h/" + repeat(";", n) + "=x"), id="url-semicolons"),
    pytest.param(url(lambda n: "https://h/p?" + repeat("a=b&", n)), id="url-query-pairs"),
    pytest.param(url(lambda n: "https://" + repeat("@", n) + "/x"), id="url-at-signs"),
    pytest.param(
        lambda n: partial(request_secrets, httpx.Request("GET", many_pairs(n))),
        id="request-with-many-pairs",
    ),
]


def _sized(case: Any) -> Any:
    """A case with the size it is timed at: its own, else ``SIZE``."""
    return case if len(case.values) == 2 else pytest.param(*case.values, SIZE, id=case.id)


@pytest.mark.parametrize(("call_at", "size"), [_sized(case) for case in CASES])
def test_redaction_is_linear_on_hostile_input(call_at: Callable[[int], Any], size: int) -> None:
    """Four times the input that would make a scan quadratic takes about four times as long
    to redact (a quadratic scan: sixteen times)."""
    assert_linear(call_at, size)


@pytest.mark.parametrize(
    "repeats", [100, 1_000], ids=["searched-one-by-one", "one-pass-over-the-text"]
)
def test_many_secrets_are_all_scrubbed(repeats: int) -> None:
    """Many secrets leave no occurrence of any, overlapping ones and ones inside others
    included, and keep the rest of the text: searched for one by one in a short text, in one
    pass over a long one (past 50 million secrets x characters)."""
    secrets = tuple([f"key-{i:05d}" for i in range(1_000)] + ["key-00001-long", "00002-ke"])
    text = "a key-00001-long b key-00002-key-00003 c key-99999 d key-0000Z e " * repeats
    for _ in range(2):  # (the second time, with what the first built for these secrets)
        out = redact_text(text, secrets)
        assert not any(secret in out for secret in secrets)
        assert out.count("key-99999") == out.count("key-0000Z") == repeats
        assert out.replace(REDACTED, "").replace("-", "") == (
            "a  b  c key99999 d key0000Z e " * repeats
        )


def test_secrets_of_a_request_with_many_pairs_are_scrubbed() -> None:
    """Every credential of a long query is scrubbed from an upstream's long echo of them."""
    secrets = request_secrets(httpx.Request("GET", many_pairs()))
    echo = " ".join(f"aaaaaa{i:04d}" for i in range(3_800))
    assert set(redact_text(echo, secrets).split()) == {REDACTED}


def test_a_failed_call_with_thousands_of_escapable_secrets_is_linear() -> None:
    """Context secrets with characters that writers escape (so about 20 forms each), and a
    2 KB message: a failed call's first redaction for its secrets (nothing built for them
    yet) takes time linear in their number (building an automaton of every form took
    seconds for 2,000), and redacts the ones it shows."""

    @tool
    def fails(ctx: ToolContext) -> int:
        """Fail with one of the secrets, as JSON writes it."""
        raise ValueError(json.dumps({"key": ctx.secrets["k123"], "note": "x" * 2_000}))

    runs = itertools.count()

    def call_at(count: int) -> Callable[[], object]:
        def first_call() -> None:  # new secrets every time: nothing built for them
            run = next(runs)
            values = [f"s{run:05d}{n:05d} é<&/\"'\\-{n:05d}-tail" for n in range(count)]
            context = ToolContext(secrets={f"k{n}": value for n, value in enumerate(values)})
            error = fails.run_sync({}, context=context).error
            assert error is not None
            assert f"{run:05d}00123" not in (error.developer_message or "")

        return first_call

    assert_linear(call_at, 2_000)


def test_secrets_that_repeat_themselves_are_redacted_in_one_pass() -> None:
    """A secret repeating what the text repeats occurs at every other position: past a few
    passes' worth of searching, one pass over the text finds every occurrence of the secrets
    found, those overlapping the run included; the text around them survives."""
    text = "x " + "ab" * 30_000 + "dd y"
    out = redact_text(text, ("ab" * 10_000, "ababdd", "abdd"))
    assert out == f"x {REDACTED} y"


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        pytest.param("a" * 29_999, PERIODIC_SECRETS, id="none-found"),
        pytest.param("x" + "a" * 80 + "00042" + "a" * 8 + "y", PERIODIC_SECRETS, id="one-found"),
        pytest.param(RANDOM_TEXT, ECHOED_SECRETS, id="all-found"),
        pytest.param("ab" * 20_000, ("ab" * 5_000, "ba" * 5_000, "abab"), id="periodic-found"),
        pytest.param(
            "ab" * 20_000 + "ababax", ("ab" * 5_000, "ababax"), id="periodic-and-another-found"
        ),
        pytest.param(
            "a" * 20_000 + "00042" + "a" * 8,
            tuple("a" * (4 + i % 30) + f"{i:05d}" + "a" * 8 for i in range(2_000)),
            id="short-secrets-of-many-lengths-sharing-the-period",
        ),
        pytest.param(
            "c" + "a" * 20_000 + "b",
            tuple("a" * length + "b" for length in range(16, 1_516)),
            id="many-lengths-sharing-a-head",
        ),
    ],
)
def test_the_passes_for_many_secrets_find_what_a_plain_search_finds(
    text: str, secrets: tuple[str, ...]
) -> None:
    """Whichever way finds many secrets (a pass per length, the index, the search) and their
    occurrences (the search, a pass per length, the automaton), every character of every
    occurrence is covered, and nothing else."""
    changes = [0] * (len(text) + 1)  # +1 where an occurrence starts, -1 where it ends
    characters = set(text)
    for secret in secrets:
        start = text.find(secret) if characters.issuperset(secret) else -1
        while start >= 0:
            changes[start] += 1
            changes[start + len(secret)] -= 1
            start = text.find(secret, start + 1)
    covered = list(map(bool, accumulate(changes[:-1])))
    expected = "".join(
        REDACTED if kept and (i == 0 or not covered[i - 1]) else "" if kept else char
        for i, (char, kept) in enumerate(zip(text, covered, strict=True))
    )
    assert redact_text(text, secrets) == expected
