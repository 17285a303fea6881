"""A write is never repeated by surprise: the runner's retries follow the side-effect marks.

A tool that is neither read-only nor idempotent is retried only where the upstream certainly
did not act (a rate limit, a connection that failed before the request left); read-only and
idempotent tools keep every retry. Each logical call has one idempotency key for all its
attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import httpx
import pytest
from _http_server import Writes, refused_port

import tdk.http
from tdk import RetryPolicy, Tool, ToolContext, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import ErrorKind, UpstreamRateLimitError, UpstreamServerError
from tdk.hosts import mcp as tdk_mcp

REQUEST = httpx.Request("POST", "https://tracker.example/issues")
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False)


def _timeout() -> BaseException:
    return TimeoutError("the upstream took too long")


FAILURES: dict[str, tuple[Callable[[], BaseException], bool]] = {
    # failure -> (how to raise it, whether the upstream certainly did not act)
    "server-error-503": (lambda: UpstreamServerError("down", status_code=503), False),
    "timeout": (_timeout, False),
    "read-error": (lambda: httpx.ReadError("connection reset", request=REQUEST), False),
    "read-timeout": (lambda: httpx.ReadTimeout("slow", request=REQUEST), False),
    "rate-limit-429": (
        lambda: UpstreamRateLimitError("slow down", status_code=429, retry_after_ms=1),
        True,
    ),
    "connect-refused": (lambda: httpx.ConnectError("refused", request=REQUEST), True),
    "connect-timeout": (lambda: httpx.ConnectTimeout("no answer", request=REQUEST), True),
}


def _scripted(marks: dict[str, bool], failure: Callable[[], BaseException]) -> Any:
    """A tool with ``marks`` that fails once with ``failure``, then succeeds; it counts its
    calls."""
    calls: list[int] = []

    @tool(**marks)
    async def act(n: Annotated[int, "A number."]) -> int:
        """Act once."""
        calls.append(n)
        if len(calls) == 1:
            raise failure()
        return n

    return act, calls


def _run(runner: ToolRunner, name: str, arguments: Any = None, **options: Any) -> ToolResult:
    return asyncio.run(runner.run(name, arguments, **options))


@pytest.mark.parametrize(("failure", "did_not_act"), FAILURES.values(), ids=FAILURES.keys())
def test_a_write_is_retried_only_where_the_upstream_did_not_act(
    failure: Callable[[], BaseException], did_not_act: bool
) -> None:
    act, calls = _scripted({}, failure)
    result = _run(ToolRunner(Toolkit("t", [act]), retry=RETRY), "act", {"n": 1})
    if did_not_act:
        assert (result.value, len(calls), result.attempts) == (1, 2, 2)
    else:
        assert len(calls) == 1
        assert result.error is not None
        assert result.error.details["attempts"] == 1
        assert result.error.details["retry_stopped"] == "not_idempotent"


@pytest.mark.parametrize(
    "marks",
    [
        pytest.param({"read_only": True}, id="read-only"),
        pytest.param({"idempotent": True}, id="idempotent"),
    ],
)
@pytest.mark.parametrize("failure", [f for f, _ in FAILURES.values()], ids=FAILURES.keys())
def test_read_only_and_idempotent_tools_keep_every_retry(
    marks: dict[str, bool], failure: Callable[[], BaseException]
) -> None:
    act, calls = _scripted(marks, failure)
    result = _run(ToolRunner(Toolkit("t", [act]), retry=RETRY), "act", {"n": 1})
    assert (result.value, len(calls)) == (1, 2)


class _Bodies:
    """A sync tool whose first body overruns its limit of 0.2 s by 0.05 s (less than the one
    more limit a retry waits for it); counts bodies running at once."""

    def __init__(self, **marks: bool) -> None:
        self.lock = threading.Lock()
        self.running = self.peak = self.calls = 0

        @tool(timeout=0.2, **marks)
        def slow_sync(n: Annotated[int, "A number."]) -> int:
            """Overrun the limit the first time."""
            with self.lock:
                self.calls += 1
                first = self.calls == 1
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                time.sleep(0.25 if first else 0.0)
            finally:
                with self.lock:
                    self.running -= 1
            return n

        self.tool = slow_sync


def test_a_sync_write_past_its_limit_runs_once() -> None:
    bodies = _Bodies()
    result = _run(ToolRunner(Toolkit("t", [bodies.tool]), retry=RETRY), "slow_sync", {"n": 1})
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"
    time.sleep(0.2)  # the overrun body ends in its thread
    assert (bodies.calls, bodies.peak) == (1, 1)


def test_a_read_only_sync_tool_past_its_limit_is_retried_without_overlap() -> None:
    """The retry waits for the body that outlived its attempt: never two bodies at once."""
    bodies = _Bodies(read_only=True)
    runner = ToolRunner(Toolkit("t", [bodies.tool]), retry=RETRY)
    result = _run(runner, "slow_sync", {"n": 1})
    assert (result.value, bodies.calls, bodies.peak) == (1, 2, 1)


def _keyed_tool(fail_first: bool) -> tuple[Any, list[str | None]]:
    keys: list[str | None] = []

    @tool(idempotent=True)
    async def create(title: Annotated[str, "The title."], context: ToolContext) -> str:
        """Create something, sending the call's idempotency key."""
        keys.append(context.idempotency_key)
        if fail_first and len(keys) == 1:
            raise UpstreamServerError("down", status_code=503)
        return title

    return create, keys


