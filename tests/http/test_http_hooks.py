"""``install``, the hook options, provider-specific body checks, the one code path shared with
``raise_for_status()``, and the last resort: a response that breaks the classifier still gives
its status's error."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from _http_responses import response

import tdk.http
from tdk.errors import (
    ErrorInfo,
    ErrorKind,
    UpstreamBadRequestError,
    UpstreamError,
    UpstreamNotFoundError,
    UpstreamRateLimitError,
    UpstreamServerError,
)

URL = "https://api.example.com/v1/items"


def mock_client(handler: Any, **options: Any) -> httpx.Client:
    return tdk.http.install(httpx.Client(transport=httpx.MockTransport(handler)), **options)


# -- install -------------------------------------------------------------------------------


def test_install_returns_the_client_with_one_sync_hook() -> None:
    """``install`` adds the sync hook to a ``Client`` and returns that client."""
    client = httpx.Client()
    with client:
        assert tdk.http.install(client) is client
        assert client.event_hooks["response"] == [tdk.http.raise_for_upstream]


def test_install_async_client_gets_the_async_hook() -> None:
    """An ``AsyncClient`` gets the coroutine hook."""
    client = tdk.http.install(httpx.AsyncClient())
    assert client.event_hooks["response"] == [tdk.http.araise_for_upstream]
    asyncio.run(client.aclose())


def test_installing_twice_leaves_one_hook_and_keeps_other_hooks() -> None:
    """A second install (with other options) replaces tdk's hook, never the user's."""
    mine = print
    with httpx.Client(event_hooks={"response": [mine], "request": [mine]}) as client:
        tdk.http.install(client)
        tdk.http.install(client)
        assert client.event_hooks["response"] == [mine, tdk.http.raise_for_upstream]
        tdk.http.install(client, max_retry_after_ms=1_000)
        tdk.http.install(client, max_retry_after_ms=2_000)
        hooks = client.event_hooks["response"]
        assert len(hooks) == 2
        assert hooks[0] is mine
        assert hooks[1].__self__ == tdk.http.UpstreamHook(max_retry_after_ms=2_000)
        tdk.http.install(client)
        assert client.event_hooks["response"] == [mine, tdk.http.raise_for_upstream]
        requests = client.event_hooks["request"]  # the user's, then tdk's (one, not three)
        assert len(requests) == 2
        assert requests[0] is mine


def test_install_rejects_what_is_not_a_client() -> None:
    """Anything but an httpx (or httpx2) client is a ``TypeError``."""
    with pytest.raises(TypeError, match=r"needs an httpx\.Client"):
        tdk.http.install(object())  # type: ignore[type-var]


FAKE_HTTPX2 = """
class Client:
    def __init__(self):
        self._hooks = {"request": [], "response": []}

    @property
    def event_hooks(self):
        return self._hooks

    @event_hooks.setter
    def event_hooks(self, hooks):
        self._hooks = hooks


class AsyncClient(Client):
    pass
"""


def test_install_supports_httpx2_when_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a package named ``httpx2`` importable, its clients get the matching hook."""
    (tmp_path / "httpx2.py").write_text(FAKE_HTTPX2)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "httpx2", raising=False)
    import httpx2  # type: ignore[import-not-found]

    try:
        sync = tdk.http.install(httpx2.Client())
        asynchronous = tdk.http.install(httpx2.AsyncClient(), max_body_bytes=10)
        assert sync.event_hooks["response"] == [tdk.http.raise_for_upstream]
        hook = asynchronous.event_hooks["response"][0]
        assert hook.__self__ == tdk.http.UpstreamHook(max_body_bytes=10)
        assert hook.__func__ is tdk.http.UpstreamHook.araise_for_upstream
        with pytest.raises(TypeError, match="not object"):
            tdk.http.install(object())  # type: ignore[type-var]
    finally:
        monkeypatch.delitem(sys.modules, "httpx2")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        pytest.param({"max_retry_after_ms": -1}, ValueError, id="negative-clamp"),
        pytest.param({"max_retry_after_ms": True}, ValueError, id="bool-clamp"),
        pytest.param({"max_body_bytes": 0}, ValueError, id="zero-body"),
        pytest.param({"max_body_bytes": 1.5}, ValueError, id="float-body"),
        pytest.param({"check_body": "slack"}, TypeError, id="uncallable-check"),
        pytest.param({"max_body_seconds": 0}, ValueError, id="zero-seconds"),
        pytest.param({"max_body_seconds": -1.5}, ValueError, id="negative-seconds"),
        pytest.param({"max_body_seconds": True}, ValueError, id="bool-seconds"),
        pytest.param({"max_body_seconds": "2"}, ValueError, id="str-seconds"),
        pytest.param({"max_body_seconds": float("nan")}, ValueError, id="nan-seconds"),
        pytest.param({"max_body_seconds": float("inf")}, ValueError, id="infinite-seconds"),
    ],
)
def test_invalid_options_are_rejected(options: dict[str, Any], error: type[Exception]) -> None:
    """Options are checked when the hook is built, not when a response arrives."""
    with pytest.raises(error):
        tdk.http.UpstreamHook(**options)


