"""The hook and httpx's auth flows and streams: a hop that the flow answers is not a failure,
and a body the caller streams is never read by the hook."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Generator, Iterator
from typing import Any

import httpx
import pytest
from _http_server import serve

import tdk.http
from tdk.errors import UpstreamAuthError, UpstreamError

URL = "https://api.example.com/v1/me"


def digest_api(request: httpx.Request) -> httpx.Response:
    """An upstream that asks for Digest credentials, and takes any answer to its challenge
    with the right user."""
    answer = request.headers.get("Authorization", "")
    if answer.startswith("Digest ") and 'username="ann"' in answer and "response=" in answer:
        return httpx.Response(200, json={"user": "ann"})
    challenge = 'Digest realm="api", nonce="abc123", qop="auth", algorithm=MD5'
    return httpx.Response(
        401, headers={"WWW-Authenticate": challenge}, json={"message": "Unauthorized"}
    )


class RefreshOn401(httpx.Auth):
    """A bearer token refreshed when the upstream says it expired."""

    def __init__(self) -> None:
        self.token = "expired-token"
        self.refreshes = 0

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            self.refreshes += 1
            self.token = "fresh-token"
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def bearer_api(request: httpx.Request) -> httpx.Response:
    if request.headers.get("Authorization") == "Bearer fresh-token":
        return httpx.Response(200, json={"ok": True})
    return httpx.Response(401, json={"message": "token expired"})


def sync_client(handler: Any, **options: Any) -> httpx.Client:
    return tdk.http.install(httpx.Client(transport=httpx.MockTransport(handler)), **options)


def async_client(handler: Any, **options: Any) -> httpx.AsyncClient:
    return tdk.http.install(httpx.AsyncClient(transport=httpx.MockTransport(handler)), **options)


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize(
    ("handler", "auth"),
    [
        pytest.param(digest_api, lambda: httpx.DigestAuth("ann", "pw"), id="digest"),
        pytest.param(bearer_api, RefreshOn401, id="refresh-on-401"),
    ],
)
def test_an_auth_flow_answers_its_challenge(handler: Any, auth: Any, flavour: str) -> None:
    """The 401 that an auth flow answers is a hop, not a failure: the request succeeds."""
    if flavour == "sync":
        with sync_client(handler) as client:
            response = client.get(URL, auth=auth())
    else:

        async def get() -> httpx.Response:
            async with async_client(handler) as client:
                return await client.get(URL, auth=auth())

        response = asyncio.run(get())
    assert response.status_code == 200


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_client_level_auth_flow_works_too(flavour: str) -> None:
    """The same with the auth set on the client."""
    auth = RefreshOn401()
    if flavour == "sync":
        with tdk.http.install(
            httpx.Client(transport=httpx.MockTransport(bearer_api), auth=auth)
        ) as client:
            assert client.get(URL).json() == {"ok": True}
    else:

        async def get() -> Any:
            transport = httpx.MockTransport(bearer_api)
            async with tdk.http.install(httpx.AsyncClient(transport=transport, auth=auth)) as c:
                return (await c.get(URL)).json()

        assert asyncio.run(get()) == {"ok": True}
    assert auth.refreshes == 1


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize(
    ("handler", "auth"),
    [
        pytest.param(digest_api, lambda: httpx.DigestAuth("bob", "pw"), id="digest-wrong-user"),
        pytest.param(bearer_api, lambda: httpx.BasicAuth("ann", "pw"), id="basic"),
        pytest.param(bearer_api, lambda: None, id="no-auth"),
    ],
)
def test_a_final_401_is_classified(handler: Any, auth: Any, flavour: str) -> None:
    """A 401 that the flow does not (or cannot) answer is an UpstreamAuthError, as always."""
    if flavour == "sync":
        with sync_client(handler) as client, pytest.raises(UpstreamAuthError) as caught:
            client.get(URL, auth=auth())
    else:

        async def get() -> None:
            async with async_client(handler) as client:
                await client.get(URL, auth=auth())

        with pytest.raises(UpstreamAuthError) as caught:
            asyncio.run(get())
    assert caught.value.status_code == 401
    assert caught.value.details["url"] == URL


def test_a_407_is_classified_with_its_status() -> None:
    """A proxy's challenge nobody answers is classified with its status."""

    def proxy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(407, headers={"Proxy-Authenticate": "Basic"})

    with sync_client(proxy) as client, pytest.raises(UpstreamError) as caught:
        client.get(URL)
    assert caught.value.status_code == 407


