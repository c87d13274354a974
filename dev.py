#!/usr/bin/env python3
"""Set up .venv from nothing but Python 3, then run the demo, the tests or the linters.

    python3 dev.py demo [distcrawl demo options]   # a demo crawl on embedded services
    python3 dev.py test [pytest options]           # the test suite (3 workers; -n 0: one)
    python3 dev.py lint                            # ruff, mypy, layer contracts, luacheck
    python3 dev.py docs [sphinx-build options]     # the documentation site, into build/docs
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".distcrawl-installed"


def ensure_venv() -> None:
    """Create .venv and install the project with its test and docs extras, once per
    pyproject change."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        return
    if not (BIN / "python").exists():
        print("creating .venv", file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check"]
    # set-up talk goes to stderr: stdout is the command's own (`demo --json` prints one object)
    print("installing distcrawl and its dependencies into .venv", file=sys.stderr, flush=True)
    subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True, stdout=sys.stderr)
    subprocess.run([*pip, "install", "-q", "-e", f"{ROOT}[test,docs]"], check=True, stdout=sys.stderr)
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "lint", "docs"):
        print(__doc__)
        return 2
    ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "demo":
        return subprocess.call([str(BIN / "distcrawl"), "demo", *rest], cwd=ROOT)
    if command == "docs":
        # warnings are errors (-W), every one of them reported (--keep-going); -n: nitpicky
        # about references that lead nowhere
        build = [str(BIN / "sphinx-build"), "-W", "--keep-going", "-n", "-q"]
        return subprocess.call([*build, *rest, "docs", "build/docs"], cwd=ROOT)
    if command == "lint":
        rc = subprocess.call([str(BIN / "ruff"), "check", "distcrawl", "tests", "bench"], cwd=ROOT)
        rc |= subprocess.call(
            [str(BIN / "ruff"), "format", "--check", "distcrawl", "tests", "bench"], cwd=ROOT
        )
        rc |= subprocess.call([str(BIN / "mypy")], cwd=ROOT)
        # the layer contracts of pyproject.toml: no module imports a layer above its own
        rc |= subprocess.call([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT)
        # the frontier's Lua library, assembled as Redis runs it (Debian's lua-check)
        luacheck = ["-m", "distcrawl.frontier.protocol.luacheck", "--config", ".luacheckrc"]
        rc |= subprocess.call([str(BIN / "python"), *luacheck], cwd=ROOT)
        return rc
    if not any(a.startswith(("-n", "--numprocesses")) for a in rest):
        # most of a test's time is spent waiting for servers and crawls: three workers on
        # two cores; each test module runs whole on one worker (its servers are per module)
        workers = os.environ.get("DISTCRAWL_TEST_WORKERS", "3")
        rest = ["-n", workers, "--dist", "loadfile", *rest]
    return subprocess.call([str(BIN / "python"), "-m", "pytest", *rest], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
