"""The upstream's own words: a bounded body read, a bounded decompressor, and extraction.

The hook never calls ``response.read()`` on an error: a 50 MB gzip bomb would be inflated in
full. It pulls at most ``limit`` raw bytes through ``iter_raw()``/``aiter_raw()`` and inflates
them with :mod:`zlib` under ``max_length``, so neither the raw nor the decoded bytes pass the
limit. The read also stops after ``seconds`` (a body that trickles in one byte at a time would
hold the hook for as long as the upstream likes): under :func:`asyncio.timeout` in the async
read, by the clock between chunks in both (one blocking read is bounded by httpx's own read
timeout). What arrived by then is used. Only ``gzip``, ``x-gzip``, ``deflate`` and
``identity`` are decoded (the standard library has no bounded brotli or zstd decoder before
Python 3.14); another encoding leaves the body out, and classification uses status and headers
alone.

Extraction follows UPSTREAM.md, checking the type of every member it reads (a member of the
wrong type is ignored, as RFC 9457 asks). HTML is never quoted: at most its ``<title>``, which
goes to developers only. Field errors (which argument is wrong, and why) are read from the
common validation shapes, field name and problem text only: never the submitted values that
some shapes echo (pydantic's ``input`` and ``ctx``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import math
import re
import time
import zlib
from collections.abc import AsyncGenerator, Generator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, cast

import httpx

from tdk._failures.hidden import HIDDEN_CHARACTERS

#: Raw (and decoded) bytes the hook reads from an error body at most.
DEFAULT_MAX_BODY_BYTES: Final = 65_536
#: Seconds the hook spends reading an error body at most.
DEFAULT_MAX_BODY_SECONDS: Final = 2.0
#: Longest upstream text kept before redaction and truncation for messages.
MAX_UPSTREAM_CHARS: Final = 2_000
#: Longest code, type or title kept.
MAX_TOKEN_CHARS: Final = 120
#: List items looked at when searching codes (GraphQL ``errors``, Google ``errors``...).
_MAX_ITEMS: Final = 20
#: Field errors kept, and the longest problem text of one.
MAX_FIELD_ERRORS: Final = 10
MAX_PROBLEM_CHARS: Final = 300
#: Parts of a pydantic ``loc`` joined into a field name at most.
_MAX_LOC_PARTS: Final = 10
#: Digits of a JSON integer converted to ``int`` on the second try (below every limit that
#: ``sys.set_int_max_str_digits`` accepts); a longer one reads as an infinite float.
_MAX_JSON_INT_DIGITS: Final = 600

#: Control characters, and those that split a line or hide text (as a log line escapes them).
_CONTROL = re.compile(f"[\x00-\x1f{HIDDEN_CHARACTERS}]+")
_SPACES = re.compile(r"\s{2,}")
_XML_CODE = re.compile(r"<Code>([^<]{1,200})</Code>")
_CHARSET = re.compile(r"charset\s*=\s*[\"']?([^\s;\"']+)", re.IGNORECASE)
_XML_MESSAGE = re.compile(r"<Message>([^<]{1,4000})</Message>")
#: The text encodings a ``charset`` may name, by Python codec name: those of the WHATWG
#: Encoding Standard (what browsers decode) that Python has, plus UTF-32. All decode in linear
#: time and never raise with ``errors="replace"``; any other label (``idna``, ``punycode``,
#: ``undefined``, ``unicode_escape``, ``utf-7``, bytes-to-bytes codecs such as ``base64``...)
#: falls back to UTF-8.
_TEXT_ENCODINGS: Final = frozenset(
    {
        "utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be",
        "utf-32-le", "ascii", "iso8859-1", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5",
        "iso8859-6", "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13", "iso8859-14",
        "iso8859-15", "iso8859-16", "cp866", "cp874", "cp1250", "cp1251", "cp1252", "cp1253",
        "cp1254", "cp1255", "cp1256", "cp1257", "cp1258", "koi8-r", "koi8-u", "mac-roman",
        "gbk", "gb2312", "gb18030", "big5", "euc_jp", "iso2022_jp", "shift_jis", "euc_kr",
    }
)  # fmt: skip
#: What a charset label may look like before Python's codec registry is asked about it (which
#: imports ``encodings.<label>``): short, and starting with a letter (never ``__init__``).
_CHARSET_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9._:-]{0,39}")
#: Integer codes from this size on are garbage (no code has 120 digits).
_MAX_CODE: Final = 10**MAX_TOKEN_CHARS
#: Content encodings decoded, with their zlib window bits.
_WBITS: Final = {
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}


@dataclass(frozen=True, slots=True)
class UpstreamBody:
    """What an error body says, sanitized (control characters stripped) but not yet redacted."""

    payload: object = None
    """The parsed JSON document, or None."""
    text: str | None = None
    """The upstream's own message (never from HTML)."""
    codes: tuple[str, ...] = ()
    """Every code-like string found, the most specific first (``code``, ``status``, Google
    ``reason``, AWS ``__type``, Salesforce ``errorCode``, GraphQL ``extensions.code``...)."""
    type: str | None = None
    html_title: str | None = None
    fields: tuple[tuple[str, str], ...] = ()
    """Field errors as (field, problem) pairs: at most ``MAX_FIELD_ERRORS``, each text cut."""


