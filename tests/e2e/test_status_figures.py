"""Each status figure against a crawl whose figures are known: from the demo shop's request log,
the nodes' own stats dumps and MongoDB. Two nodes under a global site rate, one killed -9 mid
crawl; then MongoDB out of reach; and a crawl in revisit mode, which never drains."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import (
    HEARTBEAT_TIMEOUT,
    Node,
    expected_skus,
    stats_of,
    stop_all,
    stored_products,
    wait_for,
)

from distcrawl.base.processes import free_port
from distcrawl.cli import main

pytestmark = pytest.mark.slow

SITE_RATE = 10.0
EARLIER = 7  # products an earlier crawl left in the collection


def status(redis_url: str, mongo_uri: str, capsys, *args: str) -> tuple[dict[str, Any], str]:
    """``status --json`` and the screen, one after the other."""
    common = ["-s", f"REDIS_URL={redis_url}", "-s", f"MONGO_URI={mongo_uri}",
              "-s", f"DISTCRAWL_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT}"]  # fmt: skip
    assert main(["status", "catalog", "--json", *args, *common]) == 0
    out = capsys.readouterr().out
    assert main(["status", "catalog", "--sample", "0", *common]) == 0
    return json.loads(out), capsys.readouterr().out


def _earlier_crawl(mongo_uri: str) -> None:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    old = [f"http://old.test/p/{i}" for i in range(EARLIER)]
    documents = [{"_id": url, "url": url, "name": "old", "last_seen": long_ago} for url in old]
    client.get_default_database()["products"].insert_many(documents)
    client.close()


def test_figures_of_a_crawl_with_a_site_rate_a_killed_node_and_mongodb_down(
    redis_url, mongo_uri, shop_factory, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the screen: every column, each row on one line
    _earlier_crawl(mongo_uri)
    shop = shop_factory(products=80, latency_ms=50)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {"DISTCRAWL_SITE_RATE": str(SITE_RATE)}
    nodes = [
        Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=name,
             settings=settings)
        for name in ("a", "b")
    ]  # fmt: skip
    try:
        # both live and leasing (their heartbeats publish the defaults they lease with): the
        # site's limit in force is the nodes' default, and says so
        seen: list[tuple[dict[str, Any], str]] = []

        def both_busy() -> bool:
            now, screen = status(redis_url, mongo_uri, capsys, "--sample", "0")
            seen.append((now, screen))
            return bool(now["site_defaults"]["nodes"] == 2 and now["sites"])

        assert wait_for(both_busy, 120, 0.5), seen[-1]
        running, screen = seen[-1]
        assert running["state"] == "running" and "running  2 live nodes" in screen, screen
        assert running["site_defaults"] == {"rate": SITE_RATE, "concurrency": 0, "nodes": 2}
        (site,) = running["sites"]
        assert (site["limit_rate"], site["limit_rate_from"]) == (SITE_RATE, "default"), site
        assert site["limit_concurrency"] is None and site["limit_concurrency_from"] is None
        assert site["allowed_rate"] == round(SITE_RATE * site["factor"], 2), site
        assert re.search(rf"127\.0\.0\.1\s+[\d,]+\s+{SITE_RATE:g} default\s", screen), screen
        assert f"DISTCRAWL_SITE_RATE {SITE_RATE:g}/s, DISTCRAWL_SITE_CONCURRENCY none" in screen

        assert wait_for(lambda: r.zcard("{catalog}:nodes") == 2 and _stored(mongo_uri) >= 20, 120)
        nodes[1].kill()  # kill -9: its counts stop at its last heartbeat
        assert nodes[0].wait() == 0  # drains once b's leases (if any) came back, crawled
    finally:
        stop_all(nodes)
    stored = stored_products(mongo_uri, shop)
    assert {sku for sku in stored if not sku.startswith("http://old.test/")} == expected_skus(shop)
    assert max(stored.values()) == 1, stored.most_common(3)

    # b's heartbeat ages past the timeout (a drained crawl may finish before: b held nothing)
    def b_dead() -> bool:
        now, _ = status(redis_url, mongo_uri, capsys, "--sample", "0")
        return any(n["node"] == "b" and n["state"] == "dead" for n in now["nodes"])

    assert wait_for(b_dead, 6 * HEARTBEAT_TIMEOUT, 1)
    done, screen = status(redis_url, mongo_uri, capsys)
    by_node = {n["node"]: n for n in done["nodes"]}
    # the header: the crawl's state and every node state, never "running" with no live node
    assert done["state"] == "drained"
    assert done["totals"]["nodes_by_state"] == {
        "live": 0, "dead": 1, "stopped": 1, "orphan": 0, "gone": 0
    }  # fmt: skip
    assert "drained  0 live, 1 dead, 1 stopped nodes" in screen, screen
    assert by_node["b"]["state"] == "dead"
    # the frontier, from the shop's own log: every page fetched is seen, nothing is left
    log = shop.request_log()
    pages = {e["path"] for e in log if e["path"] != "/robots.txt"}
    assert done["frontier"]["seen"] == len(pages)
    frontier = done["frontier"]
    assert (frontier["queued"], frontier["in_flight"], frontier["parked"]) == (0, 0, 0)
    assert done["dead_letters"]["total"] == 0 and done["eta_seconds"] == 0.0
    # this crawl's products apart from the collection's, which an earlier crawl shares
    products = len(shop.expected_product_urls())
    assert done["store"]["this_crawl"] == products
    assert done["store"]["in_collection"] == products + EARLIER
    assert re.search(rf"stored by this crawl\s+{products}\b", screen), screen
    assert re.search(rf"in the collection\s+{products + EARLIER}\b", screen), screen
    # a node that stopped cleanly: its row is its own final stats
    final = stats_of(nodes[0].log())
    assert by_node["a"]["responses"] == final["response_received_count"]
    assert by_node["a"]["products"] == final["item_scraped_count"]
    # responses: every answer, robots.txt too; pages parsed by kind: the pages only
    parsed = sum(done["pages_by_kind"].values())
    assert done["totals"]["responses"] >= parsed
    assert final["response_received_count"] == sum(
        v for k, v in final.items() if k.startswith("catalog/pages/")
    ) + final.get("robotstxt/response_count", 0)
    # the nodes' products beside this crawl's: equal, or the difference says why
    accounted = done["products_accounted"]
    assert accounted["counted_by_nodes"] == done["totals"]["products"]
    assert accounted["stored_by_this_crawl"] == products
    assert accounted["difference"] == products - done["totals"]["products"]
    if accounted["difference"] > 0:
        assert accounted["why"][0].startswith("node(s) b died: a node's counts are those of "
                                              "its last heartbeat")  # fmt: skip
        assert f"The nodes counted {done['totals']['products']:,} products; this crawl " \
            f"stored {products:,}: node(s) b died" in " ".join(screen.split())  # fmt: skip
    elif accounted["difference"] < 0:
        assert any("fetched again" in why for why in accounted["why"]), accounted

    # MongoDB out of reach: its figures say why instead of a bare "-"
    away = f"mongodb://127.0.0.1:{free_port()}/catalog?serverSelectionTimeoutMS=300"
    down, screen = status(redis_url, away, capsys)
    assert down["store"]["this_crawl"] is None and down["store"]["in_collection"] is None
    assert down["store"]["error"].startswith(f"MongoDB at {away}: ServerSelectionTimeoutError")
    assert down["products_accounted"]["why"] == [down["store"]["error"]]
    assert re.search(r"stored by this crawl\s+-\s+MongoDB at mongodb://127\.0\.0\.1:", screen)
    assert down["frontier"] == done["frontier"] and down["totals"] == done["totals"]


def _stored(mongo_uri: str) -> int:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
        return int(client.get_default_database()["products"].count_documents(
            {"last_seen": {"$gte": since}}
        ))  # fmt: skip
    finally:
        client.close()


def test_figures_of_a_continuous_crawl_in_revisit_mode(
    redis_url, mongo_uri, shop_factory, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    shop = shop_factory(products=15, change_interval=2, change_rate=0.3)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    node = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="revisiting",
        settings={"DISTCRAWL_REVISIT": "product:3s,listing:3s,category:1h,seed:1h",
                  "DISTCRAWL_CLOSE_WHEN_DRAINED": "0"},
    )  # fmt: skip
    try:
        # a page came back and answered 304 (the shop answers conditional requests)
        assert wait_for(lambda: any(e["status"] == 304 for e in shop.request_log()), 120, 0.5)
        now, screen = status(redis_url, mongo_uri, capsys, "--sample", "3")
        assert now["revisit"]["scheduled"] > 0
        assert now["state"] == "running" and not now["drained"]
        # a continuous crawl has no time to drain, and says what it has instead
        assert now["eta_seconds"] is None
        why = now["unreadable"]["eta_seconds"]
        assert why.startswith("continuous (revisit mode: it never drains): "), why
        assert "next revisit due " in why
        assert re.search(r"time to drain\s+continuous\s+continuous \(revisit mode", screen)
        # the 304s are responses, not pages parsed
        parsed = sum(now["pages_by_kind"].values())
        assert now["totals"]["responses"] >= parsed
        # the products this crawl saw (again, on a 304 too) are all the shop's
        assert now["store"]["this_crawl"] == now["store"]["in_collection"] == 15
    finally:
        node.terminate()
        try:
            node.wait(60)
        finally:
            stop_all([node])