# -- below 400 ------------------------------------------------------------------------------


class Untouchable:
    """A response whose body and headers must not be touched."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the hook touched response.{name}")


@pytest.mark.parametrize("status", [100, 200, 204, 301, 302, 304, 399])
def test_below_400_touches_neither_body_nor_headers(status: int) -> None:
    """Success, informational and redirect answers return at once."""
    response: Any = Untouchable(status)
    assert tdk.http.raise_for_upstream(response) is None
    assert asyncio.run(tdk.http.araise_for_upstream(response)) is None
    assert tdk.http.classify(response) is None
    assert tdk.http.UpstreamHook().raise_for_upstream(response) is None


def test_a_redirect_chain_passes_until_the_error() -> None:
    """Every 3xx hop passes; the hook acts on the final 4xx."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/items":
            return httpx.Response(301, headers={"Location": "/v2/items"})
        return httpx.Response(410, json={"message": "v2 is gone too"})

    with mock_client(handler) as client, pytest.raises(UpstreamError) as caught:
        client.get(URL, follow_redirects=True)
    assert caught.value.kind is ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND
    assert caught.value.details["url"] == "https://api.example.com/v2/items"


def test_async_hook_on_a_response_that_was_read_by_the_transport() -> None:
    """A transport that hands over a body already read (``MockTransport``) is classified
    from ``response.content``."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"detail": "Name is too short."})

    async def fetch() -> None:
        transport = httpx.MockTransport(handler)
        async with tdk.http.install(httpx.AsyncClient(transport=transport)) as client:
            await client.get(URL)

    with pytest.raises(UpstreamError) as caught:
        asyncio.run(fetch())
    assert caught.value.message.endswith('Upstream message: "Name is too short."')


# -- options --------------------------------------------------------------------------------


def test_clamp_option_is_applied_and_noted() -> None:
    """``max_retry_after_ms`` clamps the wait; ``details`` keeps the upstream's value."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "120"})

    with (
        mock_client(handler, max_retry_after_ms=5_000) as client,
        pytest.raises(UpstreamRateLimitError) as caught,
    ):
        client.get(URL)
    assert caught.value.retry_after_ms == 5_000
    assert caught.value.details["retry_after_clamped_from_ms"] == 120_000


def test_body_seconds_option_accepts_ints_and_floats() -> None:
    """``max_body_seconds`` is any finite number > 0, given to ``install`` or the hook."""
    assert tdk.http.UpstreamHook(max_body_seconds=1).max_body_seconds == 1
    with mock_client(lambda request: httpx.Response(200), max_body_seconds=0.25) as client:
        assert client.event_hooks["response"][0].__self__.max_body_seconds == 0.25


class SlowChunks(httpx.AsyncByteStream):
    """Chunks that take time to come without awaiting anything, as a loop other than asyncio
    (trio) would deliver them."""

    def __init__(self, count: int, seconds: float) -> None:
        self.count = count
        self.seconds = seconds
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.count):
            time.sleep(self.seconds)
            self.sent += 1
            yield b"x"


def test_async_hook_outside_asyncio_checks_the_clock_between_chunks() -> None:
    """Driven without asyncio (here by hand), the async hook stops after ``max_body_seconds``."""
    stream = SlowChunks(count=100, seconds=0.02)
    request = httpx.Request("GET", URL)
    response = httpx.Response(400, stream=stream, request=request)
    hook = tdk.http.UpstreamHook(max_body_seconds=0.05)
    with pytest.raises(UpstreamBadRequestError) as caught:
        hook.araise_for_upstream(response).send(None)  # nothing awaits: it runs to the end
    assert 0 < stream.sent < 10
    assert caught.value.message.endswith(f'Upstream message: "{"x" * stream.sent}"')


