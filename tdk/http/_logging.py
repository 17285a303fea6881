"""Redacting the log lines of httpx itself.

httpx logs every request at INFO on the ``httpx`` logger (httpx2 on ``httpx2``) with the
whole URL, userinfo and query credentials included, and httpcore's DEBUG lines list response
headers (``Set-Cookie`` among them, and whatever an upstream echoes back).
:class:`RedactingLogFilter` gives those records the redaction tdk applies to its own texts,
the secrets of the tool call running included; :func:`redact_httpx_logs` puts one on each of
those loggers, and ``install()`` does so when it adds the hook.
"""

from __future__ import annotations

import logging
from typing import Final

from tdk._failures.redact import redact_text, redact_url

#: Class names of the URL objects whose whole text is redacted as a URL (httpx and httpx2).
_URL_TYPES: Final = frozenset({"URL"})


class RedactingLogFilter(logging.Filter):
    """A logging filter that redacts a record's message as tdk redacts its own texts.

    URL arguments (``httpx.URL``, as httpx passes the request's URL) lose their userinfo and
    the values of credential parameters (see :func:`~tdk._failures.redact.redact_url`); the rest of
    the message loses credentials by position, token shapes and the running call's secrets. The
    message is formatted once, here, and stored redacted (``record.args`` becomes None). A
    traceback is rendered here with the default formatting and stored redacted as
    ``exc_text``, which logging's formatters print instead of rendering ``exc_info`` again;
    ``stack_info`` is redacted too. ``exc_info`` itself is kept, for code that wants the
    exception object: a formatter or handler that renders it on its own (an error tracker, a
    JSON formatter) sees the original text. Records are never dropped.

    On a logger it sees only that logger's own records; on a handler, every record the handler
    emits (which is how to cover httpcore's loggers, ``httpcore.http11`` and the like).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True (the record is kept)."""
        arguments = record.args if isinstance(record.args, tuple) else ()
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: shown beside it, redacted
            try:
                message = f"{record.msg} {arguments or record.args!r}"
            except Exception:  # a message or argument whose str() fails as well
                message = f"<a log message that could not be formatted ({type(record.msg)})>"
        for argument in arguments:
            if type(argument).__name__ in _URL_TYPES:
                url = str(argument)
                message = message.replace(url, redact_url(url))
        record.msg = redact_text(message)
        record.args = None
        if record.exc_info:
            # A traceback quotes exception texts: rendered here and redacted, over any text a
            # handler rendered before. Formatters use this text; the exception stays in
            # ``exc_info`` for code that wants the object (caplog, error trackers).
            record.exc_text = redact_text(_FORMATTER.formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


#: Renders a record's traceback before it is redacted (as a handler's formatter would).
_FORMATTER: Final = logging.Formatter()
_FILTER: Final = RedactingLogFilter()
#: The loggers that write what a request sent and received: httpx's and httpx2's line per
#: request (the whole URL), and httpcore's DEBUG trace lines (response headers). A filter on
#: a logger sees only the records of that very logger, so each of them gets one.
_REQUEST_LOGGERS: Final = (
    "httpx",
    "httpx2",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


def redact_httpx_logs() -> RedactingLogFilter:
    """Put a :class:`RedactingLogFilter` on the ``httpx`` and ``httpx2`` loggers and on
    httpcore's (once each) and return it.

    ``install()`` calls this. Call it yourself when you add the hook to a client's
    ``event_hooks`` by hand. A logger's filters run only for the records it emits: while
    httpx's and httpcore's records are not enabled (the default), the filter never runs.
    """
    for name in _REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    return _FILTER
