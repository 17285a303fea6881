"""Which names are a credential's: of a header, a query or path parameter, a key of structured
data. The fixed lists of well-known names, and the rule that judges any other name by its
words (:func:`credential_name`)."""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "CREDENTIAL_WORDS",
    "JUDGED",
    "KEY_QUALIFIERS",
    "SECRET_HEADER_NAMES",
    "SECRET_KEYS",
    "SECRET_QUERY_NAMES",
    "SHORTEST_INFERRED_SECRET",
    "credential_key",
    "credential_name",
    "credential_parameter",
    "judge",
]


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
#: Keys tdk's own errors put in ``details`` whose values are names, never credentials
#: (``missing_auth``: the provider a call has no user's token for), though a credential word
#: is among their words.
_TDK_DETAIL_KEYS: Final = frozenset(("missing_auth",))


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
#: header, is a credential parameter, is a credential key; see :func:`judge`). Short names
#: only, and emptied when full: the names every error repeats (``KeyError``, field names)
#: cost one lookup.
JUDGED: dict[str, tuple[bool, bool, bool, bool]] = {}
JUDGED_MAX: Final = 4096
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
    return judge(name.lower())[0]


def judge(lowered: str) -> tuple[bool, bool, bool, bool]:
    """What the lower-case name ``lowered`` is: (has a credential word, is a well-known header,
    is a credential parameter, is a credential key)."""
    verdict = JUDGED.get(lowered)
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
        lowered not in _AMBIGUOUS_NAMES
        and lowered not in _TDK_DETAIL_KEYS
        and (word or lowered in SECRET_KEYS),
    )
    if len(lowered) <= 64:
        if len(JUDGED) >= JUDGED_MAX:
            JUDGED.clear()
        JUDGED[lowered] = verdict
    return verdict


def credential_key(name: str) -> bool:
    """Whether the value under the key ``name`` of structured data (``details``, a JSON object,
    a ``(name, value)`` pair) is a credential: :func:`credential_name`, except for the bare
    words ``key``, ``auth`` and ``session`` (``{"key": "id"}``, ``"session": 3``) and tdk's
    own detail keys (``missing_auth``); and the names of :data:`SECRET_KEYS`."""
    return judge(name.lower())[3]


def credential_parameter(name: str) -> bool:
    """Whether the value of the query or path parameter ``name`` (decoded) is a credential:
    :func:`credential_name`, and the names of :data:`SECRET_QUERY_NAMES` (``code``, ``sig``,
    Azure SAS ``se``/``sv``...)."""
    return judge(name.lower())[2]