def test_body_limit_option_truncates_the_upstream_text() -> None:
    """Only ``max_body_bytes`` of the body are used."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, text="abcdefghijklmnopqrstuvwxyz")

    with (
        mock_client(handler, max_body_bytes=5) as client,
        pytest.raises(UpstreamBadRequestError) as caught,
    ):
        client.get(URL)
    assert caught.value.message.endswith('Upstream message: "abcde"')


# -- provider-specific checks -----------------------------------------------------------------


def slack_check(response: httpx.Response, payload: object) -> UpstreamError | None:
    """Slack answers 200 with ``{"ok": false, "error": ...}``."""
    if isinstance(payload, dict) and payload.get("ok") is False:
        code = str(payload.get("error"))
        if code == "ratelimited":
            return UpstreamRateLimitError("Slack is rate limiting requests.", retry_after_ms=1000)
        return UpstreamBadRequestError(f"Slack refused the call: {code}.", details={"code": code})
    return None


def slack_handler(request: httpx.Request) -> httpx.Response:
    answers = {
        "/api/chat.postMessage": {"ok": False, "error": "channel_not_found"},
        "/api/conversations.list": {"ok": False, "error": "ratelimited"},
        "/api/auth.test": {"ok": True, "user": "bot"},
    }
    if request.url.path == "/api/files.get":
        return httpx.Response(200, content=b"\x89PNG", headers={"Content-Type": "image/png"})
    if request.url.path == "/api/stream":
        content = iter([b'{"ok": false, "error": "not_authed"}'])
        return httpx.Response(200, content=content, headers={"Content-Type": "application/json"})
    if request.url.path == "/api/broken":
        return httpx.Response(200, text="{not json", headers={"Content-Type": "application/json"})
    return httpx.Response(200, json=answers[request.url.path])


def test_check_body_turns_a_200_into_an_error() -> None:
    """A 200 with ``ok: false`` raises the check's error, completed with status and URL."""
    with mock_client(slack_handler, check_body=slack_check) as client:
        with pytest.raises(UpstreamBadRequestError) as caught:
            client.post("https://slack.com/api/chat.postMessage?token=xoxb-not-a-real-token")
        with pytest.raises(UpstreamRateLimitError):
            client.get("https://slack.com/api/conversations.list")
        assert client.get("https://slack.com/api/auth.test").json() == {"ok": True, "user": "bot"}
    error = caught.value
    assert error.status_code == 200
    assert error.details == {
        "code": "channel_not_found",
        "method": "POST",
        "url": "https://slack.com/api/chat.postMessage?token=[REDACTED]",
        "status_code": 200,
    }


def test_check_body_ignores_non_json_and_broken_json() -> None:
    """Non-JSON successes are not read for the check; broken JSON is not an error."""
    with mock_client(slack_handler, check_body=slack_check) as client:
        assert client.get("https://slack.com/api/files.get").content == b"\x89PNG"
        assert client.get("https://slack.com/api/broken").text == "{not json"


