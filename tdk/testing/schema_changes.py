"""How two versions of a tool's JSON Schemas differ, each change labelled for its callers.

The labels follow who reads each schema. A model (or any caller) *sends* arguments that the
input schema must accept: a change that accepts less is **breaking** (a parameter removed, a
required one added, a type narrowed, an enum value removed, a bound tightened) and one that
accepts more is **compatible** (an optional parameter added, a type widened). A host *reads*
what the output schema describes: there the rule turns over (an output field removed, a value
that may now be null or a new enum value are breaking; a narrower output is compatible),
except that a new output field is compatible, as readers ignore fields they do not know.
Descriptions, titles and examples are **cosmetic**. A change this module cannot judge (an
unknown keyword changed) is labelled breaking: a reviewer decides.

Schemas are compared as tdk writes them (pydantic's JSON Schema): ``type`` (one or a list),
``anyOf``/``oneOf`` branches, ``enum``/``const``, ``properties``/``required``/
``additionalProperties``, ``items``, bounds, ``pattern``, ``format``, ``default``, and
``$ref`` into ``$defs`` (recursive models included).

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["BREAKING", "COMPATIBLE", "COSMETIC", "schema_changes"]

BREAKING: Final = "breaking"
COMPATIBLE: Final = "compatible"
COSMETIC: Final = "cosmetic"

#: Keywords whose change is cosmetic.
_WORDS: Final = frozenset({"description", "title", "examples", "$comment"})
#: Keywords compared by their own rules (or not compared here at all).
_HANDLED: Final = _WORDS | {
    "type", "anyOf", "oneOf", "enum", "const", "properties", "required",
    "additionalProperties", "items", "default", "$ref", "$defs", "definitions", "deprecated",
    "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems", "minProperties", "maxProperties", "pattern", "format",
}  # fmt: skip
#: Lower bounds (a higher one accepts less) and upper bounds (a lower one accepts less).
_LOWER: Final = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER: Final = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
#: How long a value shown in a change may be.
_MAX_SHOWN: Final = 60
#: Most ``$ref`` hops followed, and the deepest nesting compared.
_MAX_HOPS: Final = 32
_MAX_DEPTH: Final = 64


def _shown_value(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _json_text(value: object) -> str:
    """A JSON value as text that compares equal for equal values (sorted keys)."""
    return json.dumps(value, sort_keys=True)


class _Comparison:
    """One comparison of an old and a new schema, for input or output (``role``)."""

    def __init__(
        self, old_root: Mapping[str, Any], new_root: Mapping[str, Any], role: str, strict: bool
    ) -> None:
        self.roots = (old_root, new_root)
        self.output = role == "output"
        self.strict = strict
        self.changes: list[tuple[str, str]] = []
        self._seen: set[tuple[object, object]] = set()

    # -- labels --------------------------------------------------------------------------

    def narrowed(self, text: str) -> None:
        """Accepts (input) or may produce (output) less than before."""
        self.changes.append((COMPATIBLE if self.output else BREAKING, text))

    def widened(self, text: str) -> None:
        """Accepts (input) or may produce (output) more than before."""
        self.changes.append((BREAKING if self.output else COMPATIBLE, text))

    def where(self, path: str) -> str:
        if self.output:
            return f"output field '{path}'" if path else "the output"
        return f"parameter '{path}'" if path else "the arguments"

    # -- the walk ------------------------------------------------------------------------

    def resolve(self, schema: object, side: int) -> Mapping[str, Any]:
        """``schema`` with its ``$ref`` followed (``side``: 0 old, 1 new)."""
        for _ in range(_MAX_HOPS):
            if not isinstance(schema, Mapping):
                return {}
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/"):
                return schema
            target: object = self.roots[side]
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **_as_map(target)}
        return {}

    def compare(self, old: object, new: object, path: str, depth: int = 0) -> None:
        """Every change from ``old`` to ``new`` at ``path``."""
        refs = (_as_map(old).get("$ref"), _as_map(new).get("$ref"))
        if refs != (None, None):  # a definition is compared once (recursive models end)
            if refs in self._seen:
                return
            self._seen.add(refs)
        old_s, new_s = self.resolve(old, 0), self.resolve(new, 1)
        if depth > _MAX_DEPTH or old_s == new_s:
            return
        self.words(old_s, new_s, path)
        olds = [self.resolve(branch, 0) for branch in _branches(old_s)]
        news = [self.resolve(branch, 1) for branch in _branches(new_s)]
        if len(olds) == 1 and len(news) == 1 and _type(olds[0]) == _type(news[0]):
            self.same_type(olds[0], news[0], path, depth)
            return
        self.branches(olds, news, path, depth)

    def words(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        """Cosmetic keywords, ``default``, ``deprecated`` and keywords not judged here."""
        for word in sorted(_WORDS):
            if old.get(word) != new.get(word):
                self.changes.append((COSMETIC, f"{word} of {self.where(path)} changed"))
        if old.get("default", ...) != new.get("default", ...):
            was, now = old.get("default", "(none)"), new.get("default", "(none)")
            text = f"default changed from {_shown_value(was)} to {_shown_value(now)}"
            self.changes.append((COMPATIBLE, f"{self.where(path)}: {text}"))
        if bool(old.get("deprecated")) != bool(new.get("deprecated")):
            state = "deprecated" if new.get("deprecated") else "no longer deprecated"
            self.changes.append((COMPATIBLE, f"{self.where(path)} {state}"))
        for word in sorted((set(old) | set(new)) - _HANDLED):
            if _json_text(old.get(word)) != _json_text(new.get(word)):
                self.changes.append((BREAKING, f"{self.where(path)}: '{word}' changed"))

    def branches(
        self, olds: list[Mapping[str, Any]], news: list[Mapping[str, Any]], path: str, depth: int
    ) -> None:
        """Types (``anyOf`` branches) no longer there, new ones, and those in both."""
        matched: set[int] = set()
        lost, gained = [], []
        for old in olds:
            kind = _type(old)
            same = [n for n, new in enumerate(news) if _type(new) == kind]
            wider = [n for n, new in enumerate(news) if _type(new) in _WIDER.get(kind, ())]
            if same:
                matched.add(same[0])
                self.same_type(old, news[same[0]], path, depth)
            elif wider:
                matched.add(wider[0])
                self.widened(f"{self.where(path)}: {kind} widened to {_type(news[wider[0]])}")
            elif narrower := [
                n for n, new in enumerate(news) if kind in _WIDER.get(_type(new), ())
            ]:
                matched.add(narrower[0])
                self.narrowed(f"{self.where(path)}: {kind} narrowed to {_type(news[narrower[0]])}")
            else:
                lost.append(kind)
        kinds = {_type(old) for old in olds}
        gained = [_type(new) for n, new in enumerate(news) if n not in matched]
        gained = [kind for kind in gained if kind not in kinds]
        where = self.where(path)
        if lost and gained:
            text = f"{where}: type changed from {' | '.join(lost)} to {' | '.join(gained)}"
            self.changes.append((BREAKING, text))
        elif lost:
            self.narrowed(f"{where}: type narrowed, {' | '.join(lost)} no longer allowed")
        elif gained:
            self.widened(f"{where}: type widened, {' | '.join(gained)} now allowed")

    def same_type(
        self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, depth: int
    ) -> None:
        """The constraints of two schemas of one type."""
        self.values(old, new, path)
        self.bounds(old, new, path)
        if "properties" in old or "properties" in new or _type(old) == "object":
            self.objects(old, new, path, depth)
        if "items" in old or "items" in new:
            self.compare(old.get("items", {}), new.get("items", {}), f"{path}[]", depth + 1)

    def values(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        """``enum`` and ``const``: values no longer allowed, and new ones."""
        was, now = _allowed(old), _allowed(new)
        if was == now:
            return
        if was is None:
            listed = [json.loads(value) for value in sorted(now or ())]
            self.narrowed(f"{self.where(path)}: now limited to {_shown_value(listed)}")
            return
        if now is None:
            self.widened(f"{self.where(path)}: no longer limited to listed values")
            return
        for value in sorted(was - now):
            self.narrowed(f"{self.where(path)}: enum value {value} removed")
        for value in sorted(now - was):
            self.widened(f"{self.where(path)}: enum value {value} added")

    def bounds(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        """Numeric, length and size bounds, ``pattern`` and ``format``."""
        for word in (*_LOWER, *_UPPER):
            was, now = old.get(word), new.get(word)
            if was == now:
                continue
            tighter = was is None or (
                now is not None and (now > was if word in _LOWER else now < was)
            )
            text = f"{self.where(path)}: {word} {_shown_value(was)} -> {_shown_value(now)}"
            self.narrowed(text) if tighter else self.widened(text)
        for word in ("pattern", "format"):
            was, now = old.get(word), new.get(word)
            if was == now:
                continue
            text = f"{self.where(path)}: {word} {_shown_value(was)} -> {_shown_value(now)}"
            if was is None:
                self.narrowed(text)
            elif now is None:
                self.widened(text)
            else:
                self.changes.append((BREAKING, text))

    def objects(
        self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, depth: int
    ) -> None:
        """Properties removed, added, made required or optional; other keys allowed or not."""
        olds, news = _as_map(old.get("properties")), _as_map(new.get("properties"))
        for name in sorted(olds.keys() - news.keys()):
            self.changes.append((BREAKING, f"{self.where(_join(path, name))} removed"))
        for name in sorted(news.keys() - olds.keys()):
            where = self.where(_join(path, name))
            if self.output:
                self.changes.append((COMPATIBLE, f"{where} added"))
            elif self.required(new, name):
                self.changes.append((BREAKING, f"required {where} added"))
            else:
                self.changes.append((COMPATIBLE, f"optional {where} added"))
        for name in sorted(olds.keys() & news.keys()):
            was, now = self.required(old, name), self.required(new, name)
            where = self.where(_join(path, name))
            if was and not now:
                self.widened(f"{where} may now be {'missing' if self.output else 'left out'}")
            elif now and not was:
                self.narrowed(f"{where} is now required")
            self.compare(olds[name], news[name], _join(path, name), depth + 1)
        self.extra_keys(old, new, path)

    def extra_keys(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        was, now = old.get("additionalProperties", True), new.get("additionalProperties", True)
        if was is not False and now is False:
            self.narrowed(f"{self.where(path)}: other keys no longer allowed")
        elif was is False and now is not False:  # (for readers too: they ignore new fields)
            self.changes.append((COMPATIBLE, f"{self.where(path)}: other keys now allowed"))
        elif isinstance(was, Mapping) and isinstance(now, Mapping):
            self.compare(was, now, f"{path}{{}}")

    def required(self, schema: Mapping[str, Any], name: str) -> bool:
        """Whether property ``name`` must be given (in strict mode, one that accepts null is
        optional: null means "not given")."""
        listed = name in (schema.get("required") or ())
        if not (listed and self.strict):
            return listed
        prop = self.resolve(_as_map(schema.get("properties")).get(name), 1)
        return "null" not in {_type(branch) for branch in _branches(prop)}


#: Types that accept every value of a narrower one.
_WIDER: Final = {"integer": ("number",)}


def _as_map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _branches(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The alternatives of ``schema``: its ``anyOf``/``oneOf`` branches, or one branch per
    type of a ``type`` list, or itself."""
    for word in ("anyOf", "oneOf"):
        options = schema.get(word)
        if isinstance(options, list) and options:
            rest = {k: v for k, v in schema.items() if k != word and k not in _WORDS}
            for option in options:
                yield from _branches({**rest, **_as_map(option)})
            return
    kinds = schema.get("type")
    if isinstance(kinds, list):
        for kind in kinds:
            yield {**schema, "type": kind}
        return
    yield schema


def _type(schema: Mapping[str, Any]) -> str:
    """The JSON type of a branch (``any`` when it sets none)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    values = _allowed(schema)
    if values:
        return {"true": "boolean", "false": "boolean", "null": "null"}.get(
            next(iter(values)), "string" if next(iter(values)).startswith('"') else "number"
        )
    return "any"


def _allowed(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The values ``enum``/``const`` allow (as JSON text), or None when not limited."""
    if "const" in schema:
        return frozenset({_json_text(schema["const"])})
    values = schema.get("enum")
    return frozenset(_json_text(value) for value in values) if isinstance(values, list) else None


def schema_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    role: str,
    nullable_is_optional: bool = False,
) -> list[tuple[str, str]]:
    """The changes from schema ``old`` to ``new`` (``role``: ``"input"`` or ``"output"``),
    each ``(label, text)``."""
    comparison = _Comparison(old, new, role, nullable_is_optional)
    comparison.compare(old, new, "")
    return comparison.changes