def test_installing_twice_wraps_send_once() -> None:
    """A second install() keeps one wrapper, with the latest options."""
    seen: list[object] = []

    def check(response: httpx.Response, payload: object) -> UpstreamError | None:
        seen.append(payload)
        return None

    client = sync_client(bearer_api)
    first = client.send
    tdk.http.install(client, check_body=check)
    assert client.send is first
    with client:
        client.get(URL, auth=RefreshOn401())
    assert seen == [{"ok": True}]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve() as url:
        yield url


def _within(seconds: float, work: Any) -> Any:
    """Run ``work()`` in a thread; fail instead of hanging when it takes longer."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


def _never_fails(response: httpx.Response, payload: object) -> UpstreamError | None:
    return None


def test_a_streamed_body_is_never_read_by_the_hook(base_url: str) -> None:
    """With a body check installed, ``client.stream()`` of an endless 2xx JSON stream yields
    at once: the hook does not read what the caller streams."""

    def first_line() -> str:
        with (
            tdk.http.install(httpx.Client(timeout=10), check_body=_never_fails) as client,
            client.stream("GET", f"{base_url}/endless") as response,
        ):
            return next(response.iter_lines())

    assert _within(10, first_line) == '{"event": "tick"}'


def test_an_async_streamed_body_is_never_read_by_the_hook(base_url: str) -> None:
    """The same with an AsyncClient."""

    async def first_line() -> str:
        client = tdk.http.install(httpx.AsyncClient(timeout=10), check_body=_never_fails)
        async with client, client.stream("GET", f"{base_url}/endless") as response:
            lines: AsyncGenerator[str, None] = response.aiter_lines()  # type: ignore[assignment]
            return await anext(lines)

    assert _within(10, lambda: asyncio.run(first_line())) == '{"event": "tick"}'


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_body_that_is_not_streamed_is_still_checked(flavour: str) -> None:
    """Without streaming, a 2xx JSON body still goes through the check."""

    def slack(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": False, "error": "invalid_auth"})

    def check(response: httpx.Response, payload: object) -> UpstreamError | None:
        if isinstance(payload, dict) and payload.get("ok") is False:
            return UpstreamAuthError("Slack refused the token.", status_code=401)
        return None

    if flavour == "sync":
        with sync_client(slack, check_body=check) as client, pytest.raises(UpstreamAuthError):
            client.get(URL)
    else:

        async def get() -> None:
            async with async_client(slack, check_body=check) as client:
                await client.get(URL)

        with pytest.raises(UpstreamAuthError):
            asyncio.run(get())


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_dripping_challenge_an_auth_flow_answers_is_read_within_bounds(
    base_url: str, flavour: str
) -> None:
    """httpx reads the body of a challenge hop that an auth flow answers: within the hook's
    time budget too, not for as long as the upstream drips it."""
    url = f"{base_url}/drip_challenge"
    auth = httpx.DigestAuth("ann", "pw")

    def call() -> str:
        if flavour == "sync":
            client = tdk.http.install(httpx.Client(timeout=10), max_body_seconds=0.3)
            with client, pytest.raises(UpstreamAuthError) as caught:
                client.get(url, auth=auth)
            return type(caught.value).__name__

        async def get() -> None:
            client = tdk.http.install(httpx.AsyncClient(timeout=10), max_body_seconds=0.3)
            async with client:
                await client.get(url, auth=auth)

        with pytest.raises(UpstreamAuthError) as caught:
            asyncio.run(get())
        return type(caught.value).__name__

    assert _within(8, call) == "UpstreamAuthError"
