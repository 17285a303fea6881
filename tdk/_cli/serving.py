"""``tdk serve``: a module's tools over MCP, from the command line (see ``docs/mcp.md``).

The target is loaded after the server's own packages (so that a tool file named ``mcp.py``
or ``uvicorn.py`` is reported as the name clash it is, not as a missing package), inside the
server's streams (``tdk._cli.served_streams``), which hold from before the import until the
server has ended: over stdio the protocol has stdout to itself, and nothing the server or the
tools write can block it on a stderr that nobody reads.

The server ends:

- when the host closes stdin (stdio): the calls still running are cancelled; one that
  ignores its cancellation is left behind after :data:`HOST_GONE_GRACE` seconds. Status 0.
- on Ctrl-C or SIGTERM, as its own shutdown would: sessions end, the socket closes. Status
  130.
- when the host stops reading in the middle of a call (stdio). Status 0.
- for a worker of ``tdk serve --workers`` (``tdk._cli.workers``), also when its supervisor is
  gone (its control socket closes), as on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from tdk._cli.addresses import reach_of, unbracketed
from tdk._cli.auth_options import login_client, protection_of
from tdk._cli.process import THREADS_GRACE, threads_held
from tdk._cli.served_streams import ServedStreams, served_streams
from tdk._cli.streams import flush_stdout
from tdk._cli.targets import Target
from tdk._cli.workers import Seat, say_ready, watch_lifeline
from tdk._execution.context import ToolContext
from tdk._execution.default import Default
from tdk._execution.loop import run_in_new_loop
from tdk.runner import RetryPolicy, ToolRunner

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from tdk.auth import Verifier

__all__ = [
    "DEFAULT_DEADLINE",
    "HOST_GONE_GRACE",
    "host_refusal",
    "serve_command",
    "serving_packages",
]

#: ``tdk serve --deadline`` when none is given: the longest one call may take, retries and
#: their waits included. Hosts commonly give up on a call after 60 s (the MCP TypeScript
#: SDK's default request timeout, which many hosts keep): 50 s leaves the answer time to
#: reach the host, so the model reads tdk's ``TOOL_RUNTIME_TIMEOUT`` (or the upstream's
#: ``retry_after_ms``) instead of a bare timeout of the host's.
DEFAULT_DEADLINE: Final = 50.0

#: Seconds the calls still running get to end, once cancelled, after the host closed stdin.
HOST_GONE_GRACE: Final = 5.0


def serving_packages(*, http: bool) -> str | None:
    """Import what serving needs (before the target is loaded: see the module docstring);
    what is missing, or None."""
    try:
        import tdk.hosts.mcp  # noqa: F401

        if http:
            import uvicorn  # noqa: F401
    except ImportError as missing:
        return str(missing)
    return None


def host_refusal(host: str, *, allowed: bool) -> str | None:
    """Why ``tdk serve --http --host HOST`` must not start (a host other than loopback, and no
    authentication), or None. ``allowed``: ``--auth`` or ``--allow-unauthenticated`` was
    given."""
    reach = reach_of(host)
    if reach == "loopback" or allowed:
        return None
    where = (
        "every interface of this machine"
        if reach == "every"
        else "an address that is not loopback (or that names none)"
    )
    return (
        f"--host {host or repr(host)} is {where}: any machine that reaches it could call "
        "the tools, and tdk serve has no authentication unless given --auth. Give --auth jwt "
        "or --auth introspection (docs/auth.md), or serve on loopback (the default, "
        "127.0.0.1) behind a proxy that authenticates, or give --allow-unauthenticated to "
        "serve it anyway"
    )


def serve_command(
    options: argparse.Namespace,
    load: Callable[[], Target | int],
    missing: str | None,
    *,
    process: bool = False,
) -> int:
    """Run ``tdk serve`` with the parsed ``options``; ``load`` loads what the target names (or
    reports why it cannot and gives the exit status); ``missing`` is what
    :func:`serving_packages` said, before the target's folder was on ``sys.path``.
    ``process``: this is the process's own command (not ``main()`` called in a program),
    which may leave threads of the module behind when it ends. Returns the exit status."""
    if missing is not None:
        print(f"tdk serve: {missing}", file=sys.stderr)
        return 1
    with served_streams(stdio=not options.http, keep=process) as streams:
        status = _serve(options, load, streams, process=process)
        if process:
            _leave(status, streams)
    return status


def _serve(
    options: argparse.Namespace,
    load: Callable[[], Target | int],
    streams: ServedStreams,
    *,
    process: bool,
) -> int:
    """The exit status (see :func:`serve_command`)."""
    target = load()
    streams.take_back()
    if isinstance(target, int):
        return target
    runner = _runner_of(target, options.deadline, streams)
    if runner is None:
        return 2
    with _logging_to(streams):
        return _serve_runner(options, runner, streams, process=process)


def _runner_of(
    target: Target, deadline: float | Default | None, streams: ServedStreams
) -> ToolRunner | None:
    """The runner that serves ``target``: the module's own, used as it is; else one with
    retries and the ``--deadline`` (given or the default). None, once said why, for a
    ``--deadline`` given with a runner of the module's (which has its own)."""
    if target.runner is None:
        limit = DEFAULT_DEADLINE if isinstance(deadline, Default) else deadline
        return ToolRunner(target.toolkit, retry=RetryPolicy(), deadline=limit)
    if not isinstance(deadline, Default):
        streams.say(
            f"tdk serve: --deadline is for tools or a Toolkit: the {target.origin} is served "
            "as it is, with its own deadline (ToolRunner(..., deadline=...))"
        )
        return None
    return target.runner