EMPTY: Final = UpstreamBody()


class _Inflater:
    """Decode one content encoding into at most ``limit`` bytes."""

    __slots__ = ("_decoder", "_limit", "_retry_raw", "consumed", "out")

    def __init__(self, encoding: str, limit: int) -> None:
        self._limit = limit
        wbits = _WBITS.get(encoding)
        self._decoder = None if wbits is None else zlib.decompressobj(wbits)
        # "deflate" should be zlib-wrapped, but some servers send it raw (httpx retries too)
        self._retry_raw = encoding == "deflate"
        self.out = bytearray()
        self.consumed = 0
        """How many bytes of the last ``data`` fed were decoded (the rest would overflow)."""

    def feed(self, data: bytes) -> bool:
        """Decode ``data``; True once the output is full, the stream ended, or it is corrupt."""
        room = self._limit - len(self.out)
        if room <= 0:  # pragma: no cover (callers stop once it is full; zlib would read
            self.consumed = 0  # max_length=0 as "no limit": never ask for that)
            return True
        if self._decoder is None:
            self.out += data[:room]
            self.consumed = min(len(data), room)
            return len(self.out) >= self._limit
        try:
            self.out += self._decoder.decompress(data, room)
        except zlib.error:
            self.consumed = 0
            if not self._retry_raw:
                return True  # corrupt: keep what was decoded so far
            self._retry_raw = False
            self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data)
        self.consumed = len(data) - len(self._decoder.unconsumed_tail)
        self._retry_raw = False  # the format was right; a later error is corruption
        return len(self.out) >= self._limit or self._decoder.eof


def supported_encoding(response: httpx.Response) -> str | None:
    """The one content encoding to undo (``identity`` for none), or None if unsupported."""
    value: str = response.headers.get("content-encoding", "")
    codings = [part.strip().lower() for part in value.split(",")]
    codings = [coding for coding in codings if coding and coding != "identity"]
    if not codings:
        return "identity"
    if len(codings) == 1 and codings[0] in _WBITS:
        return codings[0]
    return None


def read_content(response: httpx.Response, limit: int) -> bytes | None:
    """The body when it has already been read (decoded by httpx), cut to ``limit``; else None."""
    try:
        return response.content[:limit]
    except Exception:  # ResponseNotRead, from httpx or httpx2
        return None


def _unread(response: httpx.Response) -> bool:
    return not response.is_stream_consumed and not response.is_closed


