"""The scrapyd guide's recipe: two scrapyd daemons on one machine, the project deployed to
both with scrapyd-deploy, catalog scheduled on both, every product stored once."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest
from docshell import ROOT, Shell, block, free_port, wait_until

pytestmark = pytest.mark.slow


def _finished(port: str) -> bool:
    url = f"http://127.0.0.1:{port}/listjobs.json?project=distcrawl"
    with urllib.request.urlopen(url, timeout=10) as response:
        jobs = json.load(response)
    return bool(jobs["finished"]) and not jobs["running"] and not jobs["pending"]


def test_two_scrapyd_daemons_on_one_machine(tmp_path: Path) -> None:
    work = tmp_path / "work"
    # scrapyd-deploy writes setup.py into the project it builds: a copy of the project
    shutil.copytree(ROOT / "distcrawl", work / "distcrawl",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, work / name)
    ports = {"6800": str(free_port()), "6801": str(free_port()), "8000": str(free_port())}
    sh = Shell(work, ports=ports, link=())
    try:
        sh.run_ok(block("scrapyd-start"), timeout=120)
        deployed = sh.run_ok(block("scrapyd-deploy"), timeout=300).output
        assert deployed.count('"status": "ok"') == 2, deployed + sh.stderr()
        scheduled = sh.run_ok(block("scrapyd-schedule"), timeout=120).output
        assert scheduled.count('"status": "ok"') == 2, scheduled
        assert wait_until(lambda: all(_finished(p) for p in (ports["6800"], ports["6801"])), 400, 1)
        out = sh.run_ok(block("scrapyd-jobs")).output
        assert re.search(r"stored products\s+100\b", out), out
        sh.run_ok(block("scrapyd-stop"), timeout=120)
    finally:
        sh.close()
