"""The two entry points of an operator tool (``scrapy X`` and ``distcrawl X``), the dashboard's
command registered for both."""

from __future__ import annotations

import json
import subprocess
import sys

from fixtures_cli import ROOT, distcrawl_in, scrapy_command

from distcrawl.frontier.store import FrontierKeys

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


def test_scrapy_seed_and_status_entry_points(redis_url, r) -> None:
    done = scrapy_command(
        redis_url, "seed", "catalog", "--priority", "9", "https://shop.test/", "x:y"
    )
    assert done.returncode == 1, done.stderr
    assert "refused 'x:y'" in done.stderr
    assert json.loads(r.lindex(KEYS.start_urls, 0)) == {"url": "https://shop.test/", "priority": 9}
    done = scrapy_command(redis_url, "status", "catalog", "--json", "--sample", "0", "--no-store")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["frontier"]["start_list"] == 1
    listing = scrapy_command(redis_url, "-h")
    for command in ("status", "seed", "control", "deadletters"):
        assert command in listing.stdout


def test_the_dashboards_command_answers_help_on_both_entry_points(redis_url) -> None:
    # scrapy finds it through the scrapy.commands entry point, distcrawl through its table
    for done in (scrapy_command(redis_url, "web", "--help"), distcrawl_in(ROOT, "web", "--help")):
        assert done.returncode == 0, done.stderr
        assert "--host" in done.stdout and "--port" in done.stdout, done.stdout
    listing = scrapy_command(redis_url, "-h")
    assert "Serve the live dashboard and Prometheus /metrics" in listing.stdout


def test_the_command_line_and_the_dashboard_import_neither_the_other() -> None:
    code = (
        "import sys, distcrawl.commands.status, distcrawl.commands.deadletters, "
        "distcrawl.commands.control, distcrawl.commands.seed; "
        "assert not [m for m in sys.modules if m.startswith('distcrawl.web')], sys.modules; "
        "import distcrawl.web.command, distcrawl.web.app; "
        "assert 'distcrawl.commands.deadletters' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
