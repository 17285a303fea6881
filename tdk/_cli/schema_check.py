"""``tdk schema TARGET --check FILE [--update]``: the toolkit's definitions compared with a
contract snapshot, each change labelled breaking, compatible or cosmetic
(:mod:`tdk.testing.snapshot`).

The report goes to stdout (the command prints it). Exit status: 0 when nothing breaking
changed (compatible and cosmetic changes are listed), or when ``--update`` wrote the file; 1
when a change is breaking, or the file is missing, unreadable, too large or not a snapshot (the
report says to run with ``--update``), or cannot be written, or a tool cannot be rendered (a
format the tool cannot take).
"""

from __future__ import annotations

import sys

from tdk._define.toolkit import Toolkit
from tdk.testing.snapshot import check_snapshot

__all__ = ["schema_check"]


def schema_check(
    toolkit: Toolkit, file: str, *, update: bool, form: str | None
) -> tuple[int, str | None]:
    """Compare ``toolkit`` with the snapshot ``file`` (in its formats; a new file: ``form``,
    default ``json``), writing it when ``update``: the exit status, and the report for
    stdout."""
    try:
        checked = check_snapshot(
            toolkit, file, formats=[form] if form is not None else None, update=update
        )
    except ValueError as bad:
        print(f"tdk schema: {bad}", file=sys.stderr)
        return 1, None
    except OSError as failed:  # (--update: a directory, a read-only place)
        print(f"tdk schema: cannot write {file} ({type(failed).__name__})", file=sys.stderr)
        return 1, None
    return (1 if checked.failed else 0), checked.report()