def test_every_attempt_of_a_call_has_the_same_key_and_calls_differ() -> None:
    create, keys = _keyed_tool(fail_first=True)
    runner = ToolRunner(Toolkit("t", [create]), retry=RETRY)
    context = ToolContext(user_id="u-1")
    own = context.idempotency_key  # the context's own key, which no call shares
    first = _run(runner, "create", {"title": "a"}, context=context)
    second = _run(runner, "create", {"title": "b"}, context=context)
    assert (first.attempts, second.attempts) == (2, 1)
    assert keys[0] == keys[1] != keys[2]
    assert all(key is not None and uuid.UUID(key).version == 4 for key in keys)
    assert own not in keys
    assert context.idempotency_key == own  # the caller's context is left as it was


def test_calls_of_one_batch_have_keys_of_their_own() -> None:
    create, keys = _keyed_tool(fail_first=False)
    runner = ToolRunner(Toolkit("t", [create]))
    batch = [("create", {"title": str(n)}) for n in range(5)]
    results = asyncio.run(runner.run_many(batch, context=ToolContext()))
    assert all(r.is_success for r in results)
    assert len(set(keys)) == 5


def test_a_key_the_caller_gives_is_kept() -> None:
    create, keys = _keyed_tool(fail_first=True)
    runner = ToolRunner(Toolkit("t", [create]), retry=RETRY)
    _run(runner, "create", {"title": "a"}, context=ToolContext(idempotency_key="call_abc"))
    assert keys == ["call_abc", "call_abc"]


def test_a_direct_run_is_one_logical_call_with_a_key() -> None:
    create, keys = _keyed_tool(fail_first=False)
    asyncio.run(create.run({"title": "a"}))
    asyncio.run(create.run({"title": "b"}, context=ToolContext()))
    assert len(set(keys)) == 2
    assert None not in keys


def _upstream(request: httpx.Request) -> httpx.Response:
    """Creates on POST to api.example: /redirect answers 303 to an unreachable host, /plain
    201; every other host cannot be reached."""
    if request.url.host == "api.example" and request.method == "POST":
        POSTS.append(request.url.path)
        if request.url.path == "/redirect":
            return httpx.Response(303, headers={"Location": "https://cdn.example/issues/1"})
        return httpx.Response(201, json={"number": 1})
    raise httpx.ConnectError("Connection refused", request=request)


POSTS: list[str] = []


def _installed() -> httpx.AsyncClient:
    import tdk.http

    transport = httpx.MockTransport(_upstream)
    return tdk.http.install(httpx.AsyncClient(transport=transport, follow_redirects=True))


@tool
async def create_redirected(title: Annotated[str, "The title."]) -> str:
    """Create (POST), follow the 303 to a host that cannot be reached."""
    async with _installed() as client:
        return (await client.post("https://api.example/redirect", json={"t": title})).text


@tool
async def create_then_notify(title: Annotated[str, "The title."]) -> str:
    """Create, then notify a second service that cannot be reached."""
    async with _installed() as client:
        await client.post("https://api.example/plain", json={"t": title})
        return (await client.post("https://notify.example/hook", json={"t": title})).text


