"""What every test of the suite shares: the process the tests run in, and its imports.

The support modules at the top of ``tests/`` (``_http_server``, ``_linear``, ``_mcp_support``...)
are imported by name from every folder: in pytest's default import mode ("prepend"), importing
this file (in a folder without ``__init__.py``) puts ``tests/`` first on ``sys.path``, as
importing a test file puts its own folder there (for the support modules of one folder, such as
``execution/_execute_support.py``). Module names are global in that mode: the basename of each
test file and support module is unique across the folders.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_reaches_the_commands_started() -> Iterator[None]:
    """The tests send Ctrl-C (SIGINT) to the ``tdk`` commands they start. A shell starts a
    background job with SIGINT ignored, and an ignored signal stays ignored in every process
    started from it: run so (``.ci/run &``), the suite would pass that on, and each such
    command would rightly go on running. The commands the tests start take Ctrl-C as they
    would from a terminal."""
    ignored = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
