"""Redaction: what a secret looks like, in text and in URLs."""

from __future__ import annotations

from typing import Any

import pytest

from tdk._failures.redact import REDACTED, call_secrets, end_call_secrets, redact_text, redact_url


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "GET https://alice:s3cret@api.example.com/x failed",
            "GET https://[REDACTED]@api.example.com/x failed",
            id="url-userinfo",
        ),
        pytest.param(
            "url=https://api.example.com/x?api_key=abc123&page=2",
            "url=https://api.example.com/x?api_key=[REDACTED]&page=2",
            id="query-api-key",
        ),
        pytest.param(
            "https://s3.example.com/o?X-Amz-Signature=deadbeef&X-Amz-Credential=AK/2026",
            "https://s3.example.com/o?X-Amz-Signature=[REDACTED]&X-Amz-Credential=[REDACTED]",
            id="query-aws-signature",
        ),
        pytest.param(
            "https://acct.blob.core.windows.net/c?sv=2024&se=2026&sig=abc%2Fdef",
            "https://acct.blob.core.windows.net/c?sv=[REDACTED]&se=[REDACTED]&sig=[REDACTED]",
            id="query-azure-sas",
        ),
        pytest.param("?token=xyz&sort=asc", "?token=[REDACTED]&sort=asc", id="query-token"),
        pytest.param("monkey=1&keyboard=2", "monkey=1&keyboard=2", id="query-name-inside-a-word"),
        pytest.param(
            "Authorization: Basic dXNlcjpwYXNz", "Authorization: [REDACTED]", id="header-basic"
        ),
        pytest.param(
            "headers={'X-Api-Key': 'k-123456', 'Accept': 'json'}",
            "headers={'X-Api-Key': '[REDACTED]', 'Accept': 'json'}",
            id="header-in-dict-repr",
        ),
        pytest.param("cookie=session=abc", "cookie=[REDACTED]", id="cookie"),
        pytest.param(
            "token sk-abcdefghijklmnopqrstuvwx used", "token [REDACTED] used", id="openai-key"
        ),
        pytest.param("sk-ant-api03-abcdefghijklmnopqrstuv", "[REDACTED]", id="anthropic-key"),
        pytest.param("key AIza" + "B" * 35 + " bad", "key [REDACTED] bad", id="google-key"),
        pytest.param("ghp_" + "a" * 36, "[REDACTED]", id="github-pat"),
        pytest.param("github_pat_" + "A1" * 20, "[REDACTED]", id="github-fine-grained"),
        pytest.param("xoxb-1234567890-abcdef", "[REDACTED]", id="slack"),
        pytest.param("AKIAABCDEFGHIJKLMNOP", "[REDACTED]", id="aws-access-key"),
        pytest.param("key sk_live_" + "a1" * 12 + " bad", "key [REDACTED] bad", id="stripe-secret"),
        pytest.param("rk_test_" + "B2" * 12, "[REDACTED]", id="stripe-restricted"),
        pytest.param("glpat-" + "x_" * 10, "[REDACTED]", id="gitlab-pat"),
        pytest.param("pk_live_" + "a1" * 12, "pk_live_" + "a1" * 12, id="stripe-publishable-kept"),
        pytest.param("jwt eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl end", "jwt [REDACTED] end", id="jwt"),
        pytest.param("sent Bearer abc.def-ghi_jkl", "sent [REDACTED]", id="bearer"),
        pytest.param(
            "sid session-eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl end",
            "sid session-[REDACTED] end",
            id="jwt-after-a-dash",
        ),
        pytest.param(
            "eyJ-eyJab eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
            "eyJ-eyJab [REDACTED]",
            id="jwt-after-a-run-that-is-not-one",
        ),
        pytest.param(
            "xeyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
            "xeyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
            id="jwt-shape-inside-a-word-kept",
        ),
        pytest.param(
            "a://u:p@h/x and ://v:q@i",
            "a://[REDACTED]@h/x and ://[REDACTED]@i",
            id="userinfo-of-each-url-any-scheme",
        ),
        pytest.param("nothing secret here: 42", "nothing secret here: 42", id="clean"),
        pytest.param(
            '{"api_key": "QQQ111222", "code": "rate_limit"}',
            '{"api_key": "[REDACTED]", "code": "rate_limit"}',
            id="json-key-redacted-ambiguous-kept",
        ),
        pytest.param("error code: 404", "error code: 404", id="ambiguous-name-in-prose"),
        pytest.param("?client%5Fsecret=abc123", "?client%5Fsecret=[REDACTED]", id="encoded-name"),
        pytest.param(
            "?auth_token=t1&access_key=k2",
            "?auth_token=[REDACTED]&access_key=[REDACTED]",
            id="more-credential-names",
        ),
        pytest.param(
            "Headers([('x-api-key', 'k-111'), ('x-api-key', 'k-222'), ('accept', '*/*')])",
            "Headers([('x-api-key', '[REDACTED]'), ('x-api-key', '[REDACTED]'), "
            "('accept', '*/*')])",
            id="httpx-repeated-headers-repr",
        ),
        pytest.param(
            "[(b'Authorization', b'Token t-333'), (b'host', b'api.example.com')]",
            "[(b'Authorization', b'[REDACTED]'), (b'host', b'api.example.com')]",
            id="raw-header-tuples",
        ),
        pytest.param(
            """("cookie", "a='1'; sid=s-444")""", """("cookie", "[REDACTED]")""", id="pair-quotes"
        ),
        pytest.param(
            r"""('api_key', 'it\'s-555')""", "('api_key', '[REDACTED]')", id="pair-escape"
        ),
        pytest.param(
            "('page', '2'), ('key', 'id')", "('page', '2'), ('key', 'id')", id="pair-kept"
        ),
        pytest.param("('token', '')", "('token', '')", id="pair-empty-value"),
        pytest.param(
            "said f('a', 'b) then [('x-api-key', 'k-888')]",
            "said f('a', 'b) then [('x-api-key', '[REDACTED]')]",
            id="pair-after-an-unbalanced-one",
        ),
        pytest.param(
            "( 'x-api-key' , 'k-777' )", "( 'x-api-key' , '[REDACTED]' )", id="pair-spaced"
        ),
        pytest.param(
            "{'x-api-key': 'k-1, k-2', 'accept': '*/*'}",
            "{'x-api-key': '[REDACTED]', 'accept': '*/*'}",
            id="quoted-value-with-comma",
        ),
        pytest.param(
            '{"password": "correct horse \\"battery\\"", "user": "ann"}',
            '{"password": "[REDACTED]", "user": "ann"}',
            id="quoted-value-with-spaces-and-escapes",
        ),
        pytest.param(
            "login (password=hunter2hunter2) failed",
            "login (password=[REDACTED]) failed",
            id="closing-bracket-after-a-value",
        ),
        pytest.param(
            '{"X-Api-Key": ["k-1234567890"], "Accept": ["*/*"]}',
            '{"X-Api-Key": [REDACTED], "Accept": ["*/*"]}',
            id="list-value-go-headers",
        ),
        pytest.param(
            "{'api_key': ('k-1234567890', 'k-2'), 'page': 2}",
            "{'api_key': [REDACTED], 'page': 2}",
            id="tuple-value",
        ),
        pytest.param(
            '{"token": {"value": "k-1234567890", "note": "a ] in a string"}, "id": 3}',
            '{"token": [REDACTED], "id": 3}',
            id="object-value-brackets-in-strings",
        ),
        pytest.param(
            "{'x-api-key': b'k-1234567890', 'accept': b'*/*'}",
            "{'x-api-key': b'[REDACTED]', 'accept': b'*/*'}",
            id="bytes-literal-value",
        ),
        pytest.param(
            "token: [never closed k-1234567890\nnext line",
            "token: [REDACTED]",
            id="unclosed-bracket-to-the-end-of-the-text",
        ),
        pytest.param(
            "[token=abc]], f(api_key=g(x)), {secret=s}",
            "[token=[REDACTED]]], f(api_key=[REDACTED]), {secret=[REDACTED]}",
            id="closing-brackets-opened-in-the-value-kept",
        ),
        pytest.param(
            "bad token (Authorization: Bearer tok-123456789)",
            "bad token (Authorization: [REDACTED])",
            id="closing-bracket-after-a-header-line",
        ),
        pytest.param("token=) x", "token=) x", id="only-a-closing-bracket"),
        pytest.param(
            "sent key=X-RapidAPI-Key: rk-123456\nok",
            "sent key=[REDACTED] [REDACTED]\nok",
            id="value-ending-where-another-begins",
        ),
        pytest.param(
            "Bearer X-RapidAPI-Key: rk-123456\nnext",
            "[REDACTED]: [REDACTED]\nnext",
            id="token-shape-over-a-header-name",
        ),
        pytest.param(
            "GET https://h/app;jsessionid=J-666 failed",
            "GET https://h/app;jsessionid=[REDACTED] failed",
            id="path-parameter-in-text",
        ),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    """Credentials by position and token shapes are replaced."""
    assert redact_text(text) == expected