class _BoundedStream(httpx.SyncByteStream):
    """A response stream that ends once what it passed on would decode to more than ``limit``
    bytes, or after ``seconds`` (checked between chunks): what httpx reads, and decodes, of a
    challenge hop that an auth flow answers. ``inflater`` decodes alongside httpx, to know
    where to stop; None (an encoding tdk cannot decode within bounds): nothing is passed on."""

    def __init__(
        self, inner: httpx.SyncByteStream, inflater: _Inflater | None, seconds: float
    ) -> None:
        self._inner = inner
        self._inflater = inflater
        self._seconds = seconds

    def __iter__(self) -> Generator[bytes, None, None]:
        inflater = self._inflater
        if inflater is None:
            return
        deadline = time.monotonic() + self._seconds
        for chunk in self._inner:
            full = inflater.feed(chunk)
            if inflater.consumed:
                yield chunk[: inflater.consumed]
            if full or time.monotonic() >= deadline:
                return

    def close(self) -> None:
        self._inner.close()


class _AsyncBoundedStream(httpx.AsyncByteStream):
    """The async twin of :class:`_BoundedStream`."""

    def __init__(
        self, inner: httpx.AsyncByteStream, inflater: _Inflater | None, seconds: float
    ) -> None:
        self._inner = inner
        self._inflater = inflater
        self._seconds = seconds

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        inflater = self._inflater
        if inflater is None:
            return
        deadline = time.monotonic() + self._seconds
        async for chunk in self._inner:
            full = inflater.feed(chunk)
            if inflater.consumed:
                yield chunk[: inflater.consumed]
            if full or time.monotonic() >= deadline:
                return

    async def aclose(self) -> None:
        await self._inner.aclose()


def bound_stream(
    response: httpx.Response, limit: int, seconds: float, *, asynchronous: bool
) -> None:
    """Make whatever reads ``response`` from now on (httpx itself, for an auth flow's hop) stop
    after ``seconds``, and before the body decodes to more than about ``limit`` bytes: a
    compressed body is cut where its decoding would pass the limit (give or take a kilobyte:
    the last input byte zlib reads may hold a few 258-byte copies), so that httpx's own
    decoders never inflate a bomb. A body in an encoding tdk does not decode (several
    layers, brotli, zstd) is left out. Only httpx's own stream types are wrapped."""
    stream = response.stream
    encoding = supported_encoding(response)
    inflater = None if encoding is None else _Inflater(encoding, limit)
    if asynchronous and isinstance(stream, httpx.AsyncByteStream):
        response.stream = _AsyncBoundedStream(stream, inflater, seconds)
    elif not asynchronous and isinstance(stream, httpx.SyncByteStream):
        response.stream = _BoundedStream(stream, inflater, seconds)


def read_bounded(
    response: httpx.Response, limit: int, seconds: float = DEFAULT_MAX_BODY_SECONDS
) -> bytes | None:
    """At most ``limit`` raw bytes of an unread body, read for at most about ``seconds``,
    decoded into at most ``limit`` bytes.

    The clock is checked between chunks: one blocking read lasts at most httpx's read timeout.
    A body that was already read is taken from ``response.content``; one that was consumed
    without being kept gives None. A transport error while reading (the connection broke, a
    read timed out) ends the read: what arrived is used.
    """
    if not _unread(response):
        return read_content(response, limit)
    encoding = supported_encoding(response)
    if encoding is None:
        return None
    inflater = _Inflater(encoding, limit)
    chunks = cast(Generator[bytes, None, None], response.iter_raw())
    deadline = time.monotonic() + seconds
    taken = 0
    try:
        for chunk in chunks:
            piece = chunk[: limit - taken]
            taken += len(piece)
            if inflater.feed(piece) or taken >= limit or time.monotonic() >= deadline:
                break
    except httpx.HTTPError:  # the connection broke mid-body: use what arrived
        pass
    finally:
        chunks.close()
    return bytes(inflater.out)


async def aread_bounded(
    response: httpx.Response, limit: int, seconds: float = DEFAULT_MAX_BODY_SECONDS
) -> bytes | None:
    """The async twin of :func:`read_bounded`, through ``aiter_raw()``: under
    :func:`asyncio.timeout` on asyncio, so that a read waiting for its next chunk is cut too;
    by the clock between chunks under another event loop (trio)."""
    if not _unread(response):
        return read_content(response, limit)
    encoding = supported_encoding(response)
    if encoding is None:
        return None
    inflater = _Inflater(encoding, limit)
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_raw())
    deadline = time.monotonic() + seconds
    taken = 0
    try:
        async with _read_deadline(seconds):
            async for chunk in chunks:
                piece = chunk[: limit - taken]
                taken += len(piece)
                if inflater.feed(piece) or taken >= limit or time.monotonic() >= deadline:
                    break
    except (httpx.HTTPError, TimeoutError):  # broken, or out of time: use what arrived
        pass
    finally:
        await chunks.aclose()
    return bytes(inflater.out)


