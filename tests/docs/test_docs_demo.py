"""The demo's examples: the README's first command, and the demo page's runs (JSON summary,
a failing shop, several sites and shards, a template without structured data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docshell import Shell, block

pytestmark = pytest.mark.slow


def _summaries(output: str) -> list[dict]:
    return [json.loads(ln) for ln in output.splitlines() if ln.startswith("{")]


def test_the_readme_demo(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work")
    try:
        out = sh.run_ok(block("readme-demo"), timeout=600).output
        assert "300" in out, out[-2000:]
    finally:
        sh.close()


def test_the_demo_page(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work")
    try:
        (first,) = _summaries(sh.run_ok(block("demo-json"), timeout=600).output)
        assert first["stored"] == 100 and first["lost"] == 0, first
        (failing,) = _summaries(sh.run_ok(block("demo-errors"), timeout=600).output)
        assert failing["lost"] == 0 and failing["duplicates"] == 0, failing
        sites = _summaries(sh.run_ok(block("demo-sites"), timeout=900).output)
        assert [s["sites"] for s in sites] == [3, 4], sites
        assert all(s["lost"] == 0 and s["duplicates"] == 0 for s in sites), sites
        (incidents,) = _summaries(sh.run_ok(block("demo-incidents"), timeout=600).output)
        assert incidents["stored"] == incidents["expected"] == 600, incidents
        assert incidents["webhook_notices"]["finding"] == 1, incidents["webhook_notices"]
        assert incidents["webhook_notices"]["crawl_finished"] == 1, incidents["webhook_notices"]
        assert all(incidents["incident_checks"].values()), incidents["incident_checks"]
        (dlist,) = _summaries(sh.run_ok(block("variants"), timeout=600).output)
        assert dlist["stored"] == 100 and dlist["fields_wrong"] == 0, dlist
    finally:
        sh.close()
