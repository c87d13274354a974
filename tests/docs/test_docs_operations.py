"""The operations pages' examples, in the order an operator would type them, on one crawl of
the demo shop: status, watch, dead letters, the dashboard, seeds, journals, pause / resume /
reset, the function library."""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.request
from pathlib import Path

import pytest
from docshell import Shell, block, free_port, wait_until

from distcrawl.node.items import Product
from distcrawl.storage.documents import make_record
from distcrawl.storage.journal import Journal

pytestmark = pytest.mark.slow


def _json_line(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


def _dashboard_read_redis(url: str) -> bool:
    """/metrics answers, from a read of Redis (its first read takes a moment)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return b"distcrawl_up 1.0" in response.read()
    except OSError:
        return False


def _journal(folder: Path, shop: str) -> None:
    """A journal as a node leaves it when MongoDB is down: two products, fsync'd."""
    now = dt.datetime.now(dt.UTC)
    journal = Journal(folder, database="catalog", collection="products")
    items = [
        Product(url=f"{shop}/p/journaled-{i}.html", name=f"Journaled {i}", price="9.99",
                currency="USD", site="127.0.0.1")
        for i in (1, 2)
    ]  # fmt: skip
    journal.append([make_record(item, ("url",), history=20, now=now) for item in items])
    journal.close()


def test_operations_examples(tmp_path: Path) -> None:
    shop_port, web_port = str(free_port()), str(free_port())
    sh = Shell(tmp_path / "work", ports={"8000": shop_port, "8470": web_port})
    try:
        sh.run_ok(block("ops-crawl"), timeout=400)

        out = sh.run_ok(block("ops-status")).output
        status = _json_line(out)
        assert status["drained"], status
        assert status["dead_letters"]["total"] == 3, status["dead_letters"]
        assert re.search(r"stored products\s+97\b", out), out

        watch = sh.run_ok(block("ops-watch"), timeout=120).output
        assert len([ln for ln in watch.splitlines() if "catalog" in ln]) == 3, watch

        dead = sh.run_ok(block("ops-deadletters")).output
        assert "http_500" in dead, dead
        assert re.search(r"\b3\b", dead), dead

        # the three products' 500s, each try: one group, its first occurrence kept
        errors = sh.run_ok(block("ops-errors")).output
        assert "HTTP 500 Internal Server Error" in errors, errors
        assert "status    500" in errors and "written to first.html" in errors, errors
        assert (sh.workdir / "first.html").stat().st_size > 0
        report = sh.run_ok(block("ops-report")).output
        assert "crawl catalog finished in" in report and '"crawl": "catalog"' in report, report
        assert "HTTP 500" in (sh.workdir / "report.html").read_text()

        # the dashboard runs until stopped: as in a second terminal
        sh.run_ok(block("ops-web").rstrip() + " > web.out 2>&1 & web=$!\n")
        assert wait_until(
            lambda: _dashboard_read_redis(f"http://127.0.0.1:{web_port}/metrics"), 120
        ), sh.stderr() + (sh.workdir / "web.out").read_text(errors="replace")
        read = sh.run_ok(block("ops-web-read")).output
        assert re.search(r"^distcrawl_up 1\.0$", read, re.M), read
        assert '"crawl": "catalog"' in read, read
        sh.run_ok("kill $web\nwait $web || true\n")

        seeded = sh.run_ok(block("ops-seed")).output
        assert seeded.strip(), seeded
        refused = sh.run(block("ops-seed-refused"))
        assert len(refused.errors) == 1, refused  # exit status 1: a seed was refused
        assert "bad_scheme" in refused.output + sh.stderr(), refused

        sh.run_ok(block("ops-deadletters-purge"))
        assert "distcrawl_frontier_" in sh.run_ok(block("ops-functions")).output

        _journal(
            sh.workdir / ".distcrawl" / "journal" / "catalog.products",
            f"http://127.0.0.1:{shop_port}",
        )
        replayed = sh.run_ok(block("journal")).output
        assert re.search(r"replayed 2 products", replayed + sh.stderr()), replayed

        control = sh.run_ok(block("ops-control")).output
        assert "exit status 2: nothing deleted" in control, control
        after = _json_line(sh.run_ok("distcrawl status catalog --json --sample 0\n").output)
        assert after["frontier"]["queued"] == 0 and after["dead_letters"]["total"] == 0, after
    finally:
        sh.close()