def test_exact_values_longest_first() -> None:
    """Known secrets are replaced whole, even when one contains another."""
    text = "a=topsecret b=topsecret-extended"
    assert redact_text(text, ["topsecret", "topsecret-extended"]) == (f"a={REDACTED} b={REDACTED}")


def test_very_short_values_are_not_scrubbed() -> None:
    """A one-letter 'secret' would destroy the text without protecting anything."""
    assert redact_text("a cat", ["a"]) == "a cat"


def test_limit_cuts_after_redacting() -> None:
    """A secret straddling the cut is redacted, not half-kept."""
    secret = "S" * 40
    text = "x" * 90 + secret + "tail"
    out = redact_text(text, [secret], limit=100)
    assert "SSSS" not in out
    assert out.startswith("x" * 90 + "[REDACTED]"[:10])
    assert out.endswith("... [4 more characters]")  # counted after redaction


def test_limit_leaves_short_text_alone() -> None:
    """Text under the limit is returned whole."""
    assert redact_text("short", limit=100) == "short"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://u:p@api.example.com/v1/x?api_key=k&page=2&per_page=50#frag",
            "https://api.example.com/v1/x?api_key=[REDACTED]&page=2&per_page=50",
            id="userinfo-query-fragment",
        ),
        pytest.param(
            "https://api.example.com/x?q=private+search&limit=5&city=Oslo&state=CA",
            "https://api.example.com/x?q=private+search&limit=5&city=Oslo&state=CA",
            id="other-values-kept",
        ),
        pytest.param(
            "https://h/p?X-RapidAPI-Key=a1&apiKey=b2&hapikey=c3&user%5Bpassword%5D=d4&appid=e5",
            "https://h/p?X-RapidAPI-Key=[REDACTED]&apiKey=[REDACTED]&hapikey=[REDACTED]"
            "&user%5Bpassword%5D=[REDACTED]&appid=[REDACTED]",
            id="credential-names-by-rule",
        ),
        pytest.param(
            "https://h/p?q=sk-abcdefghijklmnopqrstuv&r=Bearer%20abcdefghijk&s=x",
            "https://h/p?q=[REDACTED]&r=[REDACTED]&s=x",
            id="token-shaped-values",
        ),
        pytest.param(
            "https://h/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F2026"
            "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=60&X-Amz-Signature=ab12",
            "https://h/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[REDACTED]"
            "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=60&X-Amz-Signature=[REDACTED]",
            id="aws-presigned",
        ),
        pytest.param(
            "https://h/c?sv=2024&se=2026&sp=r&sig=abc%2Fdef",
            "https://h/c?sv=[REDACTED]&se=[REDACTED]&sp=r&sig=[REDACTED]",
            id="azure-sas",
        ),
        pytest.param(
            "https://h/cb?code=c-123&state=s-456",
            "https://h/cb?code=[REDACTED]&state=s-456",
            id="oauth-code",
        ),
        pytest.param("https://h/p?flag&token=", "https://h/p?flag&token=", id="nothing-to-hide"),
        pytest.param(
            "https://h/v1/sk-abcdefghijklmnopqrstuv/x",
            "https://h/v1/[REDACTED]/x",
            id="token-in-path",
        ),
        pytest.param(
            "https://x.openai.azure.com/d?api-version=2024-10-21",
            "https://x.openai.azure.com/d?api-version=2024-10-21",
            id="api-version-kept",
        ),
        pytest.param("https://example.com/plain", "https://example.com/plain", id="no-query"),
        pytest.param("http://u:p@[::1:bad/?k=v", "http://[::1:bad/?k=v", id="malformed"),
        pytest.param("https://a@b@host/p", "https://host/p", id="several-at-signs"),
        pytest.param("mailto:x@example.com", "mailto:x@example.com", id="no-authority"),
        pytest.param("https://host/p?&&page=1&", "https://host/p?page=1", id="empty-pairs"),
        pytest.param("https://host/p?", "https://host/p", id="empty-query"),
        pytest.param(
            "https://host/p?API_KEY%5F=x", "https://host/p?API_KEY%5F=[REDACTED]", id="encoded-name"
        ),
        pytest.param(
            "https://host/app;jsessionid=J-1?page=2",
            "https://host/app;jsessionid=[REDACTED]?page=2",
            id="path-parameter",
        ),
        pytest.param(
            "https://host/a;v=1/b;page=3;x=;sig=s1",
            "https://host/a;v=1/b;page=3;x=;sig=[REDACTED]",
            id="matrix",
        ),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    """URLs lose userinfo, fragments and the values of credential parameters; other values are
    kept."""
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        pytest.param("bad key: " + "y" * 1500 + "Z" * 3402, ["Z" * 3402], id="secret-past-window"),
        pytest.param("A" * 3990 + " " + "S" * 60 + " " + "S" * 60, ["S" * 60], id="twice-at-cut"),
        pytest.param(
            ("S3cr3tT0kenValue-0123456789abcdef " * 140) + "sk-" + "q" * 40,
            ["S3cr3tT0kenValue-0123456789abcdef"],
            id="shrinking-pulls-tail-under-limit",
        ),
        pytest.param(
            "ghp_" + "a" * 36 + " " + ("Bearer " + "t" * 30 + " ") * 200 + "ghp_" + "b" * 36,
            [],
            id="shapes-shrink-window",
        ),
        pytest.param(
            "headers [(b'cookie', b'" + "sid=" + "c" * 9000 + "')]", [], id="pair-past-window"
        ),
        pytest.param("x" * 3990 + " {'x-api-key': '" + "c" * 9000 + "'}", [], id="quoted-past-cut"),
    ],
)
def test_cut_text_never_keeps_part_of_a_secret(text: str, secrets: list[str]) -> None:
    """However the cut falls, no run of a secret's characters survives redaction."""
    out = redact_text(text, secrets, limit=4000)
    assert len(out) < 4100
    for secret in secrets:
        assert secret[:8] not in out
    assert "qqqqqqqq" not in out
    assert "bbbbbbbb" not in out
    assert "tttttttt" not in out
    assert "cccccccc" not in out


