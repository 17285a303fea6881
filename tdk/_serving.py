"""``tdk serve``: a module's tools over MCP, from the command line (see ``docs/mcp.md``).

The target is loaded after the server's own packages (so that a tool file named ``mcp.py``
or ``uvicorn.py`` is reported as the name clash it is, not as a missing package), and, on
stdio, with the standard streams set aside: what the module prints while it is imported goes
to stderr, and it reads nothing of the protocol from stdin. Ctrl-C or SIGTERM stops the
server as its own shutdown would: sessions end, the socket closes, status 130.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from tdk._loop import run_in_new_loop
from tdk._streams import flush_stdout, streams_aside
from tdk._toolkit import Toolkit

__all__ = ["serve_command", "serving_packages"]


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


def serve_command(
    options: argparse.Namespace, load: Callable[[], Toolkit | None], missing: str | None
) -> int:
    """Run ``tdk serve`` with the parsed ``options``; ``load`` loads the target's toolkit (or
    reports why it cannot and gives None); ``missing`` is what :func:`serving_packages` said,
    before the target's folder was on ``sys.path``. Returns the exit status."""
    if missing is not None:
        print(f"tdk serve: {missing}", file=sys.stderr)
        return 1
    from tdk.hosts import mcp

    with contextlib.nullcontext() if options.http else streams_aside(stdin=True):
        toolkit = load()
    if toolkit is None:
        return 1
    # Failures are logged one line each on stderr (stdout is the protocol's, on stdio).
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    context = mcp.context_from_environment(toolkit)
    for item in toolkit:
        for secret in item.definition.requirements.secrets:
            if secret not in context.secrets:
                print(
                    f"tdk serve: {secret} is not set in the environment: calls of "
                    f"{item.name} will answer TOOL_RUNTIME_MISSING_REQUIREMENT",
                    file=sys.stderr,
                )
    from tdk.runner import RetryPolicy, ToolRunner

    transport: Literal["stdio", "http"] = "http" if options.http else "stdio"
    if options.http:
        print(f"tdk serve: http://{options.host}:{options.port}/mcp", file=sys.stderr)
    runner = ToolRunner(toolkit, retry=RetryPolicy(), deadline=options.deadline)
    serving = mcp.serve(
        toolkit, transport, host=options.host, port=options.port, runner=runner, context=context
    )
    try:
        interrupted = run_in_new_loop(_until_signalled(serving, stdio=not options.http))
    except BaseExceptionGroup as group:  # the SDK's task group: the host stopped reading
        if group.split(BrokenPipeError)[1] is not None:
            raise
        return 0
    except OSError as cannot:  # a port in use, an address not of this machine
        reason = cannot.strerror or type(cannot).__name__
        print(
            f"tdk serve: cannot serve on {options.host}:{options.port}: {reason}", file=sys.stderr
        )
        return 1
    if not interrupted:
        return 0
    if not options.http:
        # The SDK's reader of stdin is a thread blocked in read(): it would hold the process
        # until the host writes again. Everything is shut down; flush and leave now.
        _exit_now()
    print("tdk: interrupted", file=sys.stderr)
    return 130


async def _until_signalled(serving: Coroutine[Any, Any, None], *, stdio: bool) -> bool:
    """Run ``serving`` until it ends (False) or SIGINT or SIGTERM cancels it (True)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(serving)
    signals = (signal.SIGINT, signal.SIGTERM)

    def stop() -> None:
        task.cancel()
        if stdio:  # the SDK reads stdin in a thread that cancellation cannot stop: if the
            # server has not ended within a second, end the process (its output flushed)
            loop.call_later(1.0, _exit_now)

    for each in signals:
        loop.add_signal_handler(each, stop)
    try:
        await task
    except asyncio.CancelledError:
        if task.cancelled() and not _cancelling(asyncio.current_task()):
            return True
        raise
    finally:
        for each in signals:
            loop.remove_signal_handler(each)
    return False


def _exit_now() -> None:
    """Say so on stderr and end the process with status 130, whatever a tool did to the
    standard streams (a ``sys.stdout`` set to None or closed must not keep it running)."""
    flush_stdout()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.write(2, b"tdk: interrupted\n")
    os._exit(130)


def _cancelling(task: asyncio.Task[Any] | None) -> bool:
    return task is not None and task.cancelling() > 0
