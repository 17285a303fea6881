"""Contract snapshots: a toolkit's definitions compared with the ones saved, each change
labelled breaking, compatible or cosmetic (``tdk_snapshot`` and ``tdk schema --check``).

- **breaking**: a tool removed; a parameter removed, or a required one added, or one made
  required; a type narrowed; an enum value removed; a bound tightened; an output field
  removed or made optional; a side-effect mark loosened (no longer read-only or idempotent,
  now destructive); a secret newly required;
- **compatible**: a tool added; an optional parameter added; a type widened; an output field
  added; a default changed; a tool deprecated;
- **cosmetic**: descriptions, titles, examples.

The rules for schemas are :mod:`tdk.testing.schema_changes`'s. A breaking change fails the
check with a report a reviewer can read: one line per change (the same change seen in several
formats is one line naming them), then the unified diff of the snapshot file.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tdk._define.toolkit import Toolkit
from tdk.testing.contract import FORMAT_VERSION, contract_of, snapshot_document, snapshot_text
from tdk.testing.schema_changes import BREAKING, COMPATIBLE, COSMETIC, schema_changes

__all__ = ["Change", "SnapshotCheck", "check_snapshot", "compare_documents"]

#: The labels, most serious first.
LABELS: Final = (BREAKING, COMPATIBLE, COSMETIC)
#: The longest diff shown, in lines.
_MAX_DIFF_LINES: Final = 200
#: The largest snapshot file read, in bytes (a toolkit of hundreds of tools is under 1 MB).
MAX_SNAPSHOT_BYTES: Final = 16 * 1024 * 1024

#: Side-effect marks: the value that loosens the promise (a change TO it is breaking).
_MARKS: Final = {"read_only": False, "idempotent": False, "destructive": True, "open_world": True}


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the saved contract and the current one."""

    label: str
    """``breaking``, ``compatible`` or ``cosmetic``."""
    tool: str
    what: str
    formats: tuple[str, ...]
    """The formats in which it was seen."""

    def __str__(self) -> str:
        shown = self.label.upper() if self.label == BREAKING else self.label
        return f"{shown:<10}  {self.tool}: {self.what}  [{', '.join(self.formats)}]"