def test_userinfo_with_at_sign_in_password() -> None:
    """A password containing '@' is removed whole."""
    assert (
        redact_text("GET https://bob:p@ss@host.example/x")
        == "GET https://[REDACTED]@host.example/x"
    )


def test_redact_url_scrubs_exact_secrets_anywhere() -> None:
    """A known secret is replaced wherever it is in a URL, the call's own secrets included."""
    url = "https://h/p/S3cr3tValue?q=S3cr3tValue&city=Oslo&note=call-secret-1"
    token = call_secrets(("call-secret-1",))
    try:
        shown = redact_url(url, ["S3cr3tValue"])
    finally:
        end_call_secrets(token)
    assert shown == "https://h/p/[REDACTED]?q=[REDACTED]&city=Oslo&note=[REDACTED]"


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        pytest.param(
            "key Alpha-Secret-Prefix-0123456789-Tail-Beta-Secret-Suffix-XYZ end",
            ["Alpha-Secret-Prefix-0123456789", "0123456789-Tail-Beta-Secret-Suffix-XYZ"],
            id="two-secrets-overlap",
        ),
        pytest.param("id abcabcabcabc end", ["abcabcabc"], id="a-secret-overlaps-itself"),
        pytest.param(
            "x Outer-secret-with-Inner-secret-in-it y",
            ["Outer-secret-with-Inner-secret-in-it", "Inner-secret"],
            id="one-inside-another",
        ),
        pytest.param("x abcdabcd y", ["abcd"], id="a-secret-touching-itself"),
        pytest.param("x tok1tok2 y", ["tok1", "tok2"], id="two-secrets-touching"),
        pytest.param(
            "x tok1tok2 y",
            ["tok1", "tok2", *(f"other-{n:03d}" for n in range(100))],
            id="two-of-many-secrets-touching",
        ),
    ],
)
def test_overlapping_occurrences_of_secrets_are_redacted_whole(
    text: str, secrets: list[str]
) -> None:
    """Secrets whose occurrences overlap or touch (two of them, or one with itself) leave no
    character of either, and no trace of where one ends: the run they cover is replaced as
    one."""
    first, *_, last = text.split()
    assert redact_text(text, secrets).split() == [first, REDACTED, last]


