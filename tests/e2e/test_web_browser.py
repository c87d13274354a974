"""The dashboard in a real headless Chromium (the system's, driven by Playwright) while a real
``distcrawl demo --web`` crawl runs: it loads without console errors, its charts and counters
move, it lists both nodes, pause and resume work from the page with the token and are refused
without it, hostile text from the crawl shows as text, and /metrics agrees with
``scrapy status catalog --json``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.servers.embedded import stop_services
from distcrawl.web.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "web-test-token-of-the-browser"
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_SEED = "javascript:alert(2)//<script>alert(3)</script>"
HOSTILE_URL = "http://127.0.0.1/<script>alert(4)</script>"
PAUSED_KEY = "{catalog}:paused"
KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")

pytestmark = pytest.mark.slow


def chromium_path() -> str | None:
    for name in (os.environ.get("DISTCRAWL_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (found := shutil.which(name)):
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    return path


def wait_for(check: Any, what: str, timeout: float = 120.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


class Demo:
    """``distcrawl demo --web`` in a subprocess; its stderr names the URLs of its services."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.log = tmp_path / "demo.err"
        env = dict(os.environ, DISTCRAWL_WEB_TOKEN=TOKEN)
        cmd = [sys.executable, "-m", "distcrawl.cli", "demo", "--web", "--web-port", "0"]
        # slow enough that the crawl is still on while the page is driven: 2 requests at a
        # time per node, 250 ms a page
        cmd += ["--products", "400", "--latency", "250", "--json", "--home", str(self.home)]
        cmd += ["-s", "CONCURRENT_REQUESTS=2", "--timeout", "900"]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self.log.open("w"), text=True
        )
        text = wait_for(self._dashboard_line, "the demo to print its dashboard URL", 180)
        self.url = re.search(r"dashboard (http://\S+)", text)[1]  # type: ignore[index]
        self.redis_url = re.search(r"redis (redis://\S+)", text)[1]  # type: ignore[index]
        self.mongo_uri = re.search(r"mongodb (mongodb://\S+)", text)[1]  # type: ignore[index]

    def _dashboard_line(self) -> str | None:
        text = self.log.read_text()
        if self.proc.poll() is not None:
            raise AssertionError(f"the demo exited early ({self.proc.returncode}):\n{text}")
        return text if "dashboard http" in text else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            # Ctrl-C, not SIGTERM: the demo's clean-up runs and stops its nodes (SIGTERM would
            # end the demo at once and leave them running)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        stop_services(self.home)  # started with --home: the demo leaves them running


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    run = Demo(tmp_path)
    try:
        yield run
    finally:
        run.stop()


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url + "metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def status_json(redis_url: str) -> dict[str, Any]:
    env = dict(os.environ, REDIS_URL=redis_url)
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "status", "catalog", "--json", "--no-store"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def metrics_match_status(url: str, redis_url: str) -> list[str] | None:
    """The differences between /metrics and ``scrapy status --json`` (None when they agree)."""
    status = status_json(redis_url)
    values = metrics(url)
    frontier, totals = status["frontier"], status["totals"]
    want = {
        ("distcrawl_frontier_queued_requests", ()): frontier["queued"],
        ("distcrawl_frontier_parked_requests", ()): frontier["parked"],
        ("distcrawl_frontier_in_flight_requests", ()): frontier["in_flight"],
        ("distcrawl_frontier_backlog_requests", ()): frontier["backlog"],
        ("distcrawl_frontier_seen_urls", ()): frontier["seen"],
        ("distcrawl_frontier_rejected_entries", ()): frontier["rejected"],
        ("distcrawl_responses_total", ()): totals["responses"],
        ("distcrawl_items_total", ()): totals["products"],
        ("distcrawl_nodes", (("state", "live"),)): totals["live_nodes"],
        ("distcrawl_nodes", (("state", "dead"),)): totals["dead_nodes"],
        ("distcrawl_paused", ()): int(status["paused"]),
    }
    for kind, n in frontier["queued_by_kind"].items():
        want[("distcrawl_frontier_requests", (("kind", kind),))] = n
    for node in status["nodes"]:
        want[("distcrawl_node_responses_total", (("node", node["node"]),))] = node["responses"]
        want[("distcrawl_node_items_total", (("node", node["node"]),))] = node["products"]
    dead = sum(v for (name, _), v in values.items() if name == "distcrawl_dead_letters")
    diffs = [
        f"{k}: metrics {values.get(k)} status {v}" for k, v in want.items() if values.get(k) != v
    ]
    if dead != status["dead_letters"]["total"]:
        diffs.append(f"dead letters: metrics {dead} status {status['dead_letters']['total']}")
    return diffs or None