def _read_deadline(seconds: float) -> AbstractAsyncContextManager[object]:
    """``asyncio.timeout(seconds)`` inside an asyncio task, else a context that does nothing."""
    try:
        running = asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop running: trio, or a coroutine driven by hand
        running = False
    return asyncio.timeout(seconds) if running else contextlib.nullcontext()


def clean(text: str, limit: int = MAX_UPSTREAM_CHARS) -> str:
    """Control and bidi characters replaced by spaces, runs of spaces folded, cut to ``limit``."""
    if len(text) <= limit and text.isprintable() and "  " not in text:
        return text.strip()  # the common case; isprintable() is False for every control char
    text = _CONTROL.sub(" ", text[: limit * 2])
    return _SPACES.sub(" ", text).strip()[:limit]


def parse_body(body: bytes | None, content_type: str) -> UpstreamBody:
    """Find the upstream's message, codes and type in an error body (see the module doc)."""
    if not body:
        return EMPTY
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    label = _CHARSET.search(params) if params else None
    charset = label[1] if label else None
    head = body[:64].lstrip().lower()
    if "html" in media or head.startswith((b"<!doctype html", b"<html")):
        found = _html_title(body)
        title = clean(_unescape(_decode(found, charset)), MAX_TOKEN_CHARS) if found else ""
        return UpstreamBody(html_title=title or None)
    if head.startswith((b"{", b"[")) or "json" in media:
        payload = _json(body if charset is None else _decode(body, charset))
        if isinstance(payload, dict | list):
            return _from_json(payload)
    text = _decode(body, charset)
    if "xml" in media or head.startswith((b"<?xml", b"<error")):
        code = _XML_CODE.search(text)
        message = _XML_MESSAGE.search(text)
        return UpstreamBody(
            text=(clean(_unescape(message[1])) or None) if message else None,
            codes=(clean(code[1], MAX_TOKEN_CHARS),) if code else (),
        )
    if media and not media.startswith("text/") and "json" not in media:
        return EMPTY  # binary or unknown media: nothing to quote
    for line in text.splitlines():
        if line.strip():
            return UpstreamBody(text=clean(line) or None)
    return EMPTY


def _html_title(body: bytes) -> bytes | None:
    """The text between the first ``<title...>`` and the ``</title`` after it (ASCII case
    ignored), or None: what ``<title[^>]*>(.*?)</title`` finds, in linear time (the pattern
    rescanned the rest of the body from every ``<title`` without a closing tag)."""
    lowered = body.lower()
    start = lowered.find(b"<title")
    opened = lowered.find(b">", start) if start >= 0 else -1
    end = lowered.find(b"</title", opened) if opened >= 0 else -1
    return body[opened + 1 : end] if end >= 0 else None


def _json(document: bytes | str) -> object:
    """The parsed document, or None. From bytes, json detects UTF-8/16/32 itself.

    An integer longer than Python converts (4,300 digits by default) makes ``json.loads`` fail
    as a whole; a second parse reads such integers as infinite floats, so that the rest of the
    body (the message, a huge ``retry_after``, which then clamps) is still read.
    """
    try:
        if isinstance(document, bytes) and document[:1] in b"{[" and document[1:2] != b"\x00":
            # What json.loads does to bytes that cannot be UTF-16/32, without its Python-level
            # detect_encoding(): the common case, on the hot path of every JSON error body.
            document = document.decode("utf-8", "surrogatepass")
        return json.loads(document)
    except RecursionError:
        return None
    except ValueError:  # UnicodeDecodeError too
        pass
    try:
        return json.loads(document, parse_int=_json_int)
    except (ValueError, RecursionError):
        return None


