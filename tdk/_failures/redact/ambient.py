"""The secrets of the tool call running in this context, which every redaction made during the
call scrubs as well: set for the call's duration by :func:`call_secrets`."""

from __future__ import annotations

from contextvars import ContextVar, Token

__all__ = ["CALL_SECRETS", "call_secrets", "end_call_secrets"]


#: The exact secret values of the tool call running in this context (its ``ToolContext``'s
#: secrets and auth token), set by the executor for the call's duration (see
#: :func:`call_secrets`). Every redaction made during the call scrubs them as well: texts tdk
#: builds deep inside the call (the HTTP hook's errors, httpx's own log lines) do not have to
#: be handed the context to be safe.
CALL_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("tdk_call_secrets", default=())


def call_secrets(secrets: tuple[str, ...]) -> Token[tuple[str, ...]]:
    """Add ``secrets`` to the current call's, in this context (a call made inside another
    keeps the outer call's too); undo with :func:`end_call_secrets`.

    Worker threads the call starts with the context copied (as the executor's do) see them.
    """
    outer = CALL_SECRETS.get()
    return CALL_SECRETS.set((*outer, *secrets) if outer else secrets)


def end_call_secrets(token: Token[tuple[str, ...]]) -> None:
    """Restore the secrets that were current before :func:`call_secrets` returned ``token``."""
    try:
        CALL_SECRETS.reset(token)
    except ValueError:  # a call closed in another context (its loop is gone): nothing to undo
        return