def _serve_runner(
    options: argparse.Namespace, runner: ToolRunner, streams: ServedStreams, *, process: bool
) -> int:
    from tdk.hosts import mcp

    toolkit = runner.toolkit
    context = mcp.context_from_environment(toolkit)
    seat: Seat | None = options.worker
    refused = _callback_refused(options, runner)
    if refused is not None:
        if seat is None or seat.index == 0:  # (said by one worker)
            streams.say(f"tdk serve: {refused}")
        return 2
    if seat is None or seat.index == 0:  # (said by one worker)
        _say_what_is_missing(runner, context, streams, authenticated=options.auth is not None)
        _say_where_sign_ins_go(options, runner, streams, workers=seat is not None)
    if seat is not None and seat.index == 0 and runner.stats().store == "local":
        streams.say(
            "tdk serve: WARNING: the workers share no state: each keeps its own rate limits, "
            "circuits and record of used resume tokens (serve a ToolRunner with a RedisStore "
            "and one state_key: docs/mcp.md, Deploying behind a load balancer)"
        )
    serving: Coroutine[Any, Any, None]
    lifeline = None
    if options.http:
        # The default context: the secrets of the environment; each call's user_id, scopes
        # and claims are its verified token's (tdk.hosts.mcp completes it per call).
        server = mcp.server(toolkit, runner=runner, context=context)
        serving, lifeline = _http_serving(options, server, runner, streams, seat)
    else:
        serving = mcp.serve(toolkit, "stdio", runner=runner, context=context)
    try:
        outcome = run_in_new_loop(
            _until_signalled(serving, streams, process=process, lifeline=lifeline)
        )
    except BaseExceptionGroup as group:  # the SDK's task group: the host stopped reading
        if group.split(BrokenPipeError)[1] is not None:
            raise
        return 0
    except OSError as cannot:  # a port in use, an address not of this machine
        reason = cannot.strerror or type(cannot).__name__
        streams.say(f"tdk serve: cannot serve on {options.host}:{options.port}: {reason}")
        return 1
    finally:
        if lifeline is not None:
            lifeline.close()
    if outcome is _Outcome.HOST_LEFT:
        streams.say(_LEFT_BEHIND)
        return 0
    if outcome is _Outcome.ENDED:
        return 0
    if not options.http:
        # The protocol's reader is a thread blocked in read(): it would hold the process until
        # the host writes again. Everything is shut down; flush and leave now.
        _exit_now(streams, 130, "tdk: interrupted")
    if seat is None:  # (a worker's supervisor says it for all)
        streams.say("tdk: interrupted")
    return 130


def _callback_refused(options: argparse.Namespace, runner: ToolRunner) -> str | None:
    """Why the provider's callback of a runner given ``user_auth`` cannot be served with
    these options (see ``tdk.hosts._mcp_callback``), or None."""
    if not options.http or runner.user_auth is None:
        return None
    from tdk.hosts._mcp_callback import callback_problem, callback_refusal

    problem = callback_problem(runner)
    if options.auth is not None and problem is None:
        return callback_refusal(runner, login_client(os.environ))
    return problem


