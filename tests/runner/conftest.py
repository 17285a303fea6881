"""The ``RedisStore`` tests' fixtures: a real redis-server for each test module that asks for
one (``tests/runner/_redis_support.py``), started on a free port of 127.0.0.1; and the state
of the tools they call (``tests/runner/_redis_tools.py``), fresh for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _redis_support import RedisServer, free_port, running_redis
from _redis_tools import BODIES, UPSTREAM


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the module (started once: the suite stays fast)."""
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the module's server, running (a test may have stopped it) and empty."""
    redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def unused_url() -> str:
    """A ``redis://`` URL of a port of 127.0.0.1 nothing listens on."""
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.fixture(autouse=True)
def _tools_fresh() -> None:
    """The upstream of ``TOOLKIT`` up and uncounted; no body of ``WORK_TOOLKIT`` counted."""
    UPSTREAM.update(down=False, calls=0)
    BODIES.clear()