def _json_int(text: str) -> int | float:
    if len(text) <= _MAX_JSON_INT_DIGITS:
        return int(text)
    return -math.inf if text.startswith("-") else math.inf


def _unescape(text: str) -> str:
    from html import unescape  # rare paths (HTML, XML): keep ``import tdk.http`` light

    return unescape(text)


def _decode(body: bytes, charset: str | None) -> str:
    """``body`` as text in the declared charset when it is a real text encoding, else UTF-8;
    undecodable bytes become U+FFFD."""
    return body.decode(_encoding(charset) if charset else "utf-8", errors="replace")


@lru_cache(maxsize=64)
def _encoding(label: str) -> str:
    """The Python codec for a charset label if it is in ``_TEXT_ENCODINGS``, else UTF-8."""
    if _CHARSET_LABEL.fullmatch(label) is None:  # a 10 KB label never reaches the registry
        return "utf-8"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return "utf-8"
    return name if name in _TEXT_ENCODINGS else "utf-8"


def _str(value: object) -> str | None:
    if isinstance(value, str):
        text = clean(value)
        return text or None
    return None


def _code(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):  # a longer one is garbage (and str() of it costs quadratic time)
        return str(value) if -_MAX_CODE < value < _MAX_CODE else None
    if isinstance(value, str):
        text = clean(value.rpartition("#")[2], MAX_TOKEN_CHARS)  # AWS "namespace#Code"
        return text or None
    return None


def _dicts(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value[:_MAX_ITEMS] if isinstance(item, dict)]


def _from_json(payload: dict[str, Any] | list[Any]) -> UpstreamBody:
    items = _dicts(payload) if isinstance(payload, list) else [payload]
    if not items:
        return UpstreamBody(payload=payload)
    first = items[0]
    codes: list[str | None] = []
    text: str | None = None
    kind: str | None = None
    error = first.get("error")
    if isinstance(error, dict):  # Google, OpenAI, Anthropic, Microsoft Graph, Stripe
        text = _str(error.get("message"))
        kind = _str(error.get("type"))
        for key in ("code", "status"):  # Google's numeric code is the HTTP status: skipped
            if isinstance(error.get(key), str):
                codes.append(_code(error[key]))
        for key in ("errors", "details"):  # Google's reasons, legacy and ErrorInfo
            if key in error:
                codes.extend(_code(item.get("reason")) for item in _dicts(error[key]))
    elif isinstance(error, str):  # OAuth2
        text = _str(first.get("error_description")) or _str(error)
        codes.append(_code(error))
    if text is None:  # RFC 9457 problem details
        text = _str(first.get("detail")) or _str(first.get("title"))
    errors = first.get("errors")
    if errors is not None:
        listed = _dicts(errors)
        for item in listed:  # JSON:API, GraphQL
            extensions = item.get("extensions")
            codes.append(_code(item.get("code")))
            codes.append(_code(extensions.get("code")) if isinstance(extensions, dict) else None)
            codes.append(_code(item.get("type")))
        if text is None and listed:
            top = listed[0]
            text = _str(top.get("detail")) or _str(top.get("message")) or _str(top.get("title"))
        if text is None:
            text = _shopify(errors)
    if text is None:  # GitHub, Discord, Notion, HubSpot, AWS JSON
        text = _str(first.get("message")) or _str(first.get("Message"))
    for key in ("code", "__type"):  # Discord, Notion, AWS JSON...
        if key in first:
            codes.append(_code(first[key]))
    for item in items:  # Salesforce
        if "errorCode" in item:
            codes.append(_code(item["errorCode"]))
    if kind is None:
        kind = _str(first.get("type"))
    return UpstreamBody(
        payload=payload,
        text=text,
        codes=tuple(dict.fromkeys(filter(None, codes))),
        type=kind[:MAX_TOKEN_CHARS] if kind else None,
        fields=_field_errors(first, error) if _may_list_fields(first, error) else (),
    )


