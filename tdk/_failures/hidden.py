"""The characters that hide, reorder or split text, which no text tdk shows may carry raw.

Log lines escape them (:mod:`tdk._failures.log_line`), and the upstream texts an error quotes
(:mod:`tdk.http._body`) and span attributes (:mod:`tdk._execution.telemetry`) replace them. This
module imports nothing: everything that cleans text reads the one list here.
"""

from __future__ import annotations

from typing import Final

__all__ = ["HIDDEN_CHARACTERS"]

HIDDEN_CHARACTERS: Final = (
    "\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f"
)
"""The body of a regular-expression character class of the characters a text line must not
carry raw, which JSON leaves as they are: DEL and the C1 controls (U+0085 ends a line for
``str.splitlines``), the line and paragraph separators, and every other format character
(those that reorder or hide text in a viewer: bidirectional marks, embeddings, overrides and
isolates, zero-width characters, soft hyphen, BOM, tags), as Unicode 15.1 lists them. The C0
controls are left to each user, which treats them as it must (JSON escapes them)."""
