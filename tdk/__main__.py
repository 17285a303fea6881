"""The ``tdk`` command: check, describe and run the tools of a module or a path.

::

    tdk check tools/weather.py          # load the tools; report every problem of every tool
    tdk schema tools/weather.py         # the definitions as JSON
    tdk schema tools/weather.py --format openai-strict   # ... as a host's tools= takes them
    tdk schema tools/weather.py --check contract.json    # breaking changes against a snapshot
    tdk run tools/weather.py forecast '{"city": "Oslo"}'   # one call, its ToolResult as JSON
    tdk serve tools/weather.py          # the tools over MCP, on stdio (--http: streamable HTTP)
    tdk serve tools.py:runner --http --workers 4    # 4 processes on one port (tdk._cli.workers)

A target is a ``.py`` file or a package directory (a target ending in ``.py`` or holding a
``/`` is always a path), or a dotted module name, optionally followed by ``:NAME``, the
module's ``ToolRunner``, ``Toolkit`` or a factory of one (``tools.py:runner``); without a
name, the module's one runner, else its one toolkit, else its ``@tool`` functions
(``tdk._cli.targets``). Every broken tool of the module is reported, not only the first. For
a path, the folder holding the top-level module is first on ``sys.path`` while the command
runs, as for a script. What the module does to the process while imported (a fork,
``os._exit()``, a signal ignored) does not change what the command does
(``tdk._cli.process``). Exit status: 0 on success, 1 when the module cannot be loaded or the
call failed, 2 for a usage error (a target that names nothing to serve, a ``tdk serve
--http --host`` that is not loopback, without ``--auth`` or ``--allow-unauthenticated``, and
``--workers`` without ``--http``, included). ``tdk schema --check FILE`` exits 1 for a
breaking change too (``tdk._cli.schema_check``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

from tdk._cli.auth_options import add_auth_options, auth_refusal
from tdk._cli.process import can_supervise, import_guard, supervised
from tdk._cli.schema_check import schema_check
from tdk._cli.serving import DEFAULT_DEADLINE, host_refusal, serve_command, serving_packages
from tdk._cli.streams import streams_aside
from tdk._cli.targets import Target, TargetError, load_target, script_path
from tdk._cli.workers import WORKER_OPTION, seat, serve_workers
from tdk._define.tool import collect_definition_errors
from tdk._define.toolkit import Toolkit
from tdk._execution.context import ToolContext
from tdk._execution.default import DEFAULT
from tdk._execution.execute import checked_seconds
from tdk._execution.loop import run_in_new_loop
from tdk._execution.seconds import shown
from tdk._failures.redact import redact_text
from tdk.errors import ToolError, ToolkitLoadError
from tdk.hosts._formats import SCHEMA_FORMATS, host_shapes

__all__ = ["main"]


def _is_text(argument: str) -> bool:
    """Whether a command-line argument is text: bytes that are not UTF-8 reach ``sys.argv`` as
    lone surrogates, which no model could send."""
    try:
        argument.encode()
    except UnicodeEncodeError:
        return False
    return True


def _report(error: ToolError) -> None:
    """A load or definition error on stderr: its line, then each problem with its fix."""
    print(str(error), file=sys.stderr)
    problems = error.details.get("problems")
    for problem in problems if isinstance(problems, list) else []:
        print(f"  - {problem.get('problem')} [{problem.get('kind')}]", file=sys.stderr)
        print(f"    fix: {problem.get('hint')}", file=sys.stderr)


def _target_or_report(target: str, command: str) -> Target | int:
    """What ``target`` names, or the exit status once every problem found while loading it
    is on stderr: 1 when the module cannot be loaded, 2 when it names nothing to serve.

    Every broken tool is reported, not only the first: in this mode ``@tool`` records its
    error and the import goes on. A load failure that follows (the module may put a function
    left undecorated into a ``Toolkit``) is reported last, after its likely cause.
    """
    failure: list[ToolError] = []
    unusable: TargetError | None = None
    with collect_definition_errors() as broken:
        try:
            with import_guard():
                found = load_target(target)
        except ToolError as error:
            failure.append(error)
        except TargetError as error:
            unusable = error
        except SystemExit as exited:  # the API lets it through; here it would end tdk quietly
            failure.append(
                ToolkitLoadError(
                    f"importing {target} raised SystemExit({_shown(exited.code)}): a tool "
                    "module must not exit when imported; put script code under "
                    "if __name__ == '__main__':"
                )
            )
    for each in [*broken, *failure]:
        _report(each)
    if broken or failure:
        return 1
    if unusable is not None:
        print(f"tdk {command}: {unusable}", file=sys.stderr)
        return 2
    return found


def _shown(code: object) -> str:
    """An exit code as a message may show it: redacted and cut (it may be any object)."""
    return redact_text(shown(code), limit=200)


def _check(target: Target) -> int:
    toolkit = target.toolkit
    for item in toolkit:
        print(f"ok  {item.name}: {item.description.splitlines()[0]}")
    count = f"{len(toolkit)} tool" if len(toolkit) == 1 else f"{len(toolkit)} tools"
    origin = "" if target.origin is None else f" ({target.origin})"
    print(f"{count} in toolkit '{toolkit.name}'{origin}, every definition valid.")
    return 0


#: ``tdk serve --workers`` at most (each worker is a process that loads the target).
MAX_WORKERS: Final = 256


def _schema(toolkit: Toolkit, form: str) -> tuple[int, list[dict[str, Any]] | None]:
    """The exit status, and the document to print."""
    try:
        return 0, host_shapes(toolkit, form)
    except ValueError as exc:  # a tool that cannot be strict
        print(f"tdk schema: {exc}", file=sys.stderr)
        return 1, None


def _run(target: Target, options: argparse.Namespace) -> tuple[int, dict[str, Any] | None]:
    """The exit status, and the document to print. A runner the module gave runs the call
    under its policies."""
    toolkit, runner = target.toolkit, target.runner
    try:
        context = _run_context(toolkit, options.tool, options.secret)
        if runner is not None and options.stacktrace:
            raise ValueError(
                f"--stacktrace applies to tools or a Toolkit; the {target.origin} includes "
                "stack traces as its toolkit says (Toolkit(..., include_stacktrace=True))"
            )
    except ValueError as bad:
        print(f"tdk run: {bad}", file=sys.stderr)
        return 2, None
    call = (
        toolkit.run(
            options.tool, options.arguments, context=context, include_stacktrace=options.stacktrace
        )
        if runner is None
        else runner.run(options.tool, options.arguments, context=context)
    )
    result = run_in_new_loop(call)
    return (0 if result.is_success else 1), result.to_dict()


def _run_context(toolkit: Toolkit, name: str, given: list[str]) -> ToolContext:
    """The context of ``tdk run``: each ``--secret NAME=VALUE``, then each secret the tool
    requires that was not given, from the environment variable of that name."""
    secrets: dict[str, str] = {}
    for pair in given:
        secret, equals, value = pair.partition("=")
        if not secret or not equals:  # (never echoed: it may be the value itself)
            raise ValueError("--secret takes NAME=VALUE, with a name before the '='")
        secrets[secret] = value
    if name in toolkit:
        for secret in toolkit.get(name).definition.requirements.secrets:
            if secret not in secrets and secret in os.environ:
                secrets[secret] = os.environ[secret]
    return ToolContext(secrets=secrets)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tdk`` command with ``argv`` (default: the process's arguments, and then the
    command is the process's own: ``check``, ``schema`` and ``run`` are supervised, and
    ``serve`` may end the process when it is done; see ``tdk._cli.process``)."""
    parser, run, serve = _parser()
    options = parser.parse_args(argv)
    if options.command == "schema" and options.update and options.check is None:
        parser.error("tdk schema --update needs --check FILE")  # exits 2
    if options.command == "run" and not _is_text(options.arguments):
        run.error("argument arguments: not valid UTF-8 text")  # exits 2, as for any usage error
    if options.command == "serve" and options.workers is not None and not options.http:
        serve.error("--workers serves HTTP: give --http too (over stdio one host runs one server)")
    if options.command == "serve":
        refusal = auth_refusal(options, os.environ)
        if refusal is None and options.http:
            allowed = options.allow_unauthenticated or options.auth is not None
            refusal = host_refusal(options.host, allowed=allowed)
        if refusal is not None:
            serve.error(refusal)  # exits 2: a server open to the network is asked for by name
        if options.http and (options.workers or 1) > 1 and options.worker is None:
            return serve_workers(options, sys.argv[1:] if argv is None else argv)

    process = argv is None
    if process and options.command != "serve" and can_supervise():
        return supervised(lambda: _main(options, process=True), options.command, options.target)
    return _main(options, process=process)


