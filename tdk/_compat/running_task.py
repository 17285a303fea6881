"""The running task of a loop, read without a Python frame (asyncio's ``_current_tasks``).

On Python 3.11 ``asyncio.current_task()`` is Python code: a frame on every tool call, only to
read the dict asyncio keeps of the running task per loop. From 3.12 it is C, and this module
hands out the public function itself.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any, Final

__all__ = ["TASK_OF", "internal_task_of"]

TaskOf = Callable[[asyncio.AbstractEventLoop], "asyncio.Task[Any] | None"]


def internal_task_of() -> TaskOf | None:
    """``asyncio.tasks._current_tasks.get``: the dict asyncio keeps of each loop's running task
    (checked on CPython 3.11.7, where ``current_task`` reads it in Python). None on 3.12 and
    later (``current_task`` is C there: nothing to save) and when the dict is gone or is not
    a dict (a patched or future asyncio): :data:`TASK_OF` then is ``asyncio.current_task``
    itself, which takes the loop too."""
    if sys.version_info >= (3, 12):
        return None
    tasks = getattr(asyncio.tasks, "_current_tasks", None)
    return tasks.get if type(tasks) is dict else None


TASK_OF: Final[TaskOf] = internal_task_of() or asyncio.current_task
"""The task running in a loop: ``TASK_OF(asyncio.get_running_loop())``, without a frame where
asyncio's own lookup would add one (see ``bench/README.md#the-running-task``)."""