def test_check_body_leaves_a_streamed_binary_success_unread() -> None:
    """A success that is not JSON stays a stream even with a check installed."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "image/png"}, content=iter([b"ab"]))

    with (
        mock_client(handler, check_body=slack_check) as client,
        client.stream("GET", URL) as response,
    ):
        assert not response.is_stream_consumed
        assert response.read() == b"ab"


def test_check_body_async_leaves_a_streamed_json_success_to_the_caller() -> None:
    """A JSON success the caller streams is neither read nor checked: it reads as sent."""

    async def handler(request: httpx.Request) -> httpx.Response:
        async def chunks() -> Any:
            yield b'{"ok": true, '
            yield b'"user": "bot"}'

        return httpx.Response(200, headers={"Content-Type": "application/json"}, content=chunks())

    async def fetch() -> bytes:
        transport = httpx.MockTransport(handler)
        client = tdk.http.install(httpx.AsyncClient(transport=transport), check_body=slack_check)
        async with client, client.stream("GET", URL) as response:
            return b"".join([chunk async for chunk in response.aiter_bytes()])

    assert asyncio.run(fetch()) == b'{"ok": true, "user": "bot"}'


def test_check_body_async_raises_and_skips_non_json() -> None:
    """The async hook raises what the check returns, and leaves non-JSON successes alone."""

    async def fetch() -> None:
        transport = httpx.MockTransport(slack_handler)
        async with tdk.http.install(
            httpx.AsyncClient(transport=transport), check_body=slack_check
        ) as client:
            assert (await client.get("https://slack.com/api/files.get")).content == b"\x89PNG"
            await client.get("https://slack.com/api/conversations.list")

    with pytest.raises(UpstreamRateLimitError):
        asyncio.run(fetch())


def test_check_body_sees_error_bodies_first() -> None:
    """On an error status the check runs before the standard table and may refine it."""

    def graphql_check(response: httpx.Response, payload: object) -> UpstreamError | None:
        if not isinstance(payload, dict):
            return None
        errors = payload.get("errors")
        if isinstance(errors, list) and any(
            isinstance(e, dict) and e.get("type") == "RATE_LIMITED" for e in errors
        ):
            return UpstreamRateLimitError("GitHub GraphQL rate limit.", status_code=599)
        return None

    def handler(request: httpx.Request) -> httpx.Response:
        body = {"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded"}]}
        status = {"/graphql": 200, "/graphql-400": 400}.get(request.url.path, 502)
        return httpx.Response(status, json=body if status < 500 else {"errors": [body]})

    with mock_client(handler, check_body=graphql_check) as client:
        with pytest.raises(UpstreamRateLimitError) as caught:
            client.post("https://api.github.com/graphql")
        assert caught.value.status_code == 599  # the check's own status is kept
        with pytest.raises(UpstreamRateLimitError) as caught:
            client.post("https://api.github.com/graphql-400")
        assert caught.value.details["url"] == "https://api.github.com/graphql-400"
        with pytest.raises(UpstreamServerError):
            client.get("https://api.github.com/other")


def test_check_body_must_return_an_upstream_error() -> None:
    """A check returning anything else is a programming error, reported as such."""

    def wrong(response: httpx.Response, payload: object) -> Any:
        return "error!"

    with mock_client(slack_handler, check_body=wrong) as client, pytest.raises(TypeError):
        client.get("https://slack.com/api/auth.test")


def test_hook_object_classify_applies_the_check_to_a_read_success() -> None:
    """``UpstreamHook.classify`` runs the check on a success whose body was read."""
    hook = tdk.http.UpstreamHook(check_body=slack_check)
    with httpx.Client(transport=httpx.MockTransport(slack_handler)) as client:
        failed = client.get("https://slack.com/api/chat.postMessage")
        fine = client.get("https://slack.com/api/auth.test")
        with client.stream("GET", "https://slack.com/api/stream") as unread:
            assert hook.classify(unread) is None  # a stream that was not read: nothing to check
    assert isinstance(hook.classify(failed), UpstreamBadRequestError)
    assert hook.classify(fine) is None
    assert tdk.http.classify(failed) is None  # the default hook has no check


# -- one code path with raise_for_status ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "body"),
    [
        pytest.param(429, {"Retry-After": "3"}, {"error": {"message": "slow"}}, id="429"),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"},
            {"message": "API rate limit exceeded"},
            id="403-rate-limit",
        ),
        pytest.param(404, {}, {"message": "Not Found"}, id="404"),
        pytest.param(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None, id="503"),
        pytest.param(999, {}, None, id="999"),
    ],
)
def test_raise_for_status_gives_the_hook_classification(
    status: int, headers: dict[str, str], body: object
) -> None:
    """``ErrorInfo.from_exception`` of ``raise_for_status()`` equals the hook's error."""
    with respx.mock(assert_all_called=True) as router:
        router.get(URL).mock(return_value=httpx.Response(status, headers=headers, json=body))
        with httpx.Client() as client:
            response = client.get(URL)
        with tdk.http.install(httpx.Client()) as client, pytest.raises(UpstreamError) as caught:
            client.get(URL)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        response.raise_for_status()
    from_tool = ErrorInfo.from_exception(raised.value, tool_name="get_items")
    from_hook = caught.value.to_error_info()
    assert from_tool.cause == "HTTPStatusError"
    assert from_tool.tool_name == "get_items"
    ignored = {"cause", "tool_name"}
    assert from_tool.model_dump(exclude=ignored) == from_hook.model_dump(exclude=ignored)


