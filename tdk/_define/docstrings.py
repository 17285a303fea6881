"""A function's docstring -> the tool description and the documented parameters.

Google, NumPy, reST and Epydoc styles are read by docstring-parser, which is imported only
when a docstring has more than one line (a one-line docstring is the description as is).
Sections other than the parameters (Returns, Raises, Examples...) stay in the description
as plain text.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from docstring_parser import DocstringMeta


class Doc(NamedTuple):
    """What a docstring says: the description, and each documented parameter's text."""

    description: str
    params: Mapping[str, str]


_NO_DOC: Final = Doc("", {})
_PARAMETER_SECTIONS: Final = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


def parse_docstring(doc: str | None) -> Doc:
    """The description (the docstring without its parameter section) and the documented
    parameters, in Google, NumPy, reST or Epydoc style (found by docstring-parser)."""
    if not doc or not doc.strip():
        return _NO_DOC
    text = inspect.cleandoc(doc)
    if "\n" not in text:
        return Doc(text, {})
    import docstring_parser  # here, not at the top: it is only needed for sectioned docstrings

    google = docstring_parser.DocstringStyle.GOOGLE
    try:
        # Google style first: one parse instead of the four that auto-detection runs; when it
        # finds no section at all, auto-detection picks among all styles.
        parsed = docstring_parser.parse(text, google)
        if not parsed.meta:
            parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:  # pragma: no cover - only when every style fails
        return Doc(text, {})
    params: dict[str, str] = {}
    sections = [parsed.description or ""]
    for meta in parsed.meta:
        if isinstance(meta, docstring_parser.DocstringParam):
            name = meta.arg_name.lstrip("*")
            if name and meta.args[0] in _PARAMETER_SECTIONS:
                params[name] = (meta.description or "").strip()
            continue
        sections.append(_render_section(meta, docstring_parser))
    description = "\n\n".join(section.strip() for section in sections if section.strip())
    return Doc(description, params)


def _render_section(meta: DocstringMeta, parser: ModuleType) -> str:
    """A non-parameter section (Returns, Raises, Examples...) as plain text."""
    if isinstance(meta, parser.DocstringReturns):
        label = "Yields" if meta.is_generator else "Returns"
    elif isinstance(meta, parser.DocstringRaises):
        label = f"Raises {meta.type_name}" if meta.type_name else "Raises"
    else:
        label = meta.args[0].capitalize() if meta.args else "Note"
    body = "\n".join(
        part for part in (getattr(meta, "snippet", None), meta.description) if part
    ).strip()
    if not body:
        return ""
    return f"{label}:\n{body}" if "\n" in body else f"{label}: {body}"
