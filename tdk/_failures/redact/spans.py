"""What redaction replaces, and how: the marker, and the one replacement of the spans of a
text that the finders (:mod:`.positions`, :mod:`.shapes`, :mod:`.exact`) found."""

from __future__ import annotations

from typing import Final

__all__ = ["REDACTED", "Span", "replace_spans"]

#: What each run of a credential's characters is replaced by.
REDACTED: Final = "[REDACTED]"
#: Where a credential lies in a text: (start, end), as ``re.Match.span()`` gives it.
Span = tuple[int, int]


def replace_spans(text: str, spans: list[Span]) -> str:
    """``text`` with each run of characters covered by spans (start, end) replaced by one
    marker: spans that overlap or touch make one run."""
    spans.sort()
    pieces: list[str] = []
    done = 0
    start, end = spans[0]
    for next_start, next_end in spans:
        if next_start <= end:  # overlaps or touches (the first span overlaps itself)
            end = max(end, next_end)
            continue
        pieces += (text[done:start], REDACTED)
        done = end
        start, end = next_start, next_end
    pieces += (text[done:start], REDACTED)
    return "".join(pieces) + text[end:]
