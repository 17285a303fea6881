"""Redacting the log lines of httpx itself.

httpx logs every request at INFO on the ``httpx`` logger with the whole URL (userinfo and
query credentials included), and httpcore's DEBUG lines list response headers (``Set-Cookie``
among them). :class:`RedactingLogFilter` gives those records the redaction tdk applies to its
own texts; :func:`redact_httpx_logs` puts one on the ``httpx`` logger, and ``install()`` does so
when it adds the hook.
"""

from __future__ import annotations

import logging
from typing import Final

from tdk._redact import redact_text, redact_url

#: Class names of the URL objects whose whole text is redacted as a URL (httpx and httpx2).
_URL_TYPES: Final = frozenset({"URL"})


class RedactingLogFilter(logging.Filter):
    """A logging filter that redacts a record's message as tdk redacts its own texts.

    URL arguments (``httpx.URL``, as httpx passes the request's URL) lose their userinfo and
    every query value outside the allowlist of :func:`~tdk._redact.redact_url`; the rest of the
    message loses credentials by position and token shapes. The message is formatted once,
    here, and stored redacted (``record.args`` becomes None). Records are never dropped.

    On a logger it sees only that logger's own records; on a handler, every record the handler
    emits (which is how to cover httpcore's loggers, ``httpcore.http11`` and the like).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True (the record is kept)."""
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: left to logging
            return True
        arguments = record.args if isinstance(record.args, tuple) else ()
        for argument in arguments:
            if type(argument).__name__ in _URL_TYPES:
                url = str(argument)
                message = message.replace(url, redact_url(url))
        record.msg = redact_text(message)
        record.args = None
        return True


_HTTPX_FILTER: Final = RedactingLogFilter()


def redact_httpx_logs() -> RedactingLogFilter:
    """Put a :class:`RedactingLogFilter` on the ``httpx`` logger (once) and return it.

    ``install()`` calls this. Call it yourself when you add the hook to a client's
    ``event_hooks`` by hand. It costs nothing while INFO records of ``httpx`` are not enabled
    (the default level is WARNING): a logger's filters run only for records it emits.
    """
    logger = logging.getLogger("httpx")
    if _HTTPX_FILTER not in logger.filters:
        logger.addFilter(_HTTPX_FILTER)
    return _HTTPX_FILTER