def _count(text: str) -> int:
    digits = text.replace(",", "")
    return int(digits) if digits.isdigit() else 0


def _console_problem(message: Any) -> str | None:
    """A console error, except Chromium's note on the refused pauses this test asks for."""
    if message.type != "error":
        return None
    if message.location.get("url", "").endswith("/api/pause") and "401" in message.text:
        return None
    return f"{message.text} ({message.location.get('url')})"


def test_dashboard_in_chromium_during_a_demo_crawl(
    chromium: str, demo: Demo, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    r = redis.Redis.from_url(demo.redis_url)
    problems: list[str | None] = []
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1700})
            page.on("console", lambda m: problems.append(_console_problem(m)))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(demo.url)

            # both nodes, and counters and charts that move with the crawl
            wait_for(
                lambda: (
                    {"demo-node-1", "demo-node-2"}
                    <= set(page.locator("#nodes-body td:first-child").all_inner_texts())
                ),
                "both nodes in the node list",
            )
            seen = page.inner_text("#seen")
            points = int(page.get_attribute("#chart-frontier", "data-points") or 0)
            picture = page.evaluate("document.querySelector('#chart-rates canvas').toDataURL()")
            wait_for(lambda: page.inner_text("#seen") != seen, "the seen URLs to change")
            wait_for(
                lambda: int(page.get_attribute("#chart-frontier", "data-points") or 0) > points + 2,
                "the frontier chart to get new points",
            )
            wait_for(
                lambda: (
                    page.evaluate("document.querySelector('#chart-rates canvas').toDataURL()")
                    != picture
                ),
                "the rates chart to redraw",
            )
            wait_for(
                lambda: page.inner_text("#responses-rate") not in ("-", "0"), "a response rate"
            )
            wait_for(
                lambda: _count(page.inner_text("#stored")) >= 40,
                "40 products stored, for a screenshot mid-crawl",
            )
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            print("screenshot:", tmp_path / "dashboard.png")

            # pause: refused without the token and with a wrong one, done with it
            for token, code in (("", 401), ("not-the-token", 401), (TOKEN, 200)):
                page.fill("#token", token)
                with page.expect_response("**/api/pause") as answer:
                    page.click("#pause")
                assert answer.value.status == code
                if code != 200:
                    wait_for(lambda: "refused" in page.inner_text("#action-msg"), "a refusal")
                    assert "wrong or missing token" in page.inner_text("#action-msg")
                    assert not r.exists(PAUSED_KEY)
            wait_for(lambda: page.inner_text("#action-msg").startswith("done"), "the pause")
            assert r.exists(PAUSED_KEY)
            wait_for(lambda: page.inner_text("#state") == "paused", "the paused badge")

            # while paused, the nodes finish what they hold; then /metrics and status agree
            wait_for(lambda: page.inner_text("#in-flight") == "0", "in flight to drop to 0")

            # the shop answers a 503 (fed back as the nodes feed it back): its shared rate is
            # cut, and the site's row says why, by how much and until when, as status does
            store = FrontierStore(r, KEYS)
            budget = SiteBudget(recovery=3600)  # worn off so slowly that it reads 50% here
            store.sync("browser-test", feedback=[("127.0.0.1", 0, 1, 0)], budget=budget)
            (site,) = [s for s in status_json(demo.redis_url)["sites"] if s["cut"]]
            assert site["site"] == "127.0.0.1" and site["cut"]["cause"] == "throttled"
            # (it wears off a little while status starts: at most 0.5 + 0.5 * seconds / 3600)
            assert 0.5 <= site["cut"]["factor"] < 0.6 and site["cut"]["wears_off_in_s"] > 0
            row = wait_for(
                lambda: next(
                    (
                        text
                        for text in page.locator("#sites-body tr").all_inner_texts()
                        if "throttled" in text
                    ),
                    None,
                ),
                "the cut in the site's row",
            )
            assert "127.0.0.1" in row and re.search(r"rate at 5\d%, full again within", row)
            cut_metric = (
                "distcrawl_site_cut_remaining_seconds",
                (("cause", "throttled"), ("site", "127.0.0.1")),
            )
            assert metrics(demo.url).get(cut_metric, 0) > 0
            wait_for(lambda: metrics_match_status(demo.url, demo.redis_url) is None, "agreement")
            with urllib.request.urlopen(demo.url + "metrics", timeout=30) as resp:
                families = {f.name for f in text_string_to_metric_families(resp.read().decode())}
            assert families == set(METRICS), set(METRICS) ^ families

            # hostile text from the crawl: a product's name and a refused seed
            mongo: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(demo.mongo_uri)
            try:
                mongo.get_default_database("catalog")["products"].insert_one(
                    {
                        "_id": "hostile",
                        "url": 'http://127.0.0.1/p/"><b>x</b>',
                        "name": HOSTILE_NAME,
                        "last_seen": datetime.now(UTC) + timedelta(days=1),  # shown first
                    }
                )
            finally:
                mongo.close()
            page.click("#resume")
            wait_for(lambda: page.inner_text("#state") != "paused", "the crawl to resume")
            assert not r.exists(PAUSED_KEY)
            r.lpush("catalog:start_urls", HOSTILE_SEED)  # as redis-cli lpush would
            dead = {"url": HOSTILE_URL, "reason": "http_503", "attempts": 3, "status": 503}
            r.hset(KEYS.shard(0).dead, "hostile-dead", json.dumps(dead))
            page.fill("#seeds", HOSTILE_SEED)
            page.click("#seed")
            wait_for(lambda: "refused" in page.inner_text("#action-msg"), "the seed refusal")
            assert HOSTILE_SEED in page.inner_text("#action-msg")
            wait_for(lambda: HOSTILE_NAME in page.inner_text("#products-body"), "the product")
            wait_for(lambda: HOSTILE_SEED in page.inner_text("#rejected-body"), "the seed")
            wait_for(lambda: HOSTILE_URL in page.inner_text("#dead-body"), "the dead letter")
            wait_for(lambda: "http_503" in page.inner_text("#dead-reasons"), "its reason")
            page.screenshot(path=str(tmp_path / "dashboard-hostile.png"), full_page=True)
            assert page.locator("img").count() == 0
            assert page.locator("body script").count() == 2  # uPlot and the dashboard's own
            assert (
                page.locator("#products-body b, #action-msg script, #dead-body script").count() == 0
            )
        finally:
            browser.close()
        assert dialogs == []
        assert [p for p in problems if p] == []

    # the crawl goes on to the end, with the dashboard's pause in the middle
    demo.proc.wait(timeout=900)
    assert demo.proc.stdout is not None
    summary = json.loads(demo.proc.stdout.read())
    assert demo.proc.returncode == 0, summary
    assert summary["missing"] == 0 and summary["duplicates"] == 0
    r.close()


