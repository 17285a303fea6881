"""Redaction takes time linear in its input, whatever the outside sends.

Argument keys, tool names and upstream bodies reach :func:`redact_text` from the outside, up to
64 KiB at a time, on the event loop. Each case is the hostile input for the shape of one scan:
a long run that every start of a pattern reads to its end, or that a loop walks once per
element. Quadratic scans took seconds on these; linear ones take milliseconds, so the bound is
generous.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from itertools import accumulate

import httpx
import pytest

from tdk._redact import REDACTED, redact_text, redact_url
from tdk.http._classify import request_secrets

SIZE = 65_536
BOUND_SECONDS = 0.25


def seconds(call: Callable[[], object]) -> float:
    """The better of two runs (on a shared machine the faster is the less disturbed)."""
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def repeat(piece: str, size: int = SIZE) -> str:
    return piece * (size // len(piece))


#: Exact values a 64 KiB query of ``token=`` pairs brings: each is a secret to scrub, and each
#: shares a long prefix with the text below.
MANY_SECRETS = [f"aaaaaa{i:04d}" for i in range(5_000)]
GITHUB_TOKENS = tuple(f"ghp_{i:036d}" for i in range(1_500))
#: 10,000 secrets of one length, whose heads and tails repeat a text of "a"s (below 30,000
#: characters, where str's own search of a short needle can take time n * m).
PERIODIC_SECRETS = tuple("a" * 80 + f"{i:05d}" + "a" * 8 for i in range(10_000))
#: A random 64 KiB text, and 10,000 distinct 100-character pieces of it: secrets an upstream
#: echoes, all found.
RANDOM_TEXT = "".join(random.Random(1).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=SIZE))
ECHOED_SECRETS = tuple(
    RANDOM_TEXT[i : i + 100] for i in random.Random(2).sample(range(SIZE - 100), 10_000)
)
#: A 64 KiB query whose every pair carries a credential (httpx refuses longer URLs).
MANY_PAIRS = "https://h.example/p?" + "&".join(f"token=aaaaaa{i:04d}" for i in range(3_800))

CASES = [
    pytest.param(lambda: redact_text(repeat("a.") + "://"), id="userinfo-scheme-run"),
    pytest.param(
        lambda: redact_text(repeat("a.", 4096) + "://" + repeat("b", SIZE - 4096)),
        id="userinfo-authority-after-a-scheme-run",
    ),
    pytest.param(lambda: redact_text(repeat("a://")), id="userinfo-many-schemes"),
    pytest.param(lambda: redact_text(repeat("eyJ-")), id="jwt-run-of-starts"),
    pytest.param(lambda: redact_text(repeat("eyJaaaaa.")), id="jwt-run-of-segments"),
    pytest.param(lambda: redact_text(repeat("-eyJaaaaa.bbbbb")), id="jwt-two-segments"),
    pytest.param(lambda: redact_text(repeat("sk-") + repeat("xoxb-")), id="token-prefix-runs"),
    pytest.param(lambda: redact_text(repeat("Bearer" + " " * 60)), id="token-after-spaces"),
    pytest.param(lambda: redact_text(repeat("a") + ":"), id="name-before-a-separator"),
    pytest.param(lambda: redact_text(repeat(":=")), id="separators-without-names"),
    pytest.param(lambda: redact_text(repeat("a=")), id="separators-with-names"),
    pytest.param(lambda: redact_text(repeat("ab-") + ": v"), id="long-name-of-many-words"),
    pytest.param(lambda: redact_text(repeat("x-") + "key: v"), id="long-credential-name"),
    pytest.param(
        lambda: redact_text(repeat("password" + " " * 100 + "=" + " " * 100 + "&")),
        id="spaces-around-separators",
    ),
    pytest.param(lambda: redact_text(repeat("api_key=")), id="chain-of-assignments"),
    pytest.param(lambda: redact_text("api_key: [" + repeat("'\\'")), id="bracket-escaped-quotes"),
    pytest.param(lambda: redact_text("token: " + repeat("[")), id="bracket-never-closed"),
    pytest.param(lambda: redact_text(repeat("api_key: [1] ")), id="many-bracketed-values"),
    pytest.param(lambda: redact_text(repeat("api_key=[\n")), id="many-unclosed-brackets"),
    pytest.param(lambda: redact_text(repeat('"token": ["\n')), id="many-unclosed-strings"),
    pytest.param(lambda: redact_text(repeat("Authorization: x\n")), id="header-lines"),
    pytest.param(lambda: redact_text(repeat("'api_key': '")), id="unclosed-quoted-values"),
    pytest.param(lambda: redact_text("(password=" + repeat(")")), id="closing-brackets"),
    pytest.param(
        lambda: redact_text("password=" + repeat("(") + repeat(").,")),
        id="brackets-and-punctuation",
    ),
    pytest.param(lambda: redact_text(repeat("token=b).")), id="tails-of-many-values"),
    pytest.param(lambda: redact_text(repeat("('x-api-key', ")), id="pair-openers"),
    pytest.param(lambda: redact_text(repeat("(" + " " * 60) + "'"), id="pair-openers-spaced"),
    pytest.param(lambda: redact_text(repeat("('aaaa', 'b'), ")), id="pairs-of-other-names"),
    pytest.param(
        lambda: redact_text(repeat("ghp_" + "a" * 36 + " "), limit=300), id="head-window-shrinks"
    ),
    pytest.param(lambda: redact_text(repeat("a"), MANY_SECRETS), id="many-exact-secrets"),
    pytest.param(lambda: redact_text("a" * 70_000, ["aaaa"]), id="a-secret-at-every-position"),
    pytest.param(
        lambda: redact_text("ab" * 32_768, ("ab" * 10_000, "ab" * 10_001 + "a")),
        id="long-secrets-repeating-what-the-text-repeats",
    ),
    pytest.param(
        lambda: redact_text("ghp_" * 16_384, (*GITHUB_TOKENS, "ghp_")),
        id="thousands-of-secrets-sharing-a-prefix",
    ),
    pytest.param(
        lambda: redact_text(repeat("a"), MANY_SECRETS, limit=300), id="many-secrets-limit"
    ),
    pytest.param(
        lambda: redact_text("a" * 29_999, PERIODIC_SECRETS), id="thousands-sharing-the-text-period"
    ),
    pytest.param(
        lambda: redact_text(RANDOM_TEXT, ECHOED_SECRETS), id="thousands-of-secrets-all-found"
    ),
    pytest.param(lambda: redact_url("https://h/" + repeat(";a=b")), id="url-path-parameters"),
    pytest.param(lambda: redact_url("https://h/" + repeat(";") + "=x"), id="url-semicolons"),
    pytest.param(lambda: redact_url("https://h/p?" + repeat("a=b&")), id="url-query-pairs"),
    pytest.param(lambda: redact_url("https://" + repeat("@") + "/x"), id="url-at-signs"),
    pytest.param(
        lambda: request_secrets(httpx.Request("GET", MANY_PAIRS)), id="request-with-many-pairs"
    ),
]


@pytest.mark.parametrize("call", CASES)
def test_redaction_is_linear_on_hostile_input(call: Callable[[], object]) -> None:
    """64 KiB of the input that would make the scan quadratic is redacted in milliseconds."""
    assert seconds(call) < BOUND_SECONDS


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
    secrets = request_secrets(httpx.Request("GET", MANY_PAIRS))
    echo = " ".join(f"aaaaaa{i:04d}" for i in range(3_800))
    assert set(redact_text(echo, secrets).split()) == {REDACTED}


def test_a_failed_call_with_thousands_of_escapable_secrets_is_quick() -> None:
    """2,000 context secrets with characters that writers escape (so about 20 forms each),
    and a 2 KB message: a failed call still takes milliseconds (building an automaton of
    every form took seconds), and redacts the ones it shows."""
    from tdk import ToolContext, tool

    values = [f"s{n:05d} é<&/\"'\\-{n:05d}-tail" for n in range(2_000)]
    context = ToolContext(secrets={f"k{n}": value for n, value in enumerate(values)})

    @tool
    def fails(ctx: ToolContext) -> int:
        """Fail with one of the secrets, as JSON writes it."""
        raise ValueError(json.dumps({"key": ctx.secrets["k123"], "note": "x" * 2_000}))

    start = time.perf_counter()  # the first call: nothing built for these secrets yet
    error = fails.run_sync({}, context=context).error
    assert time.perf_counter() - start < BOUND_SECONDS
    assert error is not None
    assert "00123" not in (error.developer_message or "")


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
