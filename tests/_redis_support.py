"""A real ``redis-server`` for the ``RedisStore`` tests, started on a free port of 127.0.0.1.

:func:`running_redis` starts one (no persistence, its files in a temp dir), waits until it
answers ``PING`` and stops it at the end. :class:`RedisServer` can also stop it and start it
again on the same port mid-test, as an outage and its end. Nothing here skips: when
``redis-server`` is missing or does not answer, the fixture using it fails with the reason.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

#: How long a starting server has to answer PING.
START_TIMEOUT = 10.0
#: How long a stopping server has to exit after SIGTERM (then it is killed).
STOP_TIMEOUT = 5.0


#: The highest port a Redis Cluster node can use: its cluster bus is its port + 10000.
CLUSTER_PORT_MAX: Final = 55535


def free_port(*, highest: int = 65535) -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (at the time of asking), at most
    ``highest`` (the system's choice, else one picked among the lower ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    for candidate in [port, *random.sample(range(20000, highest + 1), 200)]:
        if candidate > highest:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        return candidate
    raise RuntimeError(f"no free port of 127.0.0.1 at most {highest}")


def command(port: int, *args: str, timeout: float = 1.0) -> bytes:
    """Send one command to the server on ``port`` (RESP, over a fresh socket) and return its
    raw reply; raises ``OSError`` when nothing answers."""
    payload = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        payload += b"$%d\r\n%s\r\n" % (len(data), data)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(payload)
        reply = conn.recv(65536)
    if not reply:
        raise ConnectionError("the server closed the connection")
    return reply


class RedisServer:
    """One ``redis-server`` process on a fixed port of 127.0.0.1, started and stopped on
    demand (the port stays the same across restarts)."""

    def __init__(
        self, directory: Path, port: int | None = None, *, extra: Sequence[str] = ()
    ) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed (.ci/run installs it)")
        self.executable = executable
        self.directory = directory
        highest = CLUSTER_PORT_MAX if "--cluster-enabled" in extra else 65535
        self.port = free_port(highest=highest) if port is None else port
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"
        self.extra = tuple(extra)
        """More arguments of ``redis-server`` (``--cluster-enabled yes``, say)."""

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the server and wait until it answers PING (at most ``START_TIMEOUT``)."""
        if self.running:
            return
        arguments = [
            self.executable,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.log),
            *self.extra,
        ]
        self.process = subprocess.Popen(
            arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                if self.process.stderr is not None:
                    self.process.stderr.close()
                self.process = None
                raise RuntimeError(f"redis-server exited at start: {stderr}{self._log_tail()}")
            with contextlib.suppress(OSError):
                if command(self.port, "PING", timeout=0.5).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING within {START_TIMEOUT} s")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and wait until its port is free."""
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)
        if process.stderr is not None:
            process.stderr.close()

    def restart(self) -> None:
        """Stop the server if it runs, and start it again on the same port (empty: nothing
        is saved)."""
        self.stop()
        self.start()

    def flush(self) -> None:
        """Empty every database of the running server."""
        reply = command(self.port, "FLUSHALL")
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"FLUSHALL answered {reply!r}")

    def _log_tail(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return ""


@contextlib.contextmanager
def running_redis(directory: Path) -> Iterator[RedisServer]:
    """A started :class:`RedisServer` whose files go to ``directory``; stopped at the end."""
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