HOSTILE_TEMPLATE = "ValueError: <img src=x onerror=alert(6)> at evil.py:1 in parse"
HOSTILE_BODY = b"<html><script>alert(7)</script><h1>hostile</h1></html>"


def _hostile_group(redis_url: str, mongo_uri: str) -> str:
    """A group whose template and first occurrence are hostile markup, as a crawled site
    could make them (an exception quoting the page, the page itself)."""
    from distcrawl.base.grouping import OTHER_TEMPLATE, group_id
    from distcrawl.frontier.protocol.observe import GroupEntry, Limits, encode_delta
    from distcrawl.storage.observe import SnapshotWriter, snapshot_document

    gid = group_id("127.0.0.9", "callback", HOSTILE_TEMPLATE)
    entry = GroupEntry(
        gid, group_id("", "callback", OTHER_TEMPLATE), "127.0.0.9", "callback",
        HOSTILE_TEMPLATE, 1, ("http://127.0.0.9/<b>x</b>",), True,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    try:
        store = FrontierStore(client, KEYS)
        store.heartbeat_observed("browser", "{}", encode_delta([entry], {}), Limits())
        run = store.read_run()
        assert run is not None
    finally:
        client.close()
    writer = SnapshotWriter(mongo_uri, "catalog")
    writer.put(
        snapshot_document(
            spider="catalog", run=run.id, group=gid, site="127.0.0.9", kind="callback",
            template=HOSTILE_TEMPLATE, url="http://127.0.0.9/<script>", status=200,
            headers=[("X-Evil", "<script>alert(8)</script>")], body=HOSTILE_BODY,
            body_bytes=len(HOSTILE_BODY), error="Traceback: <script>alert(9)</script>",
            node="browser", at=datetime.now(UTC),
        )
    )  # fmt: skip
    writer.close(30)
    assert writer.written == 1
    return gid


def test_error_groups_and_findings_in_chromium_after_a_demo_with_incidents(
    chromium: str, tmp_path: Path
) -> None:
    """The dashboard of a crawl that ran ``demo --incidents``: its error groups (the new 502
    with a link to its first occurrence's page, the extraction misses of the switched site),
    its finding; a group's page shows status, headers and body as text, hostile ones too."""
    from playwright.sync_api import sync_playwright

    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "distcrawl.cli", "demo", "--incidents", "--products", "300"]
    cmd += ["--json", "--home", str(home)]
    web = None
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        redis_url = re.search(r"redis (redis://\S+)", done.stderr)[1]  # type: ignore[index]
        mongo_uri = re.search(r"mongodb (mongodb://\S+)", done.stderr)[1]  # type: ignore[index]
        hostile = _hostile_group(redis_url, mongo_uri)
        env = dict(os.environ, REDIS_URL=redis_url, MONGO_URI=mongo_uri)
        web_log = tmp_path / "web.out"
        web = subprocess.Popen(
            [sys.executable, "-m", "distcrawl.cli", "web", "catalog", "--port", "0"],
            cwd=ROOT, env=env, stdout=web_log.open("w"), stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        url = wait_for(
            lambda: (m := re.search(r"at (http://\S+/) ", web_log.read_text())) and m[1],
            "the dashboard's URL",
        )
        problems: list[str | None] = []
        dialogs: list[str] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1700})
                page.on("console", lambda m: problems.append(_console_problem(m)))
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.goto(url)
                finding = wait_for(
                    lambda: "price on" in (text := page.inner_text("#findings-body")) and text,
                    "the finding",
                )
                assert re.search(r"127\.0\.0\.1: price on \d+% of the last \d+ products", finding)
                rows = wait_for(
                    lambda: [
                        t for t in page.locator("#groups-body tr").all_inner_texts() if "\t" in t
                    ],
                    "the error groups",
                )
                [bad] = [row for row in rows if "HTTP 502 Bad Gateway" in row]
                assert "127.0.0.2" in bad and "snapshot" in bad
                assert any("product page without price" in row for row in rows)
                assert any(HOSTILE_TEMPLATE in row for row in rows)  # as text
                page.screenshot(path=str(tmp_path / "dashboard-errors.png"), full_page=True)

                # the 502's first occurrence: its page, status, headers and body as text
                link = page.locator("#groups-body tr", has_text="HTTP 502").locator("a.snapshot")
                link.click()
                page.wait_for_selector("#snapshot-facts")
                facts = page.inner_text("#snapshot-facts")
                assert "502" in facts and "127.0.0.2" in facts
                assert "catalog-db" in page.inner_text("#snapshot-headers")
                assert "Bad gateway" in page.inner_text("#snapshot-body")

                # a hostile group's page: every value is text, nothing runs
                page.goto(url + "errors/" + hostile)
                page.wait_for_selector("#snapshot-body")
                assert "<script>alert(7)</script>" in page.inner_text("#snapshot-body")
                assert HOSTILE_TEMPLATE in page.inner_text("#group-facts")
                assert page.locator("script, img").count() == 0
                with urllib.request.urlopen(url + f"errors/{hostile}/body", timeout=30) as got:
                    assert got.read() == HOSTILE_BODY
                    assert got.headers["Content-Type"].startswith("text/plain")
                    assert "attachment" in got.headers["Content-Disposition"]
                values = metrics(url)
                assert values[("distcrawl_findings", ())] == 1
                assert values[("distcrawl_error_groups", (("kind", "http"),))] >= 1
                assert values[("distcrawl_error_group_events_total", (("kind", "http"),))] >= 15
            finally:
                browser.close()
        assert dialogs == []
        assert [p for p in problems if p] == []
    finally:
        if web is not None:
            web.send_signal(signal.SIGINT)
            try:
                web.wait(timeout=30)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait()
        stop_services(home)