@pytest.mark.parametrize("name", ["create_redirected", "create_then_notify"])
def test_a_connect_failure_after_an_answer_of_the_same_attempt_is_not_retried(name: str) -> None:
    """The failed connect never sent its request, but an earlier request of the attempt was
    answered (seen by tdk's hook): the upstream may have acted, so a write is not repeated."""
    POSTS.clear()
    runner = ToolRunner(Toolkit("t", [create_redirected, create_then_notify]), retry=RETRY)
    result = _run(runner, name, {"title": "a"})
    assert len(POSTS) == 1
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"


def test_a_first_connect_failure_of_a_write_is_retried() -> None:
    """Nothing was answered before the connect failed: the write is retried."""

    @tool
    async def notify(text: Annotated[str, "The text."]) -> str:
        """Notify a service that cannot be reached."""
        async with _installed() as client:
            return (await client.post("https://notify.example/hook", json={"t": text})).text

    result = _run(ToolRunner(Toolkit("t", [notify]), retry=RETRY), "notify", {"text": "a"})
    assert result.attempts == 3
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "max_attempts"


def test_a_batch_given_a_key_gives_each_call_its_own() -> None:
    create, keys = _keyed_tool(fail_first=False)
    runner = ToolRunner(Toolkit("t", [create]))
    batch = [("create", {"title": str(n)}) for n in range(3)]
    asyncio.run(runner.run_many(batch, context=ToolContext(idempotency_key="batch-7")))
    assert sorted(keys) == ["batch-7:0", "batch-7:1", "batch-7:2"]  # type: ignore[type-var]


def test_a_context_subclass_keeps_its_own_fields() -> None:
    """The copy that carries a call's key is of the caller's class, with its fields."""
    import dataclasses

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class TenantContext(ToolContext):
        tenant: str = "none"

    seen: list[str] = []

    @tool(read_only=True)
    async def whose(context: ToolContext) -> str:
        """Whose call."""
        assert isinstance(context, TenantContext)
        seen.append(context.tenant)
        return context.tenant

    runner = ToolRunner(Toolkit("t", [whose]))
    context = TenantContext(tenant="acme", secrets={"K": "v-1234"})
    assert _run(runner, "whose", {}, context=context).value == "acme"
    assert asyncio.run(whose.run({}, context=context)).value == "acme"
    assert seen == ["acme", "acme"]


def _limited_upstream(request: httpx.Request) -> httpx.Response:
    """Creates on api.example; every other host answers 429."""
    if request.url.host == "api.example":
        POSTS.append(request.url.path)
        return httpx.Response(201, json={"n": 1})
    return httpx.Response(429, headers={"Retry-After": "0"})


def _limited_client(installed: bool) -> httpx.AsyncClient:
    """A client of ``_limited_upstream``, with tdk installed or its hook added by hand."""
    transport = httpx.MockTransport(_limited_upstream)
    if installed:
        return tdk.http.install(httpx.AsyncClient(transport=transport))
    hooks = {"response": [tdk.http.araise_for_upstream]}
    return httpx.AsyncClient(transport=transport, event_hooks=hooks)


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "hook-by-hand"])
@pytest.mark.parametrize("limited_first", [False, True], ids=["write-first", "429-first"])
def test_a_rate_limit_beside_an_answered_write_is_not_retried(
    installed: bool, limited_first: bool
) -> None:
    """A write answered, then (or after) a 429: the refusal is safe to retry, the write is
    not. A response hook added by hand sees the answers too."""
    POSTS.clear()

    @tool
    async def create_and_limited(title: Annotated[str, "The title."]) -> str:
        """Create, and call a service that answers 429 (before or after)."""
        async with _limited_client(installed) as client:
            if limited_first:
                with contextlib.suppress(UpstreamRateLimitError):
                    await client.post("https://notify.example/hook")
            await client.post("https://api.example/issues", json={"t": title})
            return (await client.post("https://notify.example/hook")).text

    runner = ToolRunner(Toolkit("t", [create_and_limited]), retry=RETRY)
    result = _run(runner, "create_and_limited", {"title": "a"})
    assert POSTS == ["/issues"]
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "hook-by-hand"])
def test_a_429_alone_is_retried_however_the_hook_was_added(installed: bool) -> None:
    """A refusal the hook saw is taken back: nothing of the attempt counts, and the write
    is repeated."""
    calls: list[int] = []

    @tool
    async def limited(title: Annotated[str, "The title."]) -> str:
        """Call a service that answers 429."""
        calls.append(1)
        async with _limited_client(installed) as client:
            return (await client.post("https://notify.example/hook", json={"t": title})).text

    result = _run(ToolRunner(Toolkit("t", [limited]), retry=RETRY), "limited", {"title": "a"})
    assert (len(calls), result.attempts) == (3, 3)
    assert result.retryable is True


