"""luacheck on the frontier's Lua library (protocol/luacheck.py, run by ``dev.py lint``): the
library is clean, and a command whose script lacks an include is caught, named by its file."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from distcrawl.frontier.protocol.luacheck import check

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".luacheckrc"
LUA = Path(str(resources.files("distcrawl.frontier").joinpath("lua")))

pytestmark = pytest.mark.skipif(
    shutil.which("luacheck") is None, reason="luacheck is not installed (apt-get install lua-check)"
)


def test_the_library_and_every_commands_script_pass_luacheck() -> None:
    assert check(CONFIG) == []


def test_a_script_without_an_include_it_needs_is_caught_in_its_file(tmp_path: Path) -> None:
    root = tmp_path / "lua"
    shutil.copytree(LUA, root)
    path = root / "shard" / "release_dead.lua"
    path.write_text(path.read_text().replace('--- @include "fencing"\n', ""))
    findings = check(CONFIG, root=root)
    # the library still has it (another command includes it), the command's own script not
    assert any(f.startswith("lua/shard/release_dead.lua:") and "bury" in f for f in findings), (
        findings
    )


def test_an_unused_variable_is_reported_at_its_line(tmp_path: Path) -> None:
    root = tmp_path / "lua"
    shutil.copytree(LUA, root)
    path = root / "control" / "census.lua"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("local function census("))
    lines.insert(at + 1, "  local forgotten = 1")
    path.write_text("\n".join(lines) + "\n")
    findings = check(CONFIG, root=root)
    assert any(f.startswith(f"lua/control/census.lua:{at + 2}:") for f in findings), findings
