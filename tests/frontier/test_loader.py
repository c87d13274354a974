"""The Lua library's loader (protocol/loader.py): includes expanded once each, before the file
that names them; every command a registered function and an EVAL script; a missing include, a
missing command file or a stray one is an error that names it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import redis

from distcrawl.frontier.protocol.loader import LuaLibraryError, assemble, library
from distcrawl.frontier.protocol.spec import COMMANDS

LUA = Path(str(resources.files("distcrawl.frontier").joinpath("lua")))
INCLUDE = re.compile(r'^--- @include "([\w-]+)"', re.M)


@pytest.fixture
def lua_copy(tmp_path: Path) -> Path:
    """A copy of the library's files, to break."""
    root = tmp_path / "lua"
    shutil.copytree(LUA, root)
    return root


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _server_major(client: redis.Redis) -> int:
    info = client.info("server")
    return int(str(info.get("valkey_version") or info["redis_version"]).split(".")[0])


def test_every_include_is_expanded_once_before_the_files_that_name_it() -> None:
    lib = library()
    names = [piece.name for piece in lib.chunk.pieces]
    includes = [n for n in names if n.startswith("include/")]
    assert len(includes) == len(set(includes))  # once each, in the whole library
    assert {"include/keys.lua", "include/protocol.lua"} <= set(includes)  # the generated ones
    assert not INCLUDE.search(lib.text)  # no include line is left
    for name in names:
        if not name.endswith(".lua") or name in ("include/keys.lua", "include/protocol.lua"):
            continue
        for wanted in INCLUDE.findall((LUA / name).read_text()):
            assert names.index(f"include/{wanted}.lua") < names.index(name), (name, wanted)
    # each command's own script holds its includes the same way, and ends calling it
    for command, script in lib.scripts.items():
        assert not INCLUDE.search(script)
        assert script.rstrip().endswith(f"return {command}(KEYS, ARGV)")
        assert f"local function {command}(keys, " in script


def test_a_line_of_the_library_is_traced_to_its_file() -> None:
    lib = library()
    lines = lib.text.splitlines()
    at = next(i for i, line in enumerate(lines, 1) if line.startswith("local function sync("))
    name, line = lib.chunk.origin(at)
    assert name == "shard/sync.lua"
    assert (LUA / name).read_text().splitlines()[line - 1].startswith("local function sync(")


def test_every_command_is_a_function_of_its_own_and_none_is_left_out() -> None:
    lib = library()
    files = {f"{p.parent.name}/{p.stem}" for p in LUA.glob("*/*.lua") if p.parent.name != "include"}
    declared = {f"{spec.slot}/{name}" for name, spec in COMMANDS.items()}
    assert files == declared
    registered = re.findall(r"redis\.register_function\('(\w+)', (\w+)\)", lib.text)
    assert sorted(c for _, c in registered) == sorted(COMMANDS)
    assert {f: c for f, c in registered} == {lib.functions[c]: c for c in COMMANDS}
    assert lib.text.startswith(f"#!lua name={lib.name}\n")
    assert len(set(lib.shas.values())) == len(COMMANDS)


def test_redis_registers_every_command_of_the_library(client: redis.Redis) -> None:
    if _server_major(client) < 7:
        pytest.skip("this server has no FUNCTION")
    lib = library()
    try:
        client.execute_command("FUNCTION", "LOAD", "REPLACE", lib.text)
        [entry] = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", lib.name)
        got = {f[b"name"].decode() for f in entry[b"functions"]}  # (redis-py: dicts)
        assert got == set(lib.functions.values())
    finally:
        client.execute_command("FUNCTION", "DELETE", lib.name)
    for script in lib.scripts.values():  # and every EVAL script compiles
        client.script_load(script)


def test_a_missing_include_is_an_error_naming_the_file_and_the_include(lua_copy: Path) -> None:
    sync = lua_copy / "shard" / "sync.lua"
    sync.write_text(sync.read_text().replace('--- @include "fencing"', '--- @include "fences"'))
    with pytest.raises(LuaLibraryError, match=r'shard/sync\.lua includes "fences"'):
        assemble(lua_copy)


def test_a_command_without_its_file_or_a_file_of_no_command_is_an_error(lua_copy: Path) -> None:
    (lua_copy / "control" / "census.lua").rename(lua_copy / "control" / "headcount.lua")
    with pytest.raises(LuaLibraryError, match=r"control/headcount\.lua"):
        assemble(lua_copy)
    (lua_copy / "control" / "headcount.lua").unlink()
    with pytest.raises(LuaLibraryError, match=r"census.*control/census\.lua"):
        assemble(lua_copy)


def test_a_command_file_must_define_its_command(lua_copy: Path) -> None:
    path = lua_copy / "shard" / "drained.lua"
    path.write_text(path.read_text().replace("local function drained(", "local function left("))
    with pytest.raises(LuaLibraryError, match="drained"):
        assemble(lua_copy)


def test_no_lua_file_is_long_and_each_names_its_keys_arguments_and_reply() -> None:
    for path in LUA.glob("*/*.lua"):
        text = path.read_text()
        assert len(text.splitlines()) <= 300, path
        assert text.startswith("--[["), path  # a header first
    for name, spec in COMMANDS.items():
        header = (LUA / spec.slot / f"{name}.lua").read_text().split("]]", 1)[0]
        assert "KEYS[1]" in header and "Returns" in header, name
        if spec.start_list:
            assert "KEYS[2]" in header, name
        for arg in spec.args:
            assert arg.lstrip("*") in header, (name, arg)
        for field in spec.header:
            assert field in header, (name, field)
        for section in spec.sections:
            assert section.name in header and " ".join(section.fields) in header, name
