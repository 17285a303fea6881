"""Which names are a credential's: one rule for headers, parameters, keys and pairs."""

from __future__ import annotations

import pytest

from tdk._failures.redact import REDACTED, credential_key, credential_name, redact_text

LOOK_LIKE_CREDENTIALS = [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key",
    "X-RapidAPI-Key", "DD-API-KEY", "DD-APPLICATION-KEY", "X-Algolia-API-Key", "apikey", "APIKEY",
    "X-Auth-Key", "X-Auth-Token", "X-Vault-Token", "X-CSRF-Token", "X-XSRF-TOKEN",
    "Stripe-Signature", "X-Hub-Signature-256", "X-Mashape-Key", "x-functions-key",
    "Ocp-Apim-Subscription-Key", "x-amz-security-token", "X-Amz-Credential", "private_key",
    "client_secret", "access_token", "accessToken", "secretKey", "SharedAccessKey", "mytoken",
    "oauth", "db_password", "PASSWD", "x-jwt-assertion", "bearer_token", "JSESSIONID",
    "PHPSESSID", "sessionid", "X-Session-Affinity", "Idempotency-Key", "token_type",
    "primary_key", "API Key", "key", "auth", "session",
]  # fmt: skip
NOT_CREDENTIALS = [
    "monkey", "hockey", "keyboard", "keys", "primaryKey", "sortkey", "author", "X-Goog-AuthUser",
    "max_tokens", "prompt_tokens", "Content-Type", "User-Agent", "X-Request-Id", "code", "sig",
    "KeyError", "tokenizer", "passage", "cookies_enabled", "", "-",
]  # fmt: skip


@pytest.mark.parametrize("name", LOOK_LIKE_CREDENTIALS, ids=LOOK_LIKE_CREDENTIALS)
def test_names_that_look_like_credentials(name: str) -> None:
    """A name with a credential word among its words (or ending one of them) is a credential's."""
    assert credential_name(name)


@pytest.mark.parametrize("name", NOT_CREDENTIALS, ids=NOT_CREDENTIALS)
def test_names_that_do_not(name: str) -> None:
    """Words that merely contain a credential word (or end with a bare ``key``) are not."""
    assert not credential_name(name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("X-RapidAPI-Key", True, id="header-name"),
        pytest.param("api_key", True, id="listed"),
        pytest.param("client_assertion", True, id="listed-outside-the-rule"),
        pytest.param("Password", True, id="one-credential-word"),
        pytest.param("key", False, id="bare-key"),
        pytest.param("Auth", False, id="bare-auth"),
        pytest.param("session", False, id="bare-session"),
        pytest.param("code", False, id="bare-code"),
        pytest.param("tool_name", False, id="ordinary"),
        pytest.param("missing_auth", False, id="tdk-detail"),
    ],
)
def test_credential_keys(name: str, expected: bool) -> None:
    """Keys of structured data follow the rule, except bare words that are ordinary field names."""
    assert credential_key(name) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "X-RapidAPI-Key: rk-7c1d9e2f4a6b8c0d\nAccept: */*",
            f"X-RapidAPI-Key: {REDACTED}\nAccept: */*",
            id="header-line",
        ),
        pytest.param(
            "sent DD-API-KEY: 0a1b 2c3d, then",
            f"sent DD-API-KEY: {REDACTED}, then",
            id="header-line-spaces",
        ),
        pytest.param(
            "[('X-RapidAPI-Key', 'rk-1'), ('accept', '*/*')]",
            f"[('X-RapidAPI-Key', '{REDACTED}'), ('accept', '*/*')]",
            id="pair",
        ),
        pytest.param(
            '{"X-Vault-Token": "hvs.abc", "Stripe-Signature": "t=1,v1=ab"}',
            f'{{"X-Vault-Token": "{REDACTED}", "Stripe-Signature": "{REDACTED}"}}',
            id="json-keys",
        ),
        pytest.param(
            "?apiKey=ak1&x_auth_token=t2", f"?apiKey={REDACTED}&x_auth_token={REDACTED}", id="query"
        ),
        pytest.param("password: hunter2hunter2 ok", f"password: {REDACTED} ok", id="one-word-name"),
        pytest.param("primary key: 5", "primary key: 5", id="prose-kept"),
        pytest.param('{"key": "id"}', '{"key": "id"}', id="json-key-kept"),
        pytest.param("('session', 'abc')", "('session', 'abc')", id="pair-bare-word-kept"),
        pytest.param("monkey: 1, monkey=2", "monkey: 1, monkey=2", id="monkey-kept"),
        pytest.param("max_tokens: 100", "max_tokens: 100", id="tokens-kept"),
    ],
)
def test_credential_names_in_text(text: str, expected: str) -> None:
    """Values under credential-looking names are replaced in header lines, pairs, JSON and
    queries; prose and ordinary keys are kept."""
    assert redact_text(text) == expected


def test_many_names_are_judged_alike() -> None:
    """However many distinct names go by, each is judged by the same rule."""
    for round_ in range(2):
        for i in range(5_000):
            assert credential_name(f"x-{round_}-{i}-key")
            assert not credential_name(f"field-{round_}-{i}")
