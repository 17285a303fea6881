"""The ``tdk`` command against a module that does something to its process while imported:
forks, ends the process with ``os._exit()`` or ``sys.exit()``, or ignores or blocks a signal.
Each module is written to a temp dir and run by ``python -m tdk`` in a subprocess (signals are
sent to that process, as a terminal or a supervisor would)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from _mcp_support import SCENARIO_TIMEOUT, free_port

#: Bound of one command, in seconds (each takes well under one).
COMMAND_TIMEOUT = 60

#: A module that forks while imported: its child returns from the import too.
FORKS = '''
import os
from pathlib import Path
from typing import Annotated

from tdk import tool

if os.fork() == 0:
    Path(__file__).with_suffix(".child").write_text(str(os.getpid()))


@tool
def note(text: Annotated[str, "What to note."]) -> str:
    """Note a call, one line each."""
    with Path(__file__).with_suffix(".calls").open("a") as calls:
        calls.write(text + "\\n")
    return text
'''

#: A module that ends its process while imported, skipping every handler: ``{code}``.
EXITS = '''
import os
from typing import Annotated

from tdk import tool


@tool
def add(a: Annotated[int, "First."]) -> int:
    """Add one."""
    return a + 1


os._exit({code})
'''

#: A module that does ``{gesture}`` to a signal while imported, and a tool that waits.
SIGNALS = '''
import asyncio
import pathlib
import signal

from tdk import tool

{gesture}


@tool
async def wait() -> str:
    """Wait for a long time."""
    pathlib.Path(__file__).with_suffix(".started").write_text("")
    await asyncio.sleep(60)
    return "done"
'''


def module(directory: Path, text: str) -> Path:
    """A module with a name of its own (a module name is bound to one file per process)."""
    path = directory / f"guarded_{uuid.uuid4().hex[:10]}.py"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def tdk(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``python -m tdk ARGUMENTS``, run to its end (and that of every process holding its
    stdout: a forked child too)."""
    return subprocess.run(
        [sys.executable, "-m", "tdk", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def ended(pid: int) -> bool:
    """Whether the process ``pid`` (no child of this one) has ended: gone, or a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


COMMANDS = [
    pytest.param(["check"], id="check"),
    pytest.param(["schema"], id="schema"),
    pytest.param(["run", "note", '{"text": "once"}'], id="run"),
]


#: The commands, on a module whose tool is ``add``.
COMMANDS_OF_ADD = [
    pytest.param(["check"], id="check"),
    pytest.param(["schema"], id="schema"),
    pytest.param(["run", "add", '{"a": 1}'], id="run"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_module_forking_at_import_runs_the_command_once(
    tmp_path: Path, command: list[str]
) -> None:
    """The child a module forks while imported ends quietly before the command: ``tdk check``
    reports once, ``tdk schema`` prints one document, ``tdk run`` calls the tool once."""
    path = module(tmp_path, FORKS)
    done = tdk(command[0], str(path), *command[1:])
    child = int(path.with_suffix(".child").read_text())
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while not ended(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ended(child)
    assert done.returncode == 0, done.stderr
    if command[0] == "check":
        assert done.stdout.count("ok  note") == 1
    else:
        json.loads(done.stdout)  # one document: two would not parse
    calls = path.with_suffix(".calls")
    assert (calls.read_text() if calls.exists() else "") == (
        "once\n" if command[0] == "run" else ""
    )


@pytest.mark.parametrize("command", COMMANDS_OF_ADD)
@pytest.mark.parametrize(("code", "status"), [(0, 1), (3, 3)], ids=["exit-0", "exit-3"])
def test_a_module_ending_the_process_at_import_is_no_success(
    tmp_path: Path, command: list[str], code: int, status: int
) -> None:
    """``os._exit(0)`` while the module is imported ends ``tdk check``, ``schema`` and ``run``
    with status 1 (``os._exit(3)``: 3), saying that the process ended before the command
    could finish; nothing on stdout."""
    path = module(tmp_path, EXITS.replace("{code}", str(code)))
    done = tdk(command[0], str(path), *command[1:])
    assert done.returncode == status
    assert done.stdout == ""
    assert f"tdk {command[0]}: the process ended (status {code}) while running" in done.stderr
    assert "os._exit()" in done.stderr


GESTURES = [
    pytest.param(
        "signal.signal(signal.SIGINT, signal.SIG_IGN)", signal.SIGINT, 130, id="ignores-SIGINT"
    ),
    pytest.param(
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})",
        signal.SIGINT,
        130,
        id="blocks-SIGINT",
    ),
    pytest.param(
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        signal.SIGTERM,
        -signal.SIGTERM,
        id="ignores-SIGTERM",
    ),
]


@pytest.mark.parametrize(("gesture", "sent", "status"), GESTURES)
def test_a_module_deaf_to_a_signal_at_import_leaves_tdk_run_stoppable(
    tmp_path: Path, gesture: str, sent: signal.Signals, status: int
) -> None:
    """A module that ignores or blocks SIGINT (or ignores SIGTERM) while imported does not
    make ``tdk run`` deaf to it: the handlers and mask from before the import are back, and
    the signal, sent while the tool runs, ends the command (SIGINT: one line and 130)."""
    path = module(tmp_path, SIGNALS.replace("{gesture}", gesture))
    with subprocess.Popen(
        [sys.executable, "-m", "tdk", "run", str(path), "wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        started = path.with_suffix(".started")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(sent)
        try:
            out, err = process.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail(f"tdk run did not end on {sent!r}")
    assert process.returncode == status, err
    assert out == b""
    if sent == signal.SIGINT:
        assert err == b"tdk: interrupted\n"


def test_tdk_run_started_with_sigint_blocked_still_ends_on_it(tmp_path: Path) -> None:
    """A signal mask is inherited: ``tdk run`` started by a parent (a thread) that blocks
    SIGINT forwards Ctrl-C to a command process that takes it (one line and 130), instead
    of to a child as deaf to it as its parent was (the command hung)."""
    path = module(tmp_path, SIGNALS.replace("{gesture}", "pass"))
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:  # (the child inherits this thread's mask)
        process = subprocess.Popen(
            [sys.executable, "-m", "tdk", "run", str(path), "wait"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    with process:
        started = path.with_suffix(".started")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail("tdk run started with SIGINT blocked did not end on it")
    assert (process.returncode, out, err) == (130, b"", b"tdk: interrupted\n")


#: A module that registers an exit handler (as a telemetry exporter does, to flush).
AT_EXIT = '''
import atexit
from pathlib import Path
from typing import Annotated

from tdk import tool

atexit.register(Path(__file__).with_suffix(".flushed").write_text, "flushed")


@tool
def add(a: Annotated[int, "First."]) -> int:
    """Add one."""
    return a + 1
'''


@pytest.mark.parametrize("command", COMMANDS_OF_ADD)
def test_the_exit_handlers_of_a_module_run(tmp_path: Path, command: list[str]) -> None:
    """The process that runs the command ends as any process does: the exit handlers the
    module registered run (a telemetry exporter's flush, say)."""
    path = module(tmp_path, AT_EXIT)
    done = tdk(command[0], str(path), *command[1:])
    assert done.returncode == 0, done.stderr
    assert path.with_suffix(".flushed").read_text() == "flushed"


#: A module that starts a thread (not a daemon) that never ends, and an exit handler that
#: leaves a mark.
THREAD = '''
import atexit
import pathlib
import threading
from typing import Annotated

from tdk import tool

threading.Thread(target=threading.Event().wait, name="never-ends").start()
atexit.register(pathlib.Path(__file__).with_suffix(".exited").write_text, "exit handlers ran")


@tool
def add(a: Annotated[int, "First."]) -> int:
    """Add one."""
    return a + 1
'''


@pytest.mark.parametrize("command", COMMANDS_OF_ADD)
def test_a_thread_the_module_never_ends_does_not_hold_the_command(
    tmp_path: Path, command: list[str]
) -> None:
    """A thread started at import that never ends (not a daemon) held ``tdk check``,
    ``schema`` and ``run`` for ever after their output; they end with their own status once
    the thread has had its grace, the module's exit handlers run."""
    path = module(tmp_path, THREAD)
    done = tdk(command[0], str(path), *command[1:])
    assert done.returncode == 0, done.stderr
    if command[0] == "check":
        assert "ok  add" in done.stdout
    else:
        json.loads(done.stdout)
    assert path.with_suffix(".exited").read_text() == "exit handlers ran"


#: A secret of the shape tdk's redaction recognises (an API key).
TOKEN = "sk-abcdefghijklmnopqrstuvwx"


TRANSPORTS = ["stdio", "http"]


def serve_argv(target: Path, *extra: str) -> list[str]:
    """The command line of ``python -m tdk serve target``."""
    return [sys.executable, "-m", "tdk", "serve", str(target), *extra]


IMPORT_TOOL = '''

from typing import Annotated

from tdk import tool


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b
'''


def import_time_module(folder: Path, name: str, code: str) -> Path:
    """A tool module ``name`` in ``folder`` running ``code`` when imported."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(f'"""A module that misbehaves while imported."""\n\n{code}{IMPORT_TOOL}')
    return path


#: Ways a module exits at import, each with a token-shaped secret.
IMPORT_EXITS = [
    pytest.param(f'sys.exit("bye token={TOKEN}")\n', id="message-with-a-token"),
    pytest.param(f'sys.exit("{TOKEN}")\n', id="bare-token"),
    pytest.param(f'raise SystemExit(["{TOKEN}", {{"api_key": "{TOKEN}"}}])\n', id="in-a-list"),
    pytest.param(f'sys.exit("failed: " + "{TOKEN} " * 50)\n', id="long"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("code", IMPORT_EXITS)
def test_a_module_exiting_at_import(tmp_path: Path, transport: str, code: str) -> None:
    """``tdk serve`` of a module whose import raises ``SystemExit`` with a secret ends with
    status 1, saying so on stderr without the secret (nor a traceback)."""
    target = import_time_module(tmp_path / "tools", "exiting_tools", f"import sys\n{code}")
    options = ["--http", "--port", str(free_port())] if transport == "http" else []
    done = subprocess.run(
        serve_argv(target, *options),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "raised SystemExit(" in done.stderr
    assert "a tool module must not exit when imported" in done.stderr
    assert TOKEN not in done.stderr + done.stdout
    assert TOKEN[3:] not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
