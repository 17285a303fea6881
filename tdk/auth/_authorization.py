"""What became of a user's authorization at a provider: the outcome of the callback the
provider sends the user's browser to (``runner.complete_authorization()``, or
``/oauth/callback`` of ``tdk serve --http``); and the failures of the flow that keeps the
user's tokens (the provider's token endpoint, the token store).

Standard library only: the runner reads these without the auth extra loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["REASONS", "Authorization", "ProviderError", "Reason", "TokenStoreError"]

#: Why an authorization ended as it did.
Reason = Literal[
    "attached",
    "declined",
    "forged",
    "expired",
    "other_user",
    "used",
    "exchange_failed",
    "store_unavailable",
]
#: Each reason, and what the user is told (tdk's words: never a token, never the provider's).
REASONS: Final[dict[str, str]] = {
    "attached": "You are signed in. Go back to your assistant: the call can go on now.",
    "declined": "The authorization was declined: nothing was attached.",
    "forged": "This sign-in link is not one this server made: nothing was attached.",
    "expired": "This sign-in link has expired: ask your assistant to try again.",
    "other_user": (
        "This sign-in link was made for another user: nothing was attached. Ask your "
        "assistant for a link of your own."
    ),
    "used": "This sign-in link was used already: nothing more was attached.",
    "exchange_failed": (
        "The provider did not complete the sign-in: nothing was attached. Ask your "
        "assistant to try again."
    ),
    "store_unavailable": "The sign-in cannot be saved right now: try again in a moment.",
}


@dataclass(frozen=True, slots=True)
class Authorization:
    """The outcome of a provider's callback.

    .. versionadded:: 0.1.0
    """

    attached: bool
    """Whether the user's tokens at the provider are now kept (the call can run)."""
    provider: str | None
    """The provider's name, when the link named one this server knows."""
    reason: Reason
    """``"attached"``, or why nothing was: ``"declined"`` (the user said no at the
    provider), ``"forged"`` (a state this server did not seal), ``"expired"``,
    ``"other_user"`` (the link was opened by someone other than the user it was made for),
    ``"used"`` (a replay), ``"exchange_failed"`` (the provider did not trade the code),
    ``"store_unavailable"``."""

    @property
    def message(self) -> str:
        """What to tell the person who opened the link (safe to show in a page)."""
        return REASONS[self.reason]


class ProviderError(Exception):
    """A provider's token endpoint did not give tokens. ``reason``: ``"refused"`` (the grant
    is invalid, expired or revoked: the user must authorize again) or ``"unavailable"`` (down,
    slow, an answer that is not a token answer); ``str()`` says why in tdk's words."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        """``"refused"`` (authorize again) or ``"unavailable"`` (try again later)."""


class TokenStoreError(RuntimeError):
    """The token store cannot be reached: no token is given (a call that needs one fails)."""