def _main(options: argparse.Namespace, *, process: bool) -> int:
    # tdk serve's packages are loaded before the target's folder is on sys.path (a tool file
    # mcp.py is then a clash, not the package), once.
    missing = serving_packages(http=options.http) if options.command == "serve" else None
    try:
        with script_path(options.target):
            status = _command(options, missing, process=process)
        with contextlib.suppress(AttributeError, ValueError):  # (None, or closed by a tool)
            sys.stdout.flush()  # so that a reader gone away shows here, not at exit
    except BrokenPipeError:
        # ``tdk schema x | head -1``: the reader has what it wanted. As the Python docs advise,
        # stdout goes to devnull so that flushing it at exit cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:  # Ctrl-C while loading or running: no traceback
        print("tdk: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as shells report it
    return status


def _command(options: argparse.Namespace, missing: str | None, *, process: bool) -> int:
    """Run the parsed command; ``missing``: what ``tdk serve`` lacks, or None."""
    if options.command == "serve":
        return serve_command(
            options,
            lambda: _target_or_report(options.target, options.command),
            missing,
            process=process,
        )
    if options.command == "check":
        target = _target_or_report(options.target, options.command)
        return target if isinstance(target, int) else _check(target)
    # stdout is one JSON document (or the report of ``--check``): what the module prints while
    # it is imported, and the tool while it runs, goes to stderr.
    report: str | None = None
    with streams_aside():
        target = _target_or_report(options.target, options.command)
        if isinstance(target, int):
            return target
        document: object = None
        if options.command == "schema" and options.check is not None:
            status, report = schema_check(
                target.toolkit, options.check, update=options.update, form=options.format
            )
        elif options.command == "schema":
            status, document = _schema(target.toolkit, options.format or "json")
        else:
            status, document = _run(target, options)
    if document is not None:
        print(json.dumps(document, indent=2))
    if report is not None:
        print(report)
    return status


def port(text: str) -> int:
    """A TCP port, 1 to 65535 (for argparse: its ``ValueError`` is a usage error)."""
    number = int(text)
    if not 1 <= number <= 65535:
        raise ValueError(number)
    return number


def workers(text: str) -> int:
    """``--workers``: a number of processes, 1 to :data:`MAX_WORKERS` (for argparse: its
    ``ValueError`` is a usage error)."""
    number = int(text)
    if not 1 <= number <= MAX_WORKERS:
        raise ValueError(number)
    return number


def seconds(text: str) -> float:
    """A positive, finite number of seconds (for argparse: its ``ValueError`` is a usage error)."""
    return checked_seconds(float(text))


def deadline(text: str) -> float | None:
    """``--deadline``: seconds (see :func:`seconds`), or ``none`` for no deadline."""
    return None if text.strip().lower() == "none" else seconds(text)


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parser of the command, and those of ``tdk run`` and ``tdk serve`` (for their usage
    errors)."""
    parser = argparse.ArgumentParser(
        prog="tdk", description="Check, describe, run and serve the tools of a module or path."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    target = (
        "a .py file, a package directory or a dotted module, optionally with :NAME, the "
        "module's ToolRunner, Toolkit or a function returning one (tools.py:runner)"
    )
    check = commands.add_parser("check", help="load the tools and report definition problems")
    check.add_argument("target", help=target)
    schema = commands.add_parser("schema", help="print the tool definitions as JSON")
    schema.add_argument("target", help=target)
    schema.add_argument(
        "--format",
        choices=SCHEMA_FORMATS,
        default=None,
        help="json (the definitions, the default), or a host's tools: openai (chat), "
        "openai-strict, responses, anthropic, mcp",
    )
    schema.add_argument(
        "--check",
        metavar="FILE",
        help="compare with the contract snapshot FILE: each change labelled breaking, "
        "compatible or cosmetic; exit 1 on a breaking change",
    )
    schema.add_argument(
        "--update", action="store_true", help="with --check: write FILE (accepting the changes)"
    )
    run = commands.add_parser("run", help="run one call and print its ToolResult as JSON")
    _add_run_arguments(run, target)
    serve = commands.add_parser("serve", help="serve the tools over MCP (stdio by default)")
    _add_serve_arguments(serve, target)
    return parser, run, serve


def _add_run_arguments(run: argparse.ArgumentParser, target: str) -> None:
    """The arguments of ``tdk run``: the tool, its arguments and secrets, the stack trace."""
    run.add_argument("target", help=target)
    run.add_argument("tool", help="the tool's name (case-insensitive)")
    run.add_argument("arguments", nargs="?", default="{}", help="a JSON object (default {})")
    run.add_argument("--stacktrace", action="store_true", help="include the stack trace")
    run.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a secret for the call (repeatable); a secret the tool requires and not given "
        "here is read from the environment variable of its name",
    )


def _add_serve_arguments(serve: argparse.ArgumentParser, target: str) -> None:
    """The arguments of ``tdk serve``: the transport (stdio, or HTTP at an address that is
    loopback unless allowed otherwise), and the deadline of a call."""
    serve.add_argument("target", help=target)
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="with --http: the address to listen on (default 127.0.0.1). Any address that is "
        "not loopback (0.0.0.0, ::, 0, a LAN address...) is refused without "
        "--allow-unauthenticated, unless --auth authenticates the callers",
    )
    serve.add_argument("--port", type=port, default=8000, help="with --http (default 8000)")
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="with --http: serve on a --host that is not loopback although tdk serve does not "
        "authenticate its clients (a warning says so): whoever reaches the address can call "
        "every tool",
    )
    serve.add_argument(
        "--deadline",
        type=deadline,
        default=DEFAULT,
        metavar="SECONDS",
        help=f"the longest a call may take, retries and their waits included (default "
        f"{DEFAULT_DEADLINE:g}, a little under the 60 s after which hosts commonly give up; "
        "'none': no deadline). A retry that would not fit is not waited for: the model gets "
        "the error, with its retry_after_ms, at once. Not for a target that is a ToolRunner: "
        "its own deadline applies",
    )
    serve.add_argument(
        "--workers",
        type=workers,
        default=None,
        metavar="N",
        help="with --http: N processes serving the one port (default 1), statelessly: any call "
        "may reach any of them. A runner's limits and circuits hold across them with its "
        "RedisStore. A worker that dies is said on stderr and not replaced",
    )
    serve.add_argument(
        WORKER_OPTION, type=seat, default=None, dest="worker", help=argparse.SUPPRESS
    )
    add_auth_options(serve)


if __name__ == "__main__":  # pragma: no cover - python -m tdk: run in subprocesses by the tests
    sys.exit(main())