def _say_where_sign_ins_go(
    options: argparse.Namespace, runner: ToolRunner, streams: ServedStreams, *, workers: bool
) -> None:
    """Tell the operator when the users' sign-ins at OAuth providers (a runner given
    ``user_auth``) cannot come back: over stdio nothing answers the provider's callback, a
    loopback ``redirect_uri`` names another port, workers keep the tokens each its own."""
    user_auth = runner.user_auth
    if user_auth is None:
        return
    redirect = user_auth.redirect_uri
    if not options.http:
        streams.say(
            f"tdk serve: WARNING: over stdio nothing answers the providers' callback "
            f"({redirect}): the tools acting as the user work only once your own web server "
            "calls runner.complete_authorization() there (or serve with --http)"
        )
        return
    parts = urlsplit(redirect)
    if reach_of(parts.hostname or "") == "loopback" and parts.port != options.port:
        streams.say(
            f"tdk serve: WARNING: user_auth's redirect_uri ({redirect}) is not this server's "
            f"port ({options.port}): the providers will send the users' browsers elsewhere"
        )
    # (the auth extra: loaded already, since the runner has a UserAuth)
    from tdk.auth._token_store import InMemoryTokenStore

    if workers and isinstance(user_auth.store, InMemoryTokenStore):
        streams.say(
            "tdk serve: WARNING: each worker keeps its own users' tokens (user_auth's "
            "InMemoryTokenStore): a user signed in through one worker is asked again by the "
            "others (give UserAuth a RedisTokenStore, and the runner a state_key)"
        )


def _say_what_is_missing(
    runner: ToolRunner, context: ToolContext, streams: ServedStreams, *, authenticated: bool
) -> None:
    """Tell the operator which tools of ``runner`` will not run: a secret not in the
    environment, scopes no caller can hold without authentication, a user's token no runner
    gets (a runner not given ``user_auth``)."""
    for item in runner.toolkit:
        needs = item.definition.requirements
        if needs.auth is not None and runner.user_auth is None:
            streams.say(
                f"tdk serve: {item.name} acts as the user at '{needs.auth.provider}', but the "
                "served runner has no user_auth: its calls will answer "
                "TOOL_RUNTIME_MISSING_REQUIREMENT (serve a ToolRunner given a UserAuth: "
                "docs/auth.md)"
            )
        for secret in needs.secrets:
            if secret not in context.secrets:
                streams.say(
                    f"tdk serve: {secret} is not set in the environment: calls of "
                    f"{item.name} will answer TOOL_RUNTIME_MISSING_REQUIREMENT"
                )
        if needs.scopes and not authenticated:
            streams.say(
                f"tdk serve: {item.name} needs the scopes {' '.join(needs.scopes)}, which no "
                "caller holds without --http --auth: it is not listed"
            )


async def _closing(serving: Coroutine[Any, Any, None], verifier: Verifier) -> None:
    """``serving``, then the verifier's connections closed (in the loop that used them)."""
    try:
        await serving
    finally:
        await verifier.aclose()


def _http_serving(
    options: argparse.Namespace,
    server: Server[Any],
    runner: ToolRunner,
    streams: ServedStreams,
    seat: Seat | None,
) -> tuple[Coroutine[Any, Any, None], socket.socket | None]:
    """Serving ``server`` over streamable HTTP (behind the bearer-token check of ``--auth``,
    when given; with the provider's callback of a ``runner`` given ``user_auth``), and, for
    a worker of ``tdk serve --workers`` (its ``seat``), its control socket: the listening
    socket is its supervisor's, and the URL is said by the supervisor once this worker says
    it serves."""
    from tdk.hosts._mcp_http import serve_http

    host = unbracketed(options.host)
    protection = protection_of(options, runner.toolkit, os.environ)
    if seat is None:
        if options.auth is None and options.allow_unauthenticated and reach_of(host) != "loopback":
            streams.say(
                f"tdk serve: WARNING: serving on {host} without authentication "
                "(--allow-unauthenticated): whoever reaches it can call every tool"
            )
        listener, control = None, None
        on_listening = _saying_url(streams)
    else:
        listener, control = seat.sockets()
        on_listening = _saying_ready(control)
    serving = serve_http(
        server,
        host,
        options.port,
        on_listening=on_listening,
        protection=protection,
        listener=listener,
        runner=runner,
    )
    if protection is not None:
        serving = _closing(serving, protection.verifier)
    return serving, control


