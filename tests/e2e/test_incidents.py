"""``distcrawl demo --incidents --products 300 --json`` with 2 nodes: one shop's product pages
lose their price from what extraction reads after half its products, another's fail with a new
502 for a while. Every product is stored (those of the switched template without a price, as
the check expects of them), the crawl finds the fall of the price on that site, groups the new
failure with the snapshot of its first occurrence, and the webhook receives one notice of the
finding and one of the crawl's end although both nodes saw them; the nodes exit with
``EXIT_FINDINGS`` (a crawl with findings) or 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distcrawl.base.names import exits
from distcrawl.servers.embedded import stop_services

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_demo_incidents_are_found_grouped_and_notified_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "distcrawl.cli", "demo", "--incidents", "--products", "300"]
    cmd += ["--json", "--home", str(home), "--timeout", "600"]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        stop_services(home)  # a demo with --home leaves its servers running
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["nodes"] == 2 and summary["sites"] == 2
    assert summary["stored"] == summary["expected"] == 600, summary
    assert (summary["lost"], summary["duplicates"], summary["fields_wrong"]) == (0, 0, 0)
    incidents = summary["incidents"]
    switched = incidents["switched_site"]
    # the products served in the switched template are stored without a price, and said so
    assert incidents["switched_products"] >= 100
    assert incidents["stored_without_price"] == incidents["switched_products"]
    assert incidents["failed_first_requests"] == 15
    # one finding names that site and price
    [finding] = [f for f in summary["findings"] if f["site"] == switched]
    assert finding["field"] == "price" and finding["was"] > finding["share"]
    assert finding["message"].startswith(f"{switched}: price on ")
    # the new failure is a group of its own, with the first occurrence kept
    [group] = [g for g in summary["error_groups"] if g["template"] == "HTTP 502 Bad Gateway"]
    assert group["site"] == incidents["failing_site"] and group["count"] == 15
    assert group["snapshot"]["status"] == 502
    assert "Bad gateway" in group["snapshot"]["body_start"]
    assert ["X-Upstream", "catalog-db"] in group["snapshot"]["headers"]
    # one notice of each, although two nodes saw them
    notices = summary["webhook_notices"]
    assert notices["finding"] == 1 and notices["crawl_finished"] == 1, notices
    assert all(summary["incident_checks"].values()), summary["incident_checks"]
    exits_seen = set(summary["nodes_exit_statuses"])
    assert exits_seen <= {0, exits.FINDINGS} and exits.FINDINGS in exits_seen, exits_seen
    assert summary["report_summary"].endswith("1 finding")