def test_answers_are_counted_per_attempt() -> None:
    """A first attempt answered 429 (retried: nothing happened), a second whose connect fails
    before sending: retried too."""
    calls: list[int] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"})
        raise httpx.ConnectError("refused", request=request)

    @tool
    async def send(text: Annotated[str, "The text."]) -> str:
        """Send."""
        import tdk.http

        async with tdk.http.install(httpx.AsyncClient(transport=httpx.MockTransport(flaky))) as c:
            return (await c.post("https://notify.example/hook", json={"t": text})).text

    result = _run(ToolRunner(Toolkit("t", [send]), retry=RETRY), "send", {"text": "a"})
    assert (len(calls), result.attempts) == (3, 3)


def test_a_nested_call_that_wrote_keeps_the_outer_write_from_being_repeated() -> None:
    """An outer write tool calls an inner one through the runner; the inner's answered write
    counts for the outer call when the outer's own request then fails to connect."""
    POSTS.clear()

    @tool
    async def inner(title: Annotated[str, "The title."]) -> str:
        """Create."""
        async with _installed() as client:
            return (await client.post("https://api.example/plain", json={"t": title})).text

    @tool
    async def outer(title: Annotated[str, "The title."]) -> str:
        """Create through the inner tool, then notify a service that cannot be reached."""
        created = await runner.run("inner", {"title": title})
        assert created.is_success
        async with _installed() as client:
            return (await client.post("https://notify.example/hook", json={})).text

    runner = ToolRunner(Toolkit("t", [inner, outer]), retry=RETRY)
    result = _run(runner, "outer", {"title": "a"})
    assert POSTS == ["/plain"]
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"


def test_a_context_subclass_with_odd_slots_keeps_them() -> None:
    """A single slot given as a string, and a private slot, are copied too."""

    class Single(ToolContext):
        __slots__ = "tenant"  # noqa: PLC0205 (a form Python accepts: the test is of it)

    class Private(ToolContext):
        __slots__ = ("__tenant",)

        def tenant(self) -> str:
            return self.__tenant

    seen: list[str] = []

    @tool(read_only=True)
    async def whose(context: ToolContext) -> str:
        """Whose call."""
        seen.append(context.tenant if isinstance(context, Single) else context.tenant())  # type: ignore[operator, union-attr]
        return "ok"

    single = Single()
    object.__setattr__(single, "tenant", "acme")
    private = Private()
    object.__setattr__(private, "_Private__tenant", "globex")
    for context in (single, private):
        assert asyncio.run(whose.run({}, context=context)).is_success
    assert seen == ["acme", "globex"]


@tool(idempotent=True)
async def lookup_elsewhere(title: Annotated[str, "The title."]) -> str:
    """An idempotent read of a service that cannot be reached (its runner retries it)."""
    async with _installed() as client:
        return (await client.get("https://search.example/issues", params={"q": title})).text


INNER = ToolRunner(Toolkit("inner", [lookup_elsewhere]), retry=RETRY)


@tool
async def create_then_look_up(title: Annotated[str, "The title."]) -> str:
    """Create (answered), look the issue up through another runner that retries, then
    notify a service that cannot be reached."""
    async with _installed() as client:
        await client.post("https://api.example/plain", json={"t": title})
        await INNER.run("lookup_elsewhere", {"title": title})
        return (await client.post("https://notify.example/hook", json={"t": title})).text


def test_a_nested_runner_retrying_a_read_keeps_the_write_from_repeating() -> None:
    """An inner runner's retries of an idempotent tool count that tool's own answers, never
    the outer call's: the write that was answered is still not repeated."""
    POSTS.clear()
    runner = ToolRunner(Toolkit("t", [create_then_look_up]), retry=RETRY)
    result = _run(runner, "create_then_look_up", {"title": "a"})
    assert len(POSTS) == 1
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"


# --- what was sent, not only what was answered: a real server on 127.0.0.1 ------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port of 127.0.0.1 bound but not listening: a connect to it is refused."""
    with refused_port() as port:
        yield port


#: The client's read timeout: the answer to ``/lost`` comes long after it.
READ_TIMEOUT = httpx.Timeout(30.0, read=0.2)
LOST = (httpx.ReadTimeout, httpx.RemoteProtocolError)


