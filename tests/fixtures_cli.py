"""Running the operator commands from tests, in process and as an operator runs them.

- ``cli``: ``cli("status", "catalog", "--json") -> (exit status, stdout, stderr)``, the
  ``distcrawl`` entry point in process, on the test's Redis (``redis_url``).
- :func:`scrapy_command`: the ``scrapy`` entry point in a subprocess, from the project folder.
- :func:`distcrawl_in`: the ``distcrawl`` entry point in a subprocess, from any folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distcrawl.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(redis_url: str, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def call(*argv: str, allow: str = "") -> tuple[int, str, str]:
        settings = ["-s", f"REDIS_URL={redis_url}", "-s", f"DISTCRAWL_ALLOW_PRIVATE={allow}"]
        code = main([*argv, *settings])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def scrapy_command(redis_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``scrapy`` entry point, as an operator runs it on a node."""
    env = {**os.environ, "REDIS_URL": redis_url, "SCRAPY_SETTINGS_MODULE": "distcrawl.settings"}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )


def distcrawl_in(cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``distcrawl ARGV`` run from *cwd*, with no REDIS_URL / DISTCRAWL_HOME unless given."""
    clean = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DISTCRAWL_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **env},
        timeout=120,
    )


def run_migrate(redis_url: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """``distcrawl migrate ARGS --json`` in a subprocess on the test settings' example spiders:
    (exit status, the JSON summary, stderr)."""
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SCRAPY_SETTINGS_MODULE="redis_example_settings",
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])
        ),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "migrate", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    return proc.returncode, summary, proc.stderr
