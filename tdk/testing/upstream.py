"""``tdk_upstream``: respx routes that fail the way real APIs fail, and count what they got.

::

    def test_rate_limit(tdk_upstream):
        route = tdk_upstream.post("https://api.github.com/repos/acme/app/issues")
        route.answer(tdk_upstream.rate_limited("github", retry_after=30), tdk_upstream.ok({}))
        ...
        assert route.calls == 2

A route plays its answers in turn and repeats the last (by default a ``200`` with ``{}``).
Requests to loopback addresses (127.0.0.1, localhost, ::1) go through to the real network, so
a test can use a local server too. A request that no route answers fails the tool's call (as
a refused connection) and the test, naming the request. The answers are those of
:mod:`tdk.testing.dialects`.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote_to_bytes

import httpx

from tdk.testing import dialects
from tdk.testing.dialects import Answer

if TYPE_CHECKING:
    import respx

__all__ = ["Upstream", "UpstreamRoute"]

#: Hosts whose requests go through to the network (a local server of the test's own).
LOOPBACK: Final = ("127.0.0.1", "localhost", "::1", "[::1]")

#: How many requests no route answered are named in the failure.
_MAX_NAMED: Final = 10


def _wall_clock() -> datetime:
    """Now, to the second (an HTTP ``Date`` has no fractions)."""
    return datetime.now(UTC).replace(microsecond=0)


class UpstreamRoute:
    """One method and URL of the fake upstream: the answers it plays and the requests it got."""

    def __init__(self, upstream: Upstream, method: str, url: httpx.URL) -> None:
        self._upstream = upstream
        self.method: Final = method
        self.url: Final = url
        self._answers: list[Answer] = [dialects.answer_ok()]
        self._played = 0
        self.requests: list[httpx.Request] = []
        """Every request this route got, in order."""

    def answer(self, *answers: Answer | httpx.Response) -> UpstreamRoute:
        """Answer with ``answers`` in turn, then the last one again; a plain ``httpx.Response``
        is sent as it is. Returns the route."""
        if not answers:
            raise ValueError("answer() needs at least one answer")
        self._answers = [each if isinstance(each, Answer) else _fixed(each) for each in answers]
        self._played = 0
        return self

    @property
    def calls(self) -> int:
        """How many requests this route got."""
        return len(self.requests)

    def matches(self, request: httpx.Request) -> bool:
        """Whether ``request`` is this route's: the same method, scheme, host, port and path
        (a ``{name}`` segment of the route's path matches any one segment), and the same query
        when the route's URL has one."""
        url = request.url
        return (
            request.method == self.method
            and (url.scheme, url.host, url.port) == (self.url.scheme, self.url.host, self.url.port)
            and _same_path(self.url.raw_path.split(b"?")[0], url.raw_path.split(b"?")[0])
            and (not self.url.query or sorted(url.params.multi_items())
                 == sorted(self.url.params.multi_items()))
        )  # fmt: skip

    def play(self, request: httpx.Request) -> httpx.Response:
        """The next answer to ``request`` (the last one once all were played)."""
        self.requests.append(request)
        answer = self._answers[min(self._played, len(self._answers) - 1)]
        self._played += 1
        return answer(request, self._upstream.clock())

    def __repr__(self) -> str:
        return f"<UpstreamRoute {self.method} {self.url} calls={self.calls}>"


def _same_path(route: bytes, request: bytes) -> bool:
    """Whether the request's raw path is the route's, ``{name}`` segments matching any one
    non-empty segment."""
    wanted, got = route.split(b"/"), request.split(b"/")
    return len(wanted) == len(got) and all(
        w == g or (_placeholder(w) and bool(g)) for w, g in zip(wanted, got, strict=True)
    )


def _placeholder(segment: bytes) -> bool:
    name = unquote_to_bytes(segment)
    return name.startswith(b"{") and name.endswith(b"}")


def _fixed(response: httpx.Response) -> Answer:
    return Answer(str(response.status_code), lambda _request, _now: response)


class Upstream:
    """Fake upstream APIs on respx, for the length of a ``with`` block (the ``tdk_upstream``
    fixture: the length of a test).

    ``base_url`` (optional) is joined to the relative URLs given to :meth:`route`; ``clock``
    gives each answer's ``Date`` (default: the wall clock, to the second). The answers are
    :mod:`tdk.testing.dialects`'s, also reachable as methods here
    (``tdk_upstream.rate_limited("openai", retry_after=1.5)``).
    """

    ok = staticmethod(dialects.answer_ok)
    rate_limited = staticmethod(dialects.answer_rate_limited)
    server_error = staticmethod(dialects.answer_server_error)
    invalid = staticmethod(dialects.answer_invalid)
    timeout = staticmethod(dialects.answer_timeout)
    reset = staticmethod(dialects.answer_reset)
    refused = staticmethod(dialects.answer_refused)

    def __init__(
        self, base_url: str | None = None, *, clock: Callable[[], datetime] = _wall_clock
    ) -> None:
        self.base_url = base_url
        """Joined to the relative URLs given to :meth:`route`."""
        self.clock = clock
        """Gives each answer's ``Date``."""
        self.routes: list[UpstreamRoute] = []
        """The routes made, in order (the first that matches a request answers it)."""
        self.requests: list[httpx.Request] = []
        """Every request a route answered, in the order they came."""
        self.unrouted: list[httpx.Request] = []
        """Requests that no route answered (each also failed its call)."""
        self._router: respx.MockRouter | None = None

    def __enter__(self) -> Upstream:
        try:
            import respx
        except ImportError as missing:
            raise ImportError(
                "tdk_upstream needs respx: pip install 'tdk-tools[testing]'"
            ) from missing
        router = respx.mock(assert_all_called=False, assert_all_mocked=True)
        router.__enter__()
        router.route(host__in=LOOPBACK).pass_through()
        router.route().mock(side_effect=self._dispatch)
        self._router = router
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._router is not None:
            self._router.__exit__(kind, error, traceback)
            self._router = None

    def route(self, method: str, url: str) -> UpstreamRoute:
        """The route of ``method`` and ``url``: a ``{name}`` segment of its path matches any
        one segment (``/repos/{owner}/{repo}/issues``); a URL with a query matches that query
        only, one without, any query."""
        full = httpx.URL(self.base_url).join(url) if self.base_url else httpx.URL(url)
        if not full.is_absolute_url:
            raise ValueError(f"{url!r} is not an absolute URL, and no base_url is set")
        route = UpstreamRoute(self, method.upper(), full)
        self.routes.append(route)
        return route

    def _dispatch(self, request: httpx.Request) -> httpx.Response:
        for route in self.routes:
            if route.matches(request):
                self.requests.append(request)
                return route.play(request)
        self.unrouted.append(request)
        raise httpx.ConnectError(f"tdk_upstream: no route for {request.method}", request=request)

    def get(self, url: str) -> UpstreamRoute:
        """The route of ``GET url``."""
        return self.route("GET", url)

    def post(self, url: str) -> UpstreamRoute:
        """The route of ``POST url``."""
        return self.route("POST", url)

    def put(self, url: str) -> UpstreamRoute:
        """The route of ``PUT url``."""
        return self.route("PUT", url)

    def patch(self, url: str) -> UpstreamRoute:
        """The route of ``PATCH url``."""
        return self.route("PATCH", url)

    def delete(self, url: str) -> UpstreamRoute:
        """The route of ``DELETE url``."""
        return self.route("DELETE", url)

    @property
    def calls(self) -> int:
        """How many requests the routes got, all together."""
        return len(self.requests)

    def unrouted_report(self) -> str | None:
        """What the test is told when requests reached no route, or None."""
        if not self.unrouted:
            return None
        named = [f"  - {r.method} {r.url.copy_with(query=None)}" for r in self.unrouted]
        more = len(named) - _MAX_NAMED
        lines = named[:_MAX_NAMED] + ([f"  ... and {more} more"] if more > 0 else [])
        return "tdk_upstream: requests that no route answers:\n" + "\n".join(lines)