def _write_then_notify(base: str, closed: int, how: str, *, sync: bool) -> Tool[..., Any]:
    """A write whose answer is lost (``how``), then a notification that cannot connect."""
    notify = f"http://127.0.0.1:{closed}/notify"
    if sync:

        @tool
        def create_and_notify(title: Annotated[str, "The title."]) -> str:
            """Create an issue, then notify a service (a sync tool, in a worker thread)."""
            with tdk.http.install(httpx.Client(timeout=READ_TIMEOUT)) as client:
                with contextlib.suppress(*LOST):  # the answer is lost; the issue may exist
                    client.post(f"{base}/{how}", json={"title": title})
                return client.post(notify, json={"title": title}).text

        return create_and_notify

    @tool
    async def create_and_notify_async(title: Annotated[str, "The title."]) -> str:
        """Create an issue, then notify a service."""
        async with tdk.http.install(httpx.AsyncClient(timeout=READ_TIMEOUT)) as client:
            with contextlib.suppress(*LOST):
                await client.post(f"{base}/{how}", json={"title": title})
            return (await client.post(notify, json={"title": title})).text

    return create_and_notify_async


def _assert_not_repeated(result: ToolResult, kind: ErrorKind) -> None:
    """The write was not repeated, and the model is told not to repeat it blindly."""
    assert result.kind is kind
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "not_idempotent"
    assert result.attempts == 1
    assert result.retryable is False


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("how", ["lost", "reset"], ids=["read-timeout", "connection-reset"])
def test_a_sent_write_whose_answer_was_lost_is_not_repeated_after_a_refused_connect(
    how: str, sync: bool, closed_port: int
) -> None:
    """A write the server received (its answer timed out, or the connection was reset),
    then a request that cannot connect: the last error says "not sent", but the write was;
    the server sees it once."""
    upstream = Writes()
    with upstream.serve() as base:
        act = _write_then_notify(base, closed_port, how, sync=sync)
        result = _run(ToolRunner(Toolkit("t", [act]), retry=RETRY), act.name, {"title": "a"})
    assert upstream.writes == 1
    _assert_not_repeated(result, ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE)


def _send_in_a_thread(how: str, send: Callable[[], None]) -> Any:
    """An awaitable of ``send()`` run in a thread that does not copy the caller's context
    (``how``): a job of ``loop.run_in_executor``, or a thread the tool starts itself."""
    if how == "run_in_executor":
        return asyncio.get_running_loop().run_in_executor(None, send)
    thread = threading.Thread(target=send)
    thread.start()
    return asyncio.to_thread(thread.join)


@pytest.mark.parametrize("how", ["run_in_executor", "own_thread"])
def test_a_write_sent_from_a_thread_without_the_context_is_not_repeated(
    how: str, closed_port: int
) -> None:
    """A write sent (its answer lost) from a thread the attempt's context did not reach,
    then a request that cannot connect: the write counts for the attempt all the same, and
    the server sees it once."""
    upstream = Writes()
    with upstream.serve() as base, tdk.http.install(httpx.Client(timeout=READ_TIMEOUT)) as sync:

        def create() -> None:
            with contextlib.suppress(*LOST):  # the answer is lost; the issue may exist
                sync.post(f"{base}/lost", json={"title": "a"})

        @tool
        async def create_and_notify(title: Annotated[str, "The title."]) -> str:
            """Create an issue from a thread, then notify a service."""
            await _send_in_a_thread(how, create)
            async with tdk.http.install(httpx.AsyncClient()) as client:
                notify = f"http://127.0.0.1:{closed_port}/notify"
                return (await client.post(notify, json={"title": title})).text

        runner = ToolRunner(Toolkit("t", [create_and_notify]), retry=RETRY)
        result = _run(runner, "create_and_notify", {"title": "a"})
    assert upstream.writes == 1
    _assert_not_repeated(result, ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE)


def test_a_write_in_flight_beside_a_429_is_not_repeated() -> None:
    """A write in flight (received, unanswered) while a parallel request of the same
    attempt is refused with a 429: the refusal alone would be safe to retry, the write is
    not. The server sees it once."""
    upstream = Writes()
    with upstream.serve() as base:

        @tool
        async def create_while_limited(title: Annotated[str, "The title."]) -> str:
            """Create an issue while checking a quota."""
            async with tdk.http.install(httpx.AsyncClient(timeout=30.0)) as client:
                write = asyncio.create_task(client.post(f"{base}/held", json={"title": title}))
                try:
                    return (await client.post(f"{base}/limited")).text
                finally:
                    write.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await write

        runner = ToolRunner(Toolkit("t", [create_while_limited]), retry=RETRY)
        result = _run(runner, "create_while_limited", {"title": "a"})
    assert upstream.writes == 1
    _assert_not_repeated(result, ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT)


