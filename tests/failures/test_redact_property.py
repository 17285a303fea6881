"""Redaction on any text: it never raises, takes bounded time, and lets no planted secret by.

Each example is up to 64 KiB of filler (short random chunks, each repeated, so that the long
runs that trip a regular expression come up) with credentials planted at random places: in URLs,
header lines, pairs, JSON, assignments, token shapes, and exact values passed as secrets.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdk._failures.redact import redact_text, redact_url

SIZE = 65_536

#: How each credential is planted around its secret value ``{}``. Every way is one that
#: redaction promises to catch whatever surrounds it.
PLANTINGS = [
    "https://user:{}@host.example/p",
    "https://h.example/p?api_key={}&page=2",
    "X-RapidAPI-Key: {}\n",
    "Authorization: Bearer {}\n",
    "('x-api-key', '{}')",
    "[(b'Authorization', b'{}')]",
    '{{"client_secret": "{}"}}',
    "{{'X-Vault-Token': '{}'}}",
    "password={}",
    "DD-API-KEY={}&x=1",
    "'password': '{}'",
    "Cookie: theme=dark; sid={}\n",
    "https://h.example/app;jsessionid={}?page=1#top",
    "(token={})",
    "sk-{}",
    "ghp_{}",
    "eyJhbGciOi.{}.{}",
    "Bearer {}",
    "{}",  # an exact value, passed as a secret
]
FILLER_ALPHABET = "aZ9.-_=:/@?&#'\"()[]{} \n\t%+,;eyJ"

#: A secret: a fixed prefix (so that filler never makes one) and 20 random characters.
secrets = st.text(
    alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789", min_size=20, max_size=20
).map(lambda tail: "Q7" + tail)
fillers = st.builds(
    lambda chunk, times: chunk * times,
    st.text(alphabet=FILLER_ALPHABET, min_size=1, max_size=12)
    | st.sampled_from(["a.", "eyJ-", "://", "key=", "token: ", "(", ")", "'", "Bearer "]),
    st.integers(min_value=1, max_value=SIZE // 4),
)
plants = st.tuples(st.sampled_from(PLANTINGS), secrets)
separators = st.sampled_from([" ", "\n", ", ", "; ", " (", ") "])


@st.composite
def planted_texts(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """A text, the secrets planted in it, and those of them that are passed as exact values."""
    parts: list[str] = []
    planted: list[str] = []
    exact: list[str] = []
    size = 0
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        if draw(st.booleans()):
            filler = draw(fillers)[: SIZE - size]
            parts.append(filler)
            size += len(filler)
        planting, secret = draw(plants)
        parts.append(draw(separators))  # (a token shape must start a word: "task-..." is not "sk-")
        parts.append(planting.format(secret, secret))
        planted.append(secret)
        if planting == "{}":
            exact.append(secret)
        parts.append(draw(separators))
    return "".join(parts), planted, exact


@settings(
    max_examples=300,
    deadline=timedelta(seconds=1),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(planted_texts(), st.sampled_from([None, 0, 100, 1_000, 4_000]))
def test_no_planted_secret_survives(
    case: tuple[str, list[str], list[str]], limit: int | None
) -> None:
    """Whatever surrounds them, planted credentials are all redacted, within a second."""
    text, planted, exact = case
    out = redact_text(text, exact, limit=limit)
    assert not [secret for secret in planted if secret in out]


@settings(
    max_examples=200,
    deadline=timedelta(seconds=1),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(fillers, fillers, secrets)
def test_urls_never_raise_nor_keep_a_credential(path: str, query: str, secret: str) -> None:
    """Any URL-like text is redacted without raising, and a credential parameter, userinfo or
    exact secret planted in it never survives."""
    url = f"https://u:{secret}@h.example/{path}?{query}&api_key={secret}&q={secret[::-1]}#{query}"
    out = redact_url(url, [secret[::-1]])
    assert secret not in out
    assert secret[::-1] not in out
