"""Lint the frontier's Lua library with luacheck (Debian's ``lua-check``), as Redis runs it:
the assembled function library (every warning), and each command's EVAL script (globals only:
a script that lacks an include uses a name it never defined). Findings name the source file
and line, not the assembled chunk's.

    python -m distcrawl.frontier.protocol.luacheck --config .luacheckrc
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from importlib.resources.abc import Traversable
from pathlib import Path

from distcrawl.frontier.protocol.loader import Chunk, assemble

__all__ = ["check", "main"]

_FINDING = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<text>.*)$")


def _run(luacheck: str, config: Path, path: Path, chunk: Chunk, extra: list[str]) -> list[str]:
    out = subprocess.run(
        [luacheck, str(path), "--config", str(config), "--formatter", "plain", "--codes", *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = []
    for line in out.stdout.splitlines():
        m = _FINDING.match(line)
        if m is None:
            continue
        name, at = chunk.origin(int(m.group("line")))
        findings.append(f"lua/{name}:{at}:{m.group('col')}: {m.group('text')}")
    if out.returncode > 1 and not findings:  # luacheck itself failed (2: warnings, 1: errors)
        said = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]
        findings.append(f"luacheck failed on {path.name}: {' '.join(said)}")
    return findings


def check(config: Path, *, root: Traversable | None = None) -> list[str]:
    """luacheck's findings on the library (the package's, or the Lua files under ``root``)
    and on every command's script; empty when clean."""
    tool = shutil.which("luacheck")
    if tool is None:
        raise FileNotFoundError("luacheck is not installed (Debian: apt-get install lua-check)")
    library = assemble(root)
    findings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="distcrawl-luacheck-") as tmp:
        path = Path(tmp) / "library.lua"
        path.write_text(library.text)
        findings += _run(tool, config, path, library.chunk, [])
        for name, script in library.script_chunks.items():
            path = Path(tmp) / f"{name}.lua"
            path.write_text(script.text)
            findings += _run(tool, config, path, script, ["--only", "1"])
    return sorted(set(findings))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path(".luacheckrc"))
    args = parser.parse_args(argv)
    try:
        findings = check(args.config)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding)
    print(f"luacheck: {len(findings)} finding(s) in the frontier's Lua library", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
