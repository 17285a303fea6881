"""The hook and httpx's auth flows and streams: a hop that the flow answers is not a failure,
and a body the caller streams is never read by the hook."""

from __future__ import annotations

import asyncio
import threading
import time
import zlib
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


# ---------------------------------------------------------------------------------------------
# What httpx decodes of a challenge hop


def _gzip(data: bytes, wbits: int = 31) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


ZEROS = b"\0" * (20 * 1024 * 1024)


@pytest.mark.parametrize(
    ("encoding", "body", "kept"),
    [
        pytest.param("gzip", _gzip(ZEROS), 4096, id="gzip-bomb"),
        pytest.param("deflate", _gzip(ZEROS, zlib.MAX_WBITS), 4096, id="deflate-bomb"),
        pytest.param("deflate", _gzip(ZEROS, -zlib.MAX_WBITS), 4096, id="raw-deflate-bomb"),
        pytest.param("gzip, gzip", _gzip(_gzip(ZEROS)), 0, id="two-layers-left-out"),
        pytest.param("br", b"\x1b" * 100, 0, id="brotli-left-out"),
        pytest.param("identity", b"x" * 100_000, 4096, id="plain-text-cut"),
        pytest.param("gzip", _gzip(b"Unauthorized"), 12, id="small-gzip-whole"),
        pytest.param("gzip", b"not gzip at all", 0, id="corrupt-gzip-left-out"),
    ],
)
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_httpx_never_decodes_more_of_a_challenge_hop_than_the_bound(
    encoding: str, body: bytes, kept: int, flavour: str
) -> None:
    """The body of a hop that an auth flow answers is cut where its decoding would pass
    ``max_body_bytes`` (a bomb of 20 MB never inflates); a body in an encoding tdk does not
    decode within bounds is left out; the flow still gets its answer."""

    def api(request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization", "").startswith("Digest "):
            return httpx.Response(200, json={"user": "ann"})
        headers = {
            "WWW-Authenticate": 'Digest realm="api", nonce="abc123", qop="auth"',
            "Content-Encoding": encoding,
        }
        # a stream, as from the network (content= would be decoded by the mock itself)
        return httpx.Response(401, headers=headers, stream=httpx.ByteStream(body))

    auth = httpx.DigestAuth("ann", "pw")
    if flavour == "sync":
        with sync_client(api, max_body_bytes=4096) as client:
            response = client.get(URL, auth=auth)
    else:

        async def get() -> httpx.Response:
            async with async_client(api, max_body_bytes=4096) as client:
                return await client.get(URL, auth=auth)

        response = asyncio.run(get())
    assert response.json() == {"user": "ann"}
    (hop,) = response.history
    assert len(hop.content) <= kept + 1500  # (what one input byte of zlib holds: ~1 KB)
    assert len(hop.content) >= min(kept, 12)


def test_a_hook_called_by_hand_inside_an_installed_send_classifies() -> None:
    """A hook called by hand on a response without a request, within an installed send (an
    auth flow checking a response of its own making), classifies it as usual."""
    seen: list[str] = []

    class Checks(httpx.Auth):
        def auth_flow(
            self, request: httpx.Request
        ) -> Generator[httpx.Request, httpx.Response, None]:
            try:
                tdk.http.raise_for_upstream(httpx.Response(401))
            except UpstreamAuthError:
                seen.append("raised")
            yield request

    with sync_client(lambda request: httpx.Response(200, json={})) as client:
        client.get(URL, auth=Checks())
    assert seen == ["raised"]


def test_a_bomb_in_a_challenge_hop_from_a_real_server_stays_small(base_url: str) -> None:
    """The same over a real connection: a 50 MB gzip bomb in a Digest challenge."""

    def call() -> tuple[int, int]:
        with tdk.http.install(httpx.Client(timeout=10)) as client:
            response = client.get(f"{base_url}/bomb_challenge", auth=httpx.DigestAuth("ann", "pw"))
            return response.status_code, len(response.history[0].content)

    status, hop_bytes = _within(20, call)
    assert status == 200
    assert 0 < hop_bytes <= 65_536 + 1500


# ---------------------------------------------------------------------------------------------
# Another client called during an installed send


class TokenFromAnotherClient(httpx.Auth):
    """An auth flow that fetches its token with a client of its own (the usual OAuth way)."""

    def __init__(self, token_client: Any) -> None:
        self.token_client = token_client

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.token_client.post("https://auth.example.com/token").json()["token"]
        request.headers["Authorization"] = f"Bearer {token}"
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        response = await self.token_client.post("https://auth.example.com/token")
        request.headers["Authorization"] = f"Bearer {response.json()['token']}"
        yield request


def token_endpoint(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, json={"error": "invalid_client"})


@pytest.mark.parametrize("token_client_installed", [False, True], ids=["hand-hooked", "installed"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_401_of_another_client_inside_an_installed_send_raises(
    flavour: str, token_client_installed: bool
) -> None:
    """A client called from an installed client's auth flow keeps its own hook's behaviour:
    its 401 raises there (it is not a hop of the installed client's flow)."""
    if flavour == "sync":
        token_client = httpx.Client(transport=httpx.MockTransport(token_endpoint))
        if token_client_installed:
            tdk.http.install(token_client)
        else:
            token_client.event_hooks = {"response": [tdk.http.raise_for_upstream]}
        auth = TokenFromAnotherClient(token_client)
        with sync_client(digest_api) as client, pytest.raises(UpstreamAuthError) as caught:
            client.get(URL, auth=auth)
    else:

        async def get() -> None:
            token_client = httpx.AsyncClient(transport=httpx.MockTransport(token_endpoint))
            if token_client_installed:
                tdk.http.install(token_client)
            else:
                token_client.event_hooks = {"response": [tdk.http.araise_for_upstream]}
            async with async_client(digest_api) as client:
                await client.get(URL, auth=TokenFromAnotherClient(token_client))

        with pytest.raises(UpstreamAuthError) as caught:
            asyncio.run(get())
    assert caught.value.details["url"] == "https://auth.example.com/token"


def test_requests_keep_no_mark_of_an_installed_send() -> None:
    """What the installed send puts in a request's extensions is gone once it returns, from
    the request and from the redirects httpx made of it."""

    def moved(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/old":
            return httpx.Response(302, headers={"Location": "/new"})
        return httpx.Response(200, json={})

    with sync_client(moved) as client:  # (a flow that may answer: the send marks)
        request = client.build_request("GET", "https://api.example.com/old")
        response = client.send(request, follow_redirects=True, auth=httpx.DigestAuth("a", "b"))
    hops = (*response.history, response)
    assert [set(hop.request.extensions) for hop in hops] == [{"timeout"}, {"timeout"}]
    assert set(request.extensions) == {"timeout"}


# ---------------------------------------------------------------------------------------------
# Auths that send their request once


def _callable_auth(request: httpx.Request) -> httpx.Request:
    request.headers["Authorization"] = "Bearer from-a-callable"
    return request


@pytest.mark.parametrize(
    "auth",
    [
        pytest.param(None, id="none"),
        pytest.param(("ann", "pw"), id="a-tuple"),
        pytest.param(httpx.BasicAuth("ann", "pw"), id="basic"),
        pytest.param(_callable_auth, id="a-callable"),
        pytest.param(RefreshOn401(), id="a-flow-that-answers"),
    ],
)
@pytest.mark.parametrize("where", ["client", "request"])
def test_a_401_no_auth_flow_answers_is_an_auth_error(auth: Any, where: str) -> None:
    """Whatever the auth (one that sends its request once, or a flow whose answer is refused
    again), a final 401 raises UpstreamAuthError, with the upstream's message."""

    def refuses(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"message": "bad credentials"})

    transport = httpx.MockTransport(refuses)
    client_auth = auth if where == "client" else None
    options = {"auth": auth} if where == "request" else {}
    client = tdk.http.install(httpx.Client(transport=transport, auth=client_auth))
    with client, pytest.raises(UpstreamAuthError) as caught:
        client.get(URL, **options)
    assert "bad credentials" in caught.value.developer_message


def test_an_auth_httpx_refuses_is_refused_as_without_tdk() -> None:
    """An auth value httpx does not take raises httpx's own TypeError."""
    with sync_client(bearer_api) as client, pytest.raises(TypeError):
        client.get(URL, auth=object())  # type: ignore[arg-type]


def test_one_request_sent_twice_at_once_through_an_auth_flow() -> None:
    """The same request object sent twice at once by an installed client whose flow answers
    the challenge: the send that ends first leaves the other's hop to its flow."""

    async def both() -> list[Any]:
        first_done = asyncio.Event()
        challenges = 0

        async def api(request: httpx.Request) -> httpx.Response:
            nonlocal challenges
            response = digest_api(request)  # (before the wait: the request is shared)
            if response.status_code == 401:
                challenges += 1
                if challenges == 1:  # the second send's challenge comes after the first ends
                    await first_done.wait()
            return response

        transport = httpx.MockTransport(api)
        async with tdk.http.install(httpx.AsyncClient(transport=transport)) as client:
            request = client.build_request("GET", URL)
            second = asyncio.create_task(client.send(request, auth=httpx.DigestAuth("ann", "pw")))
            await asyncio.sleep(0.01)
            first = await client.send(request, auth=httpx.DigestAuth("ann", "pw"))
            first_done.set()
            responses = [first, await second]
            assert "tdk.installed_send" not in request.extensions
            return [response.json() for response in responses]

    assert asyncio.run(both()) == [{"user": "ann"}, {"user": "ann"}]


class SignsACopy(httpx.Auth):
    """Sends a signed copy of the request (keeping its extensions, so that its timeouts
    apply), and answers nothing."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        headers = {**request.headers, "Authorization": "Sig abc"}
        yield httpx.Request(
            request.method, request.url, headers=headers, extensions=request.extensions
        )


def test_a_401_to_a_copy_an_auth_flow_sent_is_an_auth_error() -> None:
    """A 401 to a copy of the request that a flow sent, unanswered, raises: the copy's mark
    (copied with its extensions) does not defer the final check."""
    with sync_client(refuses) as client, pytest.raises(UpstreamAuthError):
        client.get(URL, auth=SignsACopy())


def refuses(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, json={"message": "bad credentials"})


def test_a_401_to_one_of_two_sends_of_one_request_is_an_auth_error() -> None:
    """The same request sent twice at once, and refused without a challenge: both sends raise
    (the other send's mark on the request does not defer the final check)."""

    async def both() -> list[str]:
        async def slow_refusal(request: httpx.Request) -> httpx.Response:
            await asyncio.sleep(0.01)  # both sends are under way before either ends
            return refuses(request)

        transport = httpx.MockTransport(slow_refusal)
        async with tdk.http.install(httpx.AsyncClient(transport=transport)) as client:
            request = client.build_request("GET", URL)
            sends = [client.send(request, auth=httpx.DigestAuth("a", "b")) for _ in range(2)]
            outcomes = await asyncio.gather(*sends, return_exceptions=True)
        return [type(outcome).__name__ for outcome in outcomes]

    assert asyncio.run(both()) == ["UpstreamAuthError", "UpstreamAuthError"]


class Handshake(httpx.Auth):
    """A flow that answers each challenge with a request of its own making (a handshake in
    legs): the hop of every request it sends is the flow's to answer."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        response = yield request
        while response.status_code == 401 and "next=" in response.headers.get(
            "WWW-Authenticate", ""
        ):
            leg = response.headers["WWW-Authenticate"].split("next=")[1]
            headers = {**request.headers, "Authorization": leg}
            response = yield httpx.Request(request.method, request.url, headers=headers)


def handshake_api(request: httpx.Request) -> httpx.Response:
    leg = request.headers.get("Authorization", "")
    if leg == "leg2":
        return httpx.Response(200, json={"user": "ann"})
    following = "leg2" if leg == "leg1" else "leg1"
    return httpx.Response(401, headers={"WWW-Authenticate": f"Handshake next={following}"})


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_flow_answering_with_requests_of_its_own_gets_its_answer(flavour: str) -> None:
    """A flow whose every leg is a new request gets each challenge to answer, and ends with
    the upstream's answer; the requests it made keep no mark."""
    if flavour == "sync":
        with sync_client(handshake_api) as client:
            response = client.get(URL, auth=Handshake())
    else:

        async def get() -> httpx.Response:
            async with async_client(handshake_api) as client:
                return await client.get(URL, auth=Handshake())

        response = asyncio.run(get())
    assert response.json() == {"user": "ann"}
    assert all("tdk.installed_send" not in hop.request.extensions for hop in response.history)


def test_a_plain_sync_send_of_a_request_another_send_marks_still_raises() -> None:
    """The same with a sync client, the two sends in two threads."""
    arrivals: list[int] = []
    lock = threading.Lock()

    def refuses_later(request: httpx.Request) -> httpx.Response:
        with lock:
            arrivals.append(1)
            first = len(arrivals) == 1
        time.sleep(0.2 if first else 0.01)  # the flow's send arrives first, is answered last
        return refuses(request)

    outcomes: list[str] = []
    with sync_client(refuses_later) as client:
        request = client.build_request("GET", URL)

        def send(**options: Any) -> None:
            try:
                client.send(request, **options)
                outcomes.append("returned")
            except UpstreamAuthError:
                outcomes.append("UpstreamAuthError")

        flow = threading.Thread(target=send, kwargs={"auth": httpx.DigestAuth("a", "b")})
        flow.start()
        while not arrivals:
            time.sleep(0.001)
        send()
        flow.join(10)
    assert outcomes == ["UpstreamAuthError", "UpstreamAuthError"]


def test_a_plain_send_of_a_request_another_send_marks_still_raises() -> None:
    """The same request sent at once through an auth flow and by a plain send: the plain
    send's 401 raises (the other send's mark defers only that send's hops)."""

    async def both() -> list[str]:
        arrivals = 0

        async def refuses_later(request: httpx.Request) -> httpx.Response:
            nonlocal arrivals
            arrivals += 1  # the flow's send arrives first, and is answered last
            await asyncio.sleep(0.05 if arrivals == 1 else 0.01)
            return refuses(request)

        transport = httpx.MockTransport(refuses_later)
        async with tdk.http.install(httpx.AsyncClient(transport=transport)) as client:
            request = client.build_request("GET", URL)
            sends = [client.send(request, auth=httpx.DigestAuth("a", "b")), client.send(request)]
            outcomes = await asyncio.gather(*sends, return_exceptions=True)
        return [type(outcome).__name__ for outcome in outcomes]

    assert asyncio.run(both()) == ["UpstreamAuthError", "UpstreamAuthError"]


class SignsTheChallenge(httpx.Auth):
    """A flow that answers with the length of the challenge's whole body (it asks httpx for
    the body: ``requires_response_body``)."""

    requires_response_body = True

    def __init__(self) -> None:
        self.seen: list[int] = []

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        response = yield request
        if response.status_code == 401:
            self.seen.append(len(response.content))
            request.headers["Authorization"] = f"Sig {len(response.content)}"
            yield request


CHALLENGE = b"nonce:" + b"c" * 100_000


def signed_api(request: httpx.Request) -> httpx.Response:
    if request.headers.get("Authorization") == f"Sig {len(CHALLENGE)}":
        return httpx.Response(200, json={"user": "ann"})
    headers = {"WWW-Authenticate": "Sig"}
    return httpx.Response(401, headers=headers, stream=httpx.ByteStream(CHALLENGE))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_flow_that_reads_its_challenges_gets_them_whole(flavour: str) -> None:
    """A flow that asks for the body of the challenges it answers gets it whole, as without
    tdk (the hook's bound applies to the bodies httpx reads for nobody)."""
    auth = SignsTheChallenge()
    if flavour == "sync":
        with sync_client(signed_api) as client:
            response = client.get(URL, auth=auth)
    else:

        async def get() -> httpx.Response:
            async with async_client(signed_api) as client:
                return await client.get(URL, auth=auth)

        response = asyncio.run(get())
    assert response.json() == {"user": "ann"}
    assert auth.seen == [len(CHALLENGE)]
