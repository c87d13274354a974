"""Revisit mode end to end: while revisits fall due and new products (new links) keep
arriving, real nodes never have more of the shop's requests in flight than its budget, as the
shop itself counts them."""

from __future__ import annotations

import time
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import HEARTBEAT_TIMEOUT, ShopClock, start_nodes, stop_all, wait_for

pytestmark = pytest.mark.slow

PRODUCTS = 60
BUDGET = 2  # DISTCRAWL_SITE_CONCURRENCY: requests of the site in flight on all nodes
SETTINGS = {
    "DISTCRAWL_REVISIT": "*:2s",
    "DISTCRAWL_SITE_CONCURRENCY": str(BUDGET),
    "DISTCRAWL_CLOSE_WHEN_DRAINED": "0",  # a continuous crawl: stopped by the test
    "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
    "CONCURRENT_REQUESTS": "8",  # each node alone would send 8 at once
}


def test_revisits_and_new_links_keep_within_the_site_budget(
    redis_server, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    r = redis.Redis.from_url(redis_server.url)
    r.flushall()
    far = time.time() + 10**6
    clock = ShopClock()
    # every 2 s a tenth of the products change and 3 new ones join the listings
    shop = shop_factory(
        clock=clock,
        products=PRODUCTS,
        latency_ms=40,
        change_interval=2.0,
        change_rate=0.1,
        change_add=3,
        change_cycles=4,
        change_start=far,
        conditional=True,
        tracking_params=False,
    )
    r.lpush("catalog:start_urls", shop.url)
    db: Any = pymongo.MongoClient(mongo_uri).get_default_database()
    db.products.delete_many({})
    nodes = start_nodes(
        ("a", "b"),
        redis_url=redis_server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings=SETTINGS,
    )
    try:
        assert wait_for(lambda: db.products.count_documents({}) >= PRODUCTS, 180), nodes[
            0
        ].log()[-3000:]
        assert shop.peak_in_flight() <= BUDGET
        shop.reset_peak_in_flight()
        since = time.time()
        clock.skew = far - time.time()  # the shop starts changing now
        wait_for(lambda: len(shop.changes()["added"]) >= 12, 60)
        added = {e["path"] for e in shop.changes()["added"]}

        def stored() -> set[str]:
            return {"/" + d["url"].split("/", 3)[3] for d in db.products.find({}, {"url": 1})}

        def revisited() -> int:
            return sum(1 for e in shop.request_log(since=since) if e["status"] == 304)

        # the new products were found and stored while the old pages kept coming back
        assert wait_for(lambda: added <= stored() and revisited() >= 2 * PRODUCTS, 180), (
            len(added - stored()),
            revisited(),
        )
        peak = shop.peak_in_flight()
        for node in nodes:
            node.terminate()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    # the budget held, and was used (two nodes, eight slots each: the budget is what stops them)
    assert peak == BUDGET
