"""``errors`` and ``report`` through the ``distcrawl`` entry point, against a known crawl on a
real Redis and a real SecantusDB: the groups listed (by site too), one shown with its first
occurrence or its body written to a file, the report as JSON and as an HTML page, with products
new / changed / unchanged / gone against the last crawl, and the findings."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis

from distcrawl.base.grouping import OTHER_TEMPLATE, group_id
from distcrawl.frontier.protocol.observe import GroupEntry, Limits, encode_delta
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.storage.observe import SnapshotWriter, snapshot_document

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")
BODY = b"<html><body><h1>Bad gateway</h1>\x1b[31m hostile </body></html>"


def _entry(site: str, kind: str, template: str, count: int) -> GroupEntry:
    return GroupEntry(
        group_id(site, kind, template),
        group_id("", kind, OTHER_TEMPLATE),
        site,
        kind,
        template,
        count,
        (f"http://{site}/p/1", f"http://{site}/p/2"),
        True,
    )


@pytest.fixture
def crawl(redis_url: str, mongo_uri: str) -> dict[str, Any]:
    """A crawl as two nodes left it: two error groups (one with its first occurrence in
    MongoDB), a site whose price fell, a finding, and products of this crawl and the last."""
    client = redis.Redis.from_url(redis_url)
    database = mongo_uri.rsplit("/", 1)[1].split("?")[0]
    try:
        store = FrontierStore(client, KEYS)
        run = store.claim_run("run-1", "n1")
        bad = _entry("a.test", "http", "HTTP 502 Bad Gateway", 7)
        slow = _entry("b.test", "download", "TimeoutError: took <n> s", 2)
        chunks = [(2, {"name": 2, "price": 2})] * 4 + [(2, {"name": 2})] * 4
        delta = encode_delta([bad, slow], {"a.test": chunks})
        # the node's stats: 12 answers, of which 9 product pages and 2 category pages parsed
        stats = {"response_received_count": 12, "item_scraped_count": 9,
                 "catalog/pages/product": 9, "catalog/pages/category": 2}  # fmt: skip
        store.heartbeat_observed("n1", json.dumps({"stats": stats}), delta, Limits(window=8))
        # the crawl-wide settings its first node recorded: the report judges with them
        client.hset(KEYS.config, "DISTCRAWL_QUALITY_WINDOW", "8")
        finding = {"site": "a.test", "field": "price", "message": "a.test: price on 0% ..."}
        store.record_finding("a.test\tprice", json.dumps(finding), run.started_ms)
    finally:
        client.close()
    writer = SnapshotWriter(mongo_uri, database)
    writer.put(
        snapshot_document(
            spider="catalog", run=run.id, group=bad.group, site="a.test", kind="http",
            template=bad.template, url="http://a.test/p/1", status=502,
            headers=[("X-Upstream", "db")], body=BODY, body_bytes=len(BODY) + 100,
            error="", node="n1", at=dt.datetime.now(dt.UTC),
        )
    )  # fmt: skip
    writer.close(30)
    assert writer.written == 1
    started = dt.datetime.fromtimestamp(run.started_ms / 1000, tz=dt.UTC)
    before, after = started - dt.timedelta(days=1), started + dt.timedelta(seconds=1)
    with pymongo.MongoClient(mongo_uri) as mongo:
        mongo[database]["products"].insert_many(
            [
                {"_id": "n", "first_seen": after, "last_seen": after, "changed_at": after},
                {"_id": "c", "first_seen": before, "last_seen": after, "changed_at": after},
                {"_id": "u", "first_seen": before, "last_seen": after, "changed_at": before},
                {"_id": "g", "first_seen": before, "last_seen": before, "changed_at": before},
            ]
        )
    return {"bad": bad, "slow": slow, "mongo": ["-s", f"MONGO_URI={mongo_uri}"]}


def test_errors_lists_the_groups_and_shows_one_with_its_first_occurrence(
    cli: Any, crawl: dict[str, Any], tmp_path: Path
) -> None:
    mongo, bad = crawl["mongo"], crawl["bad"]
    code, out, _ = cli("errors", "catalog", "--json", *mongo)
    listed = json.loads(out)
    assert code == 0 and [g["count"] for g in listed["groups"]] == [7, 2]
    first = listed["groups"][0]
    assert (first["id"], first["site"], first["kind"]) == (bad.group, "a.test", "http")
    assert first["snapshot"]["status"] == 502 and listed["groups"][1]["snapshot"] is None
    code, out, _ = cli("errors", "catalog", "--site", "b.test", "--json", *mongo)
    assert [g["site"] for g in json.loads(out)["groups"]] == ["b.test"]
    code, out, _ = cli("errors", "catalog", *mongo)
    assert code == 0 and "HTTP 502 Bad Gateway" in out and "2 error groups, 9 failures" in out

    # show, by the first digits of the id: the group, its headers and its body as text
    code, out, _ = cli("errors", "catalog", "show", bad.group[:6], *mongo)
    assert code == 0, out
    assert "status    502" in out and "header    X-Upstream: db" in out
    assert "<h1>Bad gateway</h1>" in out and "\x1b" not in out  # escapes shown, not run
    assert f"{len(BODY)} of {len(BODY) + 100} bytes (cut)" in out
    body = tmp_path / "first.html"
    code, out, _ = cli("errors", "show", bad.group, "--body", str(body), *mongo)
    assert code == 0 and body.read_bytes() == BODY and f"written to {body}" in out
    code, out, _ = cli("errors", "catalog", "show", bad.group, "--json", *mongo)
    assert json.loads(out)["snapshot"]["headers"] == [["X-Upstream", "db"]]

    code, _, err = cli("errors", "catalog", "show", "ffffffffffff", *mongo)
    assert code == 1 and "has no error group" in err
    code, _, err = cli("errors", "catalog", "show", *mongo)
    assert code == 2 and "show needs the group's id" in err


def test_report_as_json_and_as_an_html_page(
    cli: Any, crawl: dict[str, Any], tmp_path: Path
) -> None:
    mongo = crawl["mongo"]
    code, out, _ = cli("report", "catalog", "--json", *mongo)
    report = json.loads(out)
    assert code == 0 and report["run"] == "run-1" and report["state"] == "running"
    products = report["products"]
    assert {k: products[k] for k in ("new", "changed", "unchanged", "gone")} == {
        "new": 1,
        "changed": 1,
        "unchanged": 1,
        "gone": 1,
    }
    errors = report["errors"]
    assert (errors["groups"], errors["failures"]) == (2, 9)
    assert errors["failures_by_kind"] == {"http": 7, "download": 2}
    assert errors["by_group"][0]["snapshot"]["status"] == 502
    quality = report["quality"]["a.test"]
    assert quality["products"] == 16 and quality["shares"]["price"] == 0.5
    assert quality["window"]["shares"]["price"] == 0.0
    assert [f["field"] for f in report["findings"]] == ["price"]
    assert (report["responses"], report["pages"], report["products"]["scraped"]) == (12, 11, 9)
    assert report["pages_by_kind"] == {"category": 2, "product": 9}
    assert report["summary"].startswith("crawl catalog running: 11 pages, 9 products")
    assert "2 error groups (9 failures)" in report["summary"] and "1 finding" in report["summary"]

    page = tmp_path / "report.html"
    code, out, _ = cli("report", "catalog", "--html", str(page), *mongo)
    html = page.read_text()
    assert code == 0 and f"report written to {page}" in out
    assert html.startswith("<!doctype html>") and "HTTP 502 Bad Gateway" in html
    assert 'id="summary"' in html and "a.test: price on 0% ..." in html
    code, out, _ = cli("report", "catalog", *mongo)
    assert code == 0 and "Findings" in out and "Errors by group" in out