def _mark_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What a change of marks means for a host."""
    found = []
    for mark, loose in _MARKS.items():
        if mark in old and mark in new and old[mark] != new[mark]:
            label = BREAKING if new[mark] == loose else COMPATIBLE
            found.append((label, f"{mark} changed from {old[mark]} to {new[mark]}"))
    for kind in ("secrets", "metadata"):
        for name in sorted(set(new.get(kind) or ()) - set(old.get(kind) or ())):
            found.append(
                (BREAKING, f"now requires {kind[:-1] if kind == 'secrets' else kind} {name!r}")
            )
        for name in sorted(set(old.get(kind) or ()) - set(new.get(kind) or ())):
            found.append((COMPATIBLE, f"no longer requires {name!r}"))
    was, now = old.get("deprecated"), new.get("deprecated")
    if was != now:
        label = COSMETIC if was and now else COMPATIBLE
        found.append((label, "deprecation message changed" if label == COSMETIC
                      else ("deprecated" if now else "no longer deprecated")))  # fmt: skip
    if old.get("strict") != new.get("strict"):
        found.append(
            (COMPATIBLE, f"strict changed from {old.get('strict')} to {new.get('strict')}")
        )
    return found


def _tool_changes(
    form: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """Every change of one tool in one format."""
    was, now = contract_of(form, old), contract_of(form, new)
    found: list[tuple[str, str]] = []
    if was.description != now.description:
        found.append((COSMETIC, "description changed"))
    found += schema_changes(
        was.input, now.input, role="input", nullable_is_optional=now.nullable_is_optional
    )
    if was.output is not None and now.output is not None:
        found += schema_changes(was.output, now.output, role="output")
    found += _mark_changes(was.marks, now.marks)
    return found


def compare_documents(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """The changes from snapshot ``old`` to ``new``, breaking first, each seen once."""
    seen: dict[tuple[str, str, str], list[str]] = {}
    old_formats, new_formats = _formats(old), _formats(new)
    for form in sorted(old_formats.keys() & new_formats.keys()):
        before, after = old_formats[form], new_formats[form]
        for name in sorted(before.keys() | after.keys()):
            if name not in after:
                found = [(BREAKING, "tool removed")]
            elif name not in before:
                found = [(COMPATIBLE, "tool added")]
            else:
                found = _tool_changes(form, before[name], after[name])
            for label, what in found:
                seen.setdefault((label, name, what), []).append(form)
    changes = [
        Change(label, tool, what, tuple(forms)) for (label, tool, what), forms in seen.items()
    ]
    return sorted(changes, key=lambda c: (LABELS.index(c.label), c.tool, c.what))


def _formats(document: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    formats = document.get("formats")
    return formats if isinstance(formats, Mapping) else {}


@dataclass(frozen=True, slots=True)
class SnapshotCheck:
    """What comparing a toolkit with its snapshot found."""

    path: Path
    changes: tuple[Change, ...]
    diff: str
    """The unified diff of the snapshot file (saved -> now), cut to a readable length."""
    written: bool
    """Whether the snapshot file was written (``update``, or no file yet)."""
    problem: str | None = None
    """Why the check could not compare at all (no snapshot, formats that differ...)."""

    @property
    def breaking(self) -> list[Change]:
        """The breaking changes."""
        return [change for change in self.changes if change.label == BREAKING]

    @property
    def failed(self) -> bool:
        """Whether the check fails: a breaking change, or a problem, not written over."""
        return not self.written and (self.problem is not None or bool(self.breaking))

    def report(self) -> str:
        """The report: what was compared, each change, the diff."""
        if self.problem is not None and not self.written:
            return f"tdk contract snapshot {self.path}: {self.problem}"
        counts = ", ".join(
            f"{sum(c.label == label for c in self.changes)} {label}" for label in LABELS
        )
        head = f"tdk contract snapshot {self.path}: {counts}"
        if self.written:
            head += " (snapshot written)"
        elif self.breaking:
            head += (
                "\nA breaking change fails: fix it, or accept it by updating the snapshot "
                "(pytest --tdk-update-snapshots, or tdk schema TARGET --check FILE --update)."
            )
        lines = [head, *(f"  {change}" for change in self.changes)]
        if self.diff and self.changes:
            lines += ["", "The snapshot's diff (- saved, + now):", self.diff]
        return "\n".join(lines)


def _diff(saved: str, now: str, path: Path) -> str:
    lines = list(
        difflib.unified_diff(
            saved.splitlines(), now.splitlines(), str(path), f"{path} (now)", lineterm="", n=3
        )
    )
    if len(lines) > _MAX_DIFF_LINES:
        lines = [*lines[:_MAX_DIFF_LINES], f"... ({len(lines) - _MAX_DIFF_LINES} more lines)"]
    return "\n".join(lines)


def check_snapshot(
    toolkit: Toolkit,
    path: str | Path,
    *,
    formats: Iterable[str] | None = None,
    update: bool = False,
) -> SnapshotCheck:
    """Compare ``toolkit`` with the snapshot at ``path`` in ``formats`` (default: the
    snapshot's own, else ``json``); write the file when ``update`` (the changes are still
    reported). Raises ``ValueError`` for an unknown format or a tool that cannot be strict."""
    path = Path(path)
    saved_text, unreadable = _snapshot_text(path)
    saved = _parsed(saved_text)
    wanted = sorted(formats) if formats is not None else sorted(_formats(saved or {})) or ["json"]
    document = snapshot_document(toolkit, wanted)
    text = snapshot_text(document)
    problem = unreadable or _snapshot_problem(saved_text, saved, wanted)
    changes: tuple[Change, ...] = ()
    if not problem:
        try:
            changes = tuple(compare_documents(saved or {}, document))
        except (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError):
            # (a file tdk wrote, then changed by hand or by a merge: its shape is not one
            # tdk writes, and nothing in it can be compared)
            problem = "the snapshot is malformed (not as tdk writes it): update it"
    diff = "" if saved_text is None else _diff(saved_text, text, path)
    written = False
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written = True
    return SnapshotCheck(path, changes, diff, written, problem)


def _snapshot_text(path: Path) -> tuple[str | None, str | None]:
    """The text of the snapshot at ``path`` (None when there is none), or why it cannot be
    read: a directory, unreadable, larger than :data:`MAX_SNAPSHOT_BYTES` (read no
    further), not UTF-8."""
    if not path.exists():
        return None, None
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as failed:
        return None, f"the snapshot cannot be read ({type(failed).__name__})"
    if len(data) > MAX_SNAPSHOT_BYTES:
        return None, f"the snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "the snapshot is not UTF-8 text"


def _parsed(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # (not JSON, or nested deeper than Python reads)
        return None
    return document if isinstance(document, dict) else None


def _snapshot_problem(
    text: str | None, saved: Mapping[str, Any] | None, wanted: list[str]
) -> str | None:
    """Why the snapshot cannot be compared, or None."""
    if text is None:
        return "no snapshot yet; write it with pytest --tdk-update-snapshots (or --update)"
    if saved is None or saved.get("tdk_snapshot") != FORMAT_VERSION:
        return f"not a tdk contract snapshot of version {FORMAT_VERSION}"
    have = sorted(_formats(saved))
    if have != wanted:
        return f"the snapshot holds the formats {have}, the check asks for {wanted}: update it"
    return None