def _may_list_fields(first: dict[str, Any], error: object) -> bool:
    """Whether ``first`` has a member that :func:`_field_errors` reads (most bodies have none:
    the check keeps the common case cheap)."""
    if "errors" in first or "invalid-params" in first or "detail" in first:
        return True
    return isinstance(error, dict) and ("param" in error or "details" in error)


def _field_errors(first: dict[str, Any], error: object) -> tuple[tuple[str, str], ...]:
    """(field, problem) pairs from every shape that names the fields at fault:

    - RFC 9457 ``errors[]`` with ``pointer`` + ``detail``; JSON:API ``errors[]`` with
      ``source.pointer`` (or ``source.parameter``) + ``detail`` (else ``title``); GitHub
      ``errors[]`` with ``field`` + ``message`` (else ``code``);
    - RFC 7807-style ``invalid-params[]`` with ``name`` + ``reason``;
    - FastAPI/pydantic ``detail[]`` with ``loc`` + ``msg`` (``input`` and ``ctx`` never read);
    - Stripe ``error.param`` + ``error.message`` (else ``error.code``); Google
      ``error.details[].fieldViolations[]`` with ``field`` + ``description``.

    An item missing either part, or holding one of the wrong type, is skipped.
    """
    found: list[tuple[str | None, str | None]] = []
    errors = first.get("errors")
    if isinstance(errors, list):  # each shape is looked at only when present: this is hot
        for item in _dicts(errors):
            source = item.get("source")
            if not isinstance(source, dict):
                source = {}
            field = _token(item.get("pointer")) or _token(source.get("pointer"))
            field = field or _token(source.get("parameter")) or _token(item.get("field"))
            if field is not None:
                problem = _clean_problem(item.get("detail")) or _clean_problem(item.get("message"))
                problem = (
                    problem or _clean_problem(item.get("title")) or _clean_problem(item.get("code"))
                )
                found.append((field, problem))
    params = first.get("invalid-params")
    if isinstance(params, list):
        found.extend(
            (_token(i.get("name")), _clean_problem(i.get("reason"))) for i in _dicts(params)
        )
    detail = first.get("detail")
    if isinstance(detail, list):
        found.extend(
            (_location(i.get("loc")), _clean_problem(i.get("msg"))) for i in _dicts(detail)
        )
    if isinstance(error, dict):  # ``first["error"]``
        param = error.get("param")
        if isinstance(param, str):
            problem = _clean_problem(error.get("message")) or _clean_problem(error.get("code"))
            found.append((_token(param), problem))
        details = error.get("details")
        if isinstance(details, list):
            for violations in _dicts(details):
                for item in _dicts(violations.get("fieldViolations")):
                    found.append(
                        (_token(item.get("field")), _clean_problem(item.get("description")))
                    )
    if not found:
        return ()
    pairs = dict.fromkeys((field, problem) for field, problem in found if field and problem)
    return tuple(pairs)[:MAX_FIELD_ERRORS]


def _token(value: object) -> str | None:
    return (clean(value, MAX_TOKEN_CHARS) or None) if isinstance(value, str) else None


def _clean_problem(value: object) -> str | None:
    return (clean(value, MAX_PROBLEM_CHARS) or None) if isinstance(value, str) else None


def _location(value: object) -> str | None:
    """A pydantic ``loc`` (``["body", "tags", 0]``) as ``body.tags.0``; None unless every part
    is a string or an index (an integer of sane size)."""
    if not isinstance(value, list) or not value:
        return None
    parts = [part if isinstance(part, str) else _code(part) for part in value[:_MAX_LOC_PARTS]]
    names = [part for part in parts if part is not None]
    return _token(".".join(names)) if len(names) == len(parts) else None


def _shopify(errors: object) -> str | None:
    """Shopify ``errors``: a string, or a map of field -> messages."""
    if isinstance(errors, str):
        return _str(errors)
    if not isinstance(errors, dict):
        return None
    parts = []
    for field, messages in list(errors.items())[:_MAX_ITEMS]:
        listed = messages if isinstance(messages, list) else [messages]
        words = [m for m in listed[:_MAX_ITEMS] if isinstance(m, str)]
        if words:
            parts.append(f"{field}: {', '.join(words)}")
    return _str("; ".join(parts))