@pytest.mark.parametrize(
    "others",
    [
        pytest.param([12345, None, b"bytes-secret"], id="hashable"),
        pytest.param([["a-list"], {"a": "dict"}, bytearray(b"abcd")], id="unhashable"),
        pytest.param(
            [12345, ["a-list"], *(f"other-{n:03d}" for n in range(100))], id="many-secrets"
        ),
    ],
)
def test_items_that_are_not_text_among_secrets_are_ignored(others: list[Any]) -> None:
    """A number, None, bytes or an unhashable object among the secrets is skipped; the text
    secrets are still scrubbed, from a text and from a URL."""
    secrets: list[Any] = ["tok-4f9a1c7e", *others]
    assert redact_text("key tok-4f9a1c7e 12345", secrets) == f"key {REDACTED} 12345"
    assert redact_url("https://h.example/tok-4f9a1c7e", secrets) == f"https://h.example/{REDACTED}"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1/search?q=Tr0ub4dor#3xyz",
        "https://user:Tr0ub4dor#3xyz@api.example.com/v1/",
        "https://api.example.com/v1/Tr0ub4dor?3xyz=1",
    ],
    ids=["hash-in-the-query", "hash-in-the-userinfo", "question-mark-in-the-path"],
)
def test_a_secret_holding_url_delimiters_is_redacted_whole_in_a_url(url: str) -> None:
    """A secret holding a ``#``, a ``?`` or an ``@`` is scrubbed before the URL is cut at
    them: no part of it is left."""
    out = redact_url(url, ["Tr0ub4dor#3xyz", "Tr0ub4dor?3xyz"])
    assert "Tr0ub" not in out
    assert "3xyz" not in out