def _saying_url(streams: ServedStreams) -> Callable[[str], None]:
    """What a server of its own does once it listens: say its URL."""
    return lambda url: streams.say(f"tdk serve: {url}")


def _saying_ready(control: socket.socket) -> Callable[[str], None]:
    """What a worker does once it listens: tell its supervisor, which says the URL."""
    return lambda _url: say_ready(control)


#: Said when the host has left and a call has not ended once cancelled.
_LEFT_BEHIND: Final = (
    f"tdk serve: the host left; a call still running {HOST_GONE_GRACE:g} s after its "
    "cancellation is left behind"
)


class _Outcome(enum.Enum):
    """How serving ended."""

    ENDED = "ended"  # on its own: the host closed stdin and every call ended
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM
    HOST_LEFT = "host-left"  # the host closed stdin; a call did not end once cancelled


async def _until_signalled(
    serving: Coroutine[Any, Any, None],
    streams: ServedStreams,
    *,
    process: bool,
    lifeline: socket.socket | None = None,
) -> _Outcome:
    """Run ``serving`` until it ends, SIGINT or SIGTERM cancels it (or, for a worker of
    ``tdk serve --workers``, its ``lifeline`` to the supervisor closes), or the host has left
    and it has not ended :data:`HOST_GONE_GRACE` seconds later (then, for the process's own
    command, the process ends at once, with status 0: what is left behind would only get
    in the way of the loop's closing)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(serving)
    gave_up: asyncio.Future[None] = loop.create_future()
    signals = (signal.SIGINT, signal.SIGTERM)
    stdio = streams.protocol is not None

    def stop() -> None:
        task.cancel()
        if stdio:  # the protocol's reader is a thread that cancellation cannot stop: if the
            # server has not ended within a second, end the process (its output flushed)
            loop.call_later(1.0, _exit_now, streams, 130, "tdk: interrupted")

    def give_up() -> None:
        if not gave_up.done():
            gave_up.set_result(None)

    def host_left() -> None:  # (in the protocol's reading thread)
        with contextlib.suppress(RuntimeError):  # (the loop is closed: all ended already)
            loop.call_soon_threadsafe(loop.call_later, HOST_GONE_GRACE, give_up)

    if streams.protocol is not None:
        streams.protocol.when_ended(host_left)
    for each in signals:
        loop.add_signal_handler(each, stop)
    if lifeline is not None:  # a worker whose supervisor is gone stops as on SIGTERM
        watch_lifeline(loop, lifeline, stop)
    try:
        await asyncio.wait({task, gave_up}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            if process:
                _exit_now(streams, 0, _LEFT_BEHIND)
            task.cancel()  # (once more: it is left behind)
            return _Outcome.HOST_LEFT
        task.result()
    except asyncio.CancelledError:
        if task.cancelled() and not _cancelling(asyncio.current_task()):
            return _Outcome.INTERRUPTED
        task.cancel()
        raise
    finally:
        for each in signals:
            loop.remove_signal_handler(each)
        if lifeline is not None:
            loop.remove_reader(lifeline)
    return _Outcome.ENDED


@contextlib.contextmanager
def _logging_to(streams: ServedStreams) -> Iterator[None]:
    """Failures logged one line each on stderr (never blocking: see ``tdk._cli.drain``) while
    the block runs, unless the application has configured logging itself."""
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = logging.StreamHandler(streams.log_stream())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _exit_now(streams: ServedStreams, status: int, line: str) -> None:
    """Say ``line`` on stderr and end the process with ``status``, whatever a tool did to the
    standard streams (a ``sys.stdout`` set to None or closed must not keep it running), and
    however full stderr is (it gets a second at most)."""
    flush_stdout()
    streams.say(line)
    streams.settle(1.0)
    os._exit(status)


def _leave(status: int, streams: ServedStreams) -> None:
    """Once the server has ended: end the process now, with ``status``, when threads the
    module started (not daemons) have not ended within :data:`THREADS_GRACE` seconds: they
    would keep it running after its host has gone. Else return, and the process ends as any
    does."""
    held = threads_held(THREADS_GRACE)
    if not held:
        return
    streams.settle()
    os._exit(status)


def _cancelling(task: asyncio.Task[Any] | None) -> bool:
    return task is not None and task.cancelling() > 0