@pytest.mark.parametrize("target", ["quota", "closed"], ids=["429", "connect-refused"])
def test_a_refusal_alone_is_still_retried(target: str, closed_port: int) -> None:
    """The control: a write refused with a 429, or whose connect was refused, before
    anything else of its attempt was sent, is repeated (the upstream certainly did
    nothing), and its last failure stays retryable."""
    upstream = Writes()
    with upstream.serve() as base:
        url = f"{base}/quota" if target == "quota" else f"http://127.0.0.1:{closed_port}/"

        @tool
        async def refused(title: Annotated[str, "The title."]) -> str:
            """Create an issue where it is refused."""
            async with tdk.http.install(httpx.AsyncClient(timeout=30.0)) as client:
                return (await client.post(url, json={"title": title})).text

        result = _run(ToolRunner(Toolkit("t", [refused]), retry=RETRY), "refused", {"title": "a"})
    assert upstream.writes == 0
    assert result.attempts == 3
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "max_attempts"
    assert result.retryable is True


# --- a write the runner would not repeat is not offered to the model as retryable ----------

STOPPED_WRITES: dict[str, dict[str, Any]] = {
    "retry-policy": {"retry": RETRY},
    "no-retry-policy": {},
    "category-not-retried": {"retry": RetryPolicy(retry_on={"rate_limit"})},
}


@pytest.mark.parametrize("options", STOPPED_WRITES.values(), ids=STOPPED_WRITES.keys())
@pytest.mark.parametrize(
    "failure",
    [FAILURES["server-error-503"][0], FAILURES["timeout"][0], FAILURES["read-error"][0]],
    ids=["server-error-503", "timeout", "read-error"],
)
def test_a_write_that_may_have_happened_is_not_retryable_for_the_model(
    options: dict[str, Any], failure: Callable[[], BaseException]
) -> None:
    """Whatever the retry policy, a failed write that may have taken effect says
    ``retryable: false`` everywhere the model or a host reads it, and tells the model to
    check before trying again."""
    act, calls = _scripted({}, failure)
    result = _run(ToolRunner(Toolkit("t", [act]), **options), "act", {"n": 1})
    assert len(calls) == 1
    error = result.error
    assert error is not None
    assert (error.retryable, error.max_retry_attempts) == (False, 0)
    assert error.details["retry_stopped"] == "not_idempotent"
    assert error.additional_prompt_content is not None
    assert "may have taken effect" in error.additional_prompt_content
    shown = json.loads(result.for_model())
    assert "check whether it did" in shown["additional_prompt_content"].lower()
    assert result.to_dict()["error"]["retryable"] is False
    facts = tdk_mcp.result(result).meta["tdk/error"]  # type: ignore[index]
    assert facts["retryable"] is False
    assert facts["additional_prompt_content"] == error.additional_prompt_content


def test_the_tools_own_guidance_follows_the_warning() -> None:
    """Guidance the error already had is kept, after the warning."""
    act, _ = _scripted(
        {},
        lambda: UpstreamServerError("down", status_code=503, additional_prompt_content="Use v2."),
    )
    result = _run(ToolRunner(Toolkit("t", [act]), retry=RETRY), "act", {"n": 1})
    assert result.error is not None
    guidance = result.error.additional_prompt_content
    assert guidance is not None
    assert guidance.startswith("The action may have taken effect")
    assert guidance.endswith(" Use v2.")


@pytest.mark.parametrize(
    "marks",
    [
        pytest.param({"read_only": True}, id="read-only"),
        pytest.param({"idempotent": True}, id="idempotent"),
    ],
)
def test_a_repeatable_tool_stays_retryable(marks: dict[str, bool]) -> None:
    """The control: a read-only or idempotent tool's failure keeps its retryability, with no
    warning (here, under a runner without a retry policy)."""
    act, _ = _scripted(marks, FAILURES["timeout"][0])
    result = _run(ToolRunner(Toolkit("t", [act])), "act", {"n": 1})
    assert result.retryable is True
    assert result.error is not None
    assert result.error.additional_prompt_content is None
    assert "retry_stopped" not in result.error.details
