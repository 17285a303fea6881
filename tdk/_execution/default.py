"""``DEFAULT``: the one value that means "not given" in tdk's public signatures.

Where None already means something (``timeout=None``: no time limit; ``configure(retry=None)``:
no retries), an argument left out needs a value of its own, as httpx's ``USE_CLIENT_DEFAULT``
does for a request's timeout or auth: ``run(timeout=DEFAULT)`` uses the tool's own limit,
``configure(timeout=DEFAULT)`` keeps what the tool inherits.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["DEFAULT", "Default"]


class Default(enum.Enum):
    """The type of :data:`DEFAULT` (an enum of one member, so that type checkers narrow
    ``x is DEFAULT``)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "tdk.DEFAULT"


DEFAULT: Final = Default.DEFAULT
"""Not given: the setting comes from elsewhere (the tool's own, or what is inherited)."""