def test_raise_for_status_on_a_redirect_keeps_the_status_fallback() -> None:
    """httpx also raises for a 3xx; that is no upstream error class: ``UNMAPPED``."""
    request = httpx.Request("GET", URL)
    response = httpx.Response(302, headers={"Location": "/x"}, request=request)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        response.raise_for_status()
    info = ErrorInfo.from_exception(raised.value)
    assert (info.kind, info.status_code) == (ErrorKind.UPSTREAM_RUNTIME_UNMAPPED, 302)


def test_status_error_without_a_readable_response_falls_back() -> None:
    """An ``HTTPStatusError`` built around something that is not a response still maps."""
    request = httpx.Request("GET", URL)
    fake: Any = type("Fake", (), {"status_code": 503})()
    info = ErrorInfo.from_exception(httpx.HTTPStatusError("boom", request=request, response=fake))
    assert (info.kind, info.status_code) == (ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR, 503)


def test_classify_without_a_request() -> None:
    """A response built by hand (no request) classifies without method or URL."""
    error = tdk.http.classify(httpx.Response(500, text="oops"))
    assert error is not None
    assert error.details == {"status_code": 500}
    assert error.developer_message == "HTTP 500 Internal Server Error: oops"


@pytest.mark.parametrize("status", [2**53, 10**30, -(10**30)], ids=["2**53", "10**30", "-10**30"])
def test_a_status_no_error_can_carry_is_unmapped(status: int) -> None:
    """A status beyond any integer JSON keeps (only a transport of the caller's own makes one)
    is an unmapped upstream error without a status, and no fallback was needed."""
    response = httpx.Response(status, content=b"x", request=httpx.Request("GET", "https://h/"))
    error = tdk.http.classify(response)
    assert error is not None
    assert error.kind is ErrorKind.UPSTREAM_RUNTIME_UNMAPPED
    assert error.status_code is None
    assert "fallback" not in error.details
    json.dumps(error.to_dict())


def test_pickled_error_keeps_its_classification() -> None:
    """The raised error is plain data: it survives pickling with every field."""
    import pickle

    error = tdk.http.classify(
        httpx.Response(429, headers={"Retry-After": "2"}, request=httpx.Request("GET", URL))
    )
    assert error is not None
    copy = pickle.loads(pickle.dumps(error))
    assert copy.to_dict() == error.to_dict()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_hook_added_by_hand_checks_json_successes(flavour: str) -> None:
    """A hook added to ``event_hooks`` by hand (no ``install``) reads and checks a JSON
    success itself: httpx is about to read it anyway."""
    hook = tdk.http.UpstreamHook(check_body=slack_check)
    transport = httpx.MockTransport(slack_handler)
    url = "https://slack.com/api/conversations.list"
    if flavour == "sync":
        client = httpx.Client(
            transport=transport, event_hooks={"response": [hook.raise_for_upstream]}
        )
        with client, pytest.raises(UpstreamRateLimitError):
            client.get(url)
    else:

        async def fetch() -> None:
            hooks = {"response": [hook.araise_for_upstream]}
            async with httpx.AsyncClient(transport=transport, event_hooks=hooks) as client:
                await client.get(url)

        with pytest.raises(UpstreamRateLimitError):
            asyncio.run(fetch())


# -- the last resort ------------------------------------------------------------------------


class TextContent(httpx.Response):
    """A response whose ``content`` is text, not bytes: a broken test double or subclass, the
    kind of input no classifier path expects."""

    @property
    def content(self) -> Any:
        return "Rate limit exceeded"


def undecodable_headers(status: int, headers: dict[str, str]) -> httpx.Response:
    """A response whose headers cannot be decoded (``headers.encoding`` names a codec that
    always fails)."""
    hostile = response(status, headers)
    hostile.headers.encoding = "undefined"
    return hostile


