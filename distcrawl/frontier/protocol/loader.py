"""Assembles the frontier's Lua library from its files: one file per command (``lua/shard/``,
``lua/control/`` and ``lua/seeds/``, by the slot of KEYS[1]), shared pieces in ``lua/include/``
pulled in where a file says ``--- @include "name"`` (each once, before the file that names it), and
two includes generated from Python: ``keys`` (the key schema's names) and ``protocol`` (the
commands' arguments and constants).

The result is a Redis function library (FUNCTION LOAD; one registered function per command)
and, for servers without FUNCTION (Redis before 7), one EVAL script per command.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from distcrawl.frontier.keys import lua_keys
from distcrawl.frontier.protocol.spec import COMMANDS, lua_protocol
from distcrawl.frontier.schema import CONTROL, SEEDS, SHARD

__all__ = ["Library", "LuaLibraryError", "assemble", "library", "script"]

_INCLUDE = re.compile(r'^--- @include "([\w-]+)"[ \t]*$')
#: the includes made from Python when the library is assembled
GENERATED: dict[str, Callable[[], str]] = {"keys": lua_keys, "protocol": lua_protocol}
#: the folder of each slot's commands
_FOLDERS = {SHARD: "shard", CONTROL: "control", SEEDS: "seeds"}


class LuaLibraryError(ValueError):
    """The Lua files cannot be assembled (a missing include or command file, ...)."""


@dataclass(frozen=True)
class Piece:
    """One file's text in an assembled chunk, and where it starts (1-based line)."""

    name: str
    first_line: int
    lines: int


@dataclass
class Chunk:
    """Lua text assembled from pieces, each include once."""

    parts: list[str] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)
    included: set[str] = field(default_factory=set)
    line: int = 1

    def add(self, name: str, text: str) -> None:
        if not text.endswith("\n"):
            text += "\n"
        n = text.count("\n")
        self.parts.append(text)
        self.pieces.append(Piece(name, self.line, n))
        self.line += n

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def origin(self, line: int) -> tuple[str, int]:
        """The file and line a line of the chunk comes from."""
        for piece in self.pieces:
            if piece.first_line <= line < piece.first_line + piece.lines:
                return piece.name, line - piece.first_line + 1
        return "<assembled>", line


@dataclass(frozen=True)
class Library:
    """The assembled library: ``text`` for FUNCTION LOAD, ``functions`` (command -> the name
    FCALL calls), ``scripts`` (command -> an EVAL script) and their ``shas``; ``chunk`` and
    ``script_chunks`` tell which file each line comes from."""

    name: str
    text: str
    functions: Mapping[str, str]
    scripts: Mapping[str, str]
    shas: Mapping[str, str]
    chunk: Chunk
    script_chunks: Mapping[str, Chunk]


class _Sources:
    def __init__(self, root: Traversable, generated: Mapping[str, Callable[[], str]]) -> None:
        self.root = root
        self.generated = generated

    def include(self, name: str, wanted_by: str) -> str:
        if name in self.generated:
            return self.generated[name]()
        path = self.root / "include" / f"{name}.lua"
        if not path.is_file():
            raise LuaLibraryError(f'{wanted_by} includes "{name}": no include/{name}.lua')
        return path.read_text("utf-8")

    def command(self, name: str, slot: str) -> tuple[str, str]:
        rel = f"{_FOLDERS[slot]}/{name}.lua"
        path = self.root / _FOLDERS[slot] / f"{name}.lua"
        if not path.is_file():
            raise LuaLibraryError(f"command {name} ({slot} slot) has no file {rel}")
        return rel, path.read_text("utf-8")

    def command_files(self) -> set[str]:
        return {
            f"{folder}/{entry.name}"
            for folder in _FOLDERS.values()
            for entry in (self.root / folder).iterdir()
            if entry.name.endswith(".lua")
        }


def _expand(chunk: Chunk, sources: _Sources, name: str, text: str) -> None:
    """Add ``text`` to the chunk after the includes it names (recursively, each once)."""
    body = []
    for line in text.splitlines(keepends=True):
        m = _INCLUDE.match(line.rstrip("\n"))
        if m is None:
            body.append(line)
            continue
        inc = m.group(1)
        if inc not in chunk.included:
            chunk.included.add(inc)
            _expand(chunk, sources, f"include/{inc}.lua", sources.include(inc, name))
        body.append("\n")  # the include line stays a line, so the file's lines keep their numbers
    chunk.add(name, "".join(body))


def _command_chunk(chunk: Chunk, sources: _Sources, name: str, slot: str) -> None:
    rel, text = sources.command(name, slot)
    if not re.search(rf"^local function {name}\(keys, ", text, re.M) and not re.search(
        rf"^local function {name}\(keys, _\)", text, re.M
    ):
        raise LuaLibraryError(f"{rel} defines no `local function {name}(keys, args)`")
    _expand(chunk, sources, rel, text)


def assemble(
    root: Traversable | None = None,
    generated: Mapping[str, Callable[[], str]] | None = None,
) -> Library:
    """Assemble the library from the Lua files under ``root`` (by default the package's
    ``lua`` folder). Raises :class:`LuaLibraryError` when a file is missing or a command
    file is no command's."""
    root = root or resources.files("distcrawl.frontier").joinpath("lua")
    sources = _Sources(root, GENERATED if generated is None else generated)
    expected = {f"{_FOLDERS[s.slot]}/{s.name}.lua" for s in COMMANDS.values()}
    stray = sources.command_files() - expected
    if stray:
        raise LuaLibraryError(f"no command declared for {', '.join(sorted(stray))}")
    library = Chunk()
    scripts: dict[str, Chunk] = {}
    for spec in COMMANDS.values():
        _command_chunk(library, sources, spec.name, spec.slot)
        own = Chunk()
        _command_chunk(own, sources, spec.name, spec.slot)
        own.add("<eval>", f"return {spec.name}(KEYS, ARGV)\n")
        scripts[spec.name] = own
    digest = hashlib.sha1(library.text.encode()).hexdigest()[:16]
    name = f"distcrawl_frontier_{digest}"
    functions = {c: f"distcrawl_{digest}_{c}" for c in COMMANDS}
    header = Chunk()
    header.add("<library>", f"#!lua name={name}\n")
    registrations = "".join(f"redis.register_function('{functions[c]}', {c})\n" for c in COMMANDS)
    full = Chunk()
    for part, piece in (
        *zip(header.parts, header.pieces, strict=True),
        *zip(library.parts, library.pieces, strict=True),
    ):
        full.add(piece.name, part)
    full.add("<library>", registrations)
    return Library(
        name=name,
        text=full.text,
        functions=functions,
        scripts={c: chunk.text for c, chunk in scripts.items()},
        shas={c: hashlib.sha1(chunk.text.encode()).hexdigest() for c, chunk in scripts.items()},
        chunk=full,
        script_chunks=scripts,
    )


def script(*includes: str, body: str = "") -> str:
    """An EVAL script of the named includes (with theirs) and ``body``: the library's shared
    pieces, run on their own (tests)."""
    chunk = Chunk()
    sources = _Sources(resources.files("distcrawl.frontier").joinpath("lua"), GENERATED)
    text = "".join(f'--- @include "{name}"\n' for name in includes) + body
    _expand(chunk, sources, "<script>", text)
    return chunk.text


@cache
def library() -> Library:
    """The package's library, assembled once per process."""
    return assemble()
