"""The key schema's machinery: a key is declared once, as a :class:`Key` attribute of the class
of its hash slot (:mod:`distcrawl.frontier.keys`), with its type and meaning. The Python key
builders, the key-name functions of the Lua library and the key layout document all come from
those declarations.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, overload

__all__ = [
    "CONTROL",
    "SEEDS",
    "SHARD",
    "Key",
    "KeyOf",
    "KeyRecord",
    "KeySpec",
    "declared",
    "lua_key_builders",
]

#: the crawl-wide slot ``{S}``
CONTROL = "control"
#: a shard's slot ``{S:k.ddddd}`` (with one shard, ``{S}`` too)
SHARD = "shard"
#: the seed list's own slot ``{L}``: wherever the list's name hashes
SEEDS = "seeds"

#: how each slot's prefix is written in the layout document
_PREFIXES = {CONTROL: "{S}", SHARD: "{S:k.ddddd}", SEEDS: "{L}"}
_PARAM = re.compile(r"<(\w+)>")


class KeyRecord(NamedTuple):
    """One line of the key layout: the key's full name pattern, type, slot and meaning."""

    pattern: str
    type: str
    slot: str
    meaning: str


class KeySpec:
    """A key of a slot: ``pattern`` after the slot's prefix and a colon, its parameters in
    angle brackets (``"held:<node>"``), a Redis type and one paragraph of meaning. Declared as
    an attribute of its slot's class: read on an instance, a :class:`Key` is its name and a
    :class:`KeyOf` a function of its parameters (``keys.held(node)``); read on the class,
    either is the declaration itself."""

    def __init__(self, pattern: str, type: str, meaning: str) -> None:
        self.pattern = pattern
        self.type = type
        self.meaning = " ".join(meaning.split())
        self.params = tuple(_PARAM.findall(pattern))
        #: the pattern cut at its parameters: literal, param, literal, ...
        self.parts = _PARAM.split(pattern)
        self.name = ""
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.slot = getattr(owner, "SLOT", "")

    def build(self, prefix: str, *values: object) -> str:
        if len(values) != len(self.params):
            raise TypeError(f"key {self.name} takes {', '.join(self.params) or 'nothing'}")
        out = [prefix, ":", self.parts[0]]
        for value, literal in zip(values, self.parts[2::2], strict=True):
            out += [_text(value), literal]
        return "".join(out)

    def record(self) -> KeyRecord:
        name = _PARAM.sub(lambda m: f"<{m.group(1)}>", self.pattern)
        return KeyRecord(f"{_PREFIXES[self.slot]}:{name}", self.type, self.slot, self.meaning)

    def lua(self) -> str:
        """This key's builder in Lua: ``function K.<name>(P, <params>) return P .. ... end``."""
        pieces = ["P", _lua_string(":" + self.parts[0])]
        for param, literal in zip(self.params, self.parts[2::2], strict=True):
            pieces.append(param)
            if literal:
                pieces.append(_lua_string(literal))
        args = ", ".join(["P", *self.params])
        body = " .. ".join(pieces)
        return f"function K.{self.name}({args}) return {body} end"


class Key(KeySpec):
    """A key without parameters."""

    def __init__(self, pattern: str, type: str, meaning: str) -> None:
        super().__init__(pattern, type, meaning)
        if self.params:
            raise ValueError(f"{pattern}: a key with parameters is a KeyOf")

    @overload
    def __get__(self, obj: None, owner: type) -> Key: ...
    @overload
    def __get__(self, obj: object, owner: type) -> str: ...
    def __get__(self, obj: object, owner: type) -> Key | str:
        if obj is None:
            return self
        return self.build(obj.prefix)  # type: ignore[attr-defined]


class KeyOf(KeySpec):
    """A key with parameters: a function of them."""

    def __init__(self, pattern: str, type: str, meaning: str) -> None:
        super().__init__(pattern, type, meaning)
        if not self.params:
            raise ValueError(f"{pattern}: a key without parameters is a Key")

    @overload
    def __get__(self, obj: None, owner: type) -> KeyOf: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Callable[..., str]: ...
    def __get__(self, obj: object, owner: type) -> KeyOf | Callable[..., str]:
        if obj is None:
            return self
        return _Builder(self, obj.prefix)  # type: ignore[attr-defined]


class _Builder:
    """A parametrised key bound to a slot's prefix: called with its parameters."""

    __slots__ = ("key", "prefix")

    def __init__(self, key: KeySpec, prefix: str) -> None:
        self.key, self.prefix = key, prefix

    def __call__(self, *values: object) -> str:
        return self.key.build(self.prefix, *values)


def _text(value: object) -> str:
    # integers as Lua's `..` writes them (bucket numbers, generations: below 2^53)
    return str(int(value)) if isinstance(value, float) else str(value)


def _lua_string(text: str) -> str:
    if "'" in text or "\\" in text:
        raise ValueError(f"a key pattern holds {text!r}")
    return f"'{text}'"


def declared(*classes: type) -> list[KeySpec]:
    """The keys the slot classes declare, in declaration order."""
    out: list[KeySpec] = []
    for cls in classes:
        out += [v for v in vars(cls).values() if isinstance(v, KeySpec)]
    return out


def lua_key_builders(keys: list[KeySpec]) -> str:
    """The Lua include of key-name functions, ``K.<name>(P, ...)``. A name declared in two
    slots must have one pattern (``paused``, ``counters``: the same key when there is one
    shard)."""
    by_name: dict[str, KeySpec] = {}
    for key in keys:
        other = by_name.setdefault(key.name, key)
        if other.pattern != key.pattern:
            raise ValueError(f"key {key.name} has two patterns: {other.pattern}, {key.pattern}")
    lines = [
        "-- The key names, generated from the key schema (distcrawl/frontier/keys.py) when the",
        "-- library is assembled: K.<name>(P, ...) where P is the slot's prefix (KEYS[1]).",
        "local K = {}",
        *(key.lua() for key in by_name.values()),
    ]
    return "\n".join(lines) + "\n"