def test_an_unexpected_failure_in_the_body_falls_back_to_status_and_headers() -> None:
    """A body that breaks the classifier gives the status's error, its wait read from the
    headers, and says so, instead of a foreign exception."""
    broken = TextContent(429, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    error = tdk.http.classify(broken)
    assert isinstance(error, UpstreamRateLimitError)
    assert (error.status_code, error.retry_after_ms) == (429, 7_000)
    assert error.details["fallback"] == "status and headers"
    assert error.details["fallback_error"] == "TypeError"
    assert error.developer_message == (
        f"GET {URL} -> HTTP 429 Too Many Requests [tdk could not read this response's body "
        "(TypeError): classified from its status and headers alone]"
    )
    json.dumps(error.to_dict())


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        pytest.param(503, UpstreamServerError, id="503"),
        pytest.param(429, UpstreamRateLimitError, id="429"),
        pytest.param(404, UpstreamNotFoundError, id="404"),
        pytest.param(408, UpstreamBadRequestError, id="408"),
        pytest.param(999, UpstreamError, id="999"),
    ],
)
def test_an_unexpected_failure_in_the_headers_falls_back_to_the_status(
    status: int, cls: type[UpstreamError]
) -> None:
    """Headers that break the classifier give the status's error from the status alone."""
    error = tdk.http.classify(undecodable_headers(status, {"Retry-After": "7"}))
    assert type(error) is cls
    assert error.status_code == status
    assert error.retry_after_ms is None
    assert error.retryable is UpstreamError(".", status_code=status).retryable
    assert error.details == {
        "status_code": status,
        "fallback": "status",
        "fallback_error": "UnicodeError",
    }
    assert error.developer_message is not None
    assert error.developer_message.endswith(
        " [tdk could not read this response's body or headers (UnicodeError): classified from "
        "its status alone]"
    )


class UnreadableRequest(httpx.Response):
    """A response whose ``request`` raises what httpx never raises there (a broken subclass)."""

    @property
    def request(self) -> httpx.Request:
        raise LookupError("no request")


def test_an_unexpected_failure_after_the_body_falls_back_to_the_status() -> None:
    """A failure in the classification proper, body and headers read, still gives the
    status's error."""
    broken = UnreadableRequest(429, headers={"Retry-After": "7"}, json={"message": "slow"})
    error = tdk.http.classify(broken)
    assert isinstance(error, UpstreamRateLimitError)
    assert error.status_code == 429
    assert error.details == {
        "status_code": 429,
        "fallback": "status",
        "fallback_error": "LookupError",
    }


def test_the_last_resort_is_logged_without_upstream_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The fallback logs one warning naming the exception type and where it was raised."""
    broken = TextContent(429, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    with caplog.at_level("WARNING", logger="tdk.http"):
        tdk.http.classify(broken)
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert "TypeError" in record.getMessage()
    assert "_body.py" in record.getMessage()
    assert "Rate limit exceeded" not in record.getMessage()


def test_the_hooks_raise_the_fallback_error() -> None:
    """The sync and async hooks raise the last-resort error, never the foreign exception."""
    broken = TextContent(503, headers={"Retry-After": "7"}, request=httpx.Request("GET", URL))
    with pytest.raises(UpstreamServerError) as caught:
        tdk.http.raise_for_upstream(broken)
    assert caught.value.details["fallback"] == "status and headers"
    with pytest.raises(UpstreamServerError):
        asyncio.run(tdk.http.araise_for_upstream(broken))


def test_a_body_check_still_runs_and_its_exceptions_are_not_swallowed() -> None:
    """A body check sees None for a body that broke the parser, and its own exception
    propagates: it is the user's, not a classification bug."""
    seen: list[object] = []

    def check(response: httpx.Response, payload: object) -> UpstreamError | None:
        seen.append(payload)
        raise LookupError("my check is broken")

    hook = tdk.http.UpstreamHook(check_body=check)
    broken = TextContent(400, request=httpx.Request("GET", URL))
    with pytest.raises(LookupError, match="my check is broken"):
        hook.classify(broken)
    assert seen == [None]
    with pytest.raises(LookupError, match="my check is broken"):
        hook.classify(response(400, body=b'{"message": "fine"}'))
    assert seen == [None, {"message": "fine"}]


def test_a_body_check_answer_wins_over_the_last_resort() -> None:
    """An error returned by the body check is used even when the body broke the parser."""
    hook = tdk.http.UpstreamHook(check_body=lambda response, payload: UpstreamServerError("x"))
    error = hook.classify(TextContent(400, request=httpx.Request("GET", URL)))
    assert isinstance(error, UpstreamServerError)
    assert "fallback" not in error.details
