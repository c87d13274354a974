"""Revisit mode end to end: a product that vanished from every listing is marked ``gone_at``
even though its page still answers 200, and no product that only moved between listing pages
is."""

from __future__ import annotations

import time
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import HEARTBEAT_TIMEOUT, ShopClock, start_nodes, stop_all, wait_for

pytestmark = pytest.mark.slow

PRODUCTS = 60
REMOVED_PER_EPOCH = 2
EPOCHS = 3
SETTINGS = {
    "DISTCRAWL_REVISIT": "*:3s",
    "DISTCRAWL_CLOSE_WHEN_DRAINED": "0",  # a continuous crawl: stopped by the test
    "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
    "CONCURRENT_REQUESTS": "4",
}


def test_products_in_no_listing_are_marked_gone(
    redis_server, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    r = redis.Redis.from_url(redis_server.url)
    r.flushall()
    far = time.time() + 10**6
    clock = ShopClock()
    # removed products keep answering 200 as last published: only the listings drop them
    shop = shop_factory(
        clock=clock,
        products=PRODUCTS,
        latency_ms=10,
        change_interval=3.0,
        change_remove=REMOVED_PER_EPOCH,
        change_cycles=EPOCHS,
        change_start=far,
        gone_status=200,
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
        clock.skew = far - time.time()  # epoch 0 now: removals every 3 s, three times
        removed = EPOCHS * REMOVED_PER_EPOCH
        wait_for(lambda: len(shop.changes()["removed"]) >= removed, 60)
        gone_paths = {e["path"] for e in shop.changes()["removed"]}
        assert len(gone_paths) == removed

        def marked() -> set[str]:
            docs = db.products.find({"gone_at": {"$exists": True}}, {"url": 1})
            return {"/" + d["url"].split("/", 3)[3] for d in docs}

        assert wait_for(lambda: marked() >= gone_paths, 180), (marked(), gone_paths)
        # the shop never said so: every answer to a removed product's page was a 200 or 304
        log = shop.request_log()
        assert not any(e["status"] in (404, 410) for e in log if e["path"] in gone_paths)
        # two more visits of every other page: products that moved between listing pages stay
        # live, and the removed ones stay gone
        since = time.time()
        pages = {e["path"] for e in log if not e["path"].startswith(("/p/", "/robots"))}

        def visits() -> dict[str, int]:
            counts = dict.fromkeys(pages, 0)
            for e in shop.request_log(since=since):
                if e["path"] in counts:
                    counts[e["path"]] += 1
            return counts

        assert wait_for(lambda: min(visits().values()) >= 2, 120), visits()
        assert marked() == gone_paths
        for node in nodes:
            node.terminate()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    # the unlisted hash holds the removed products only, and they stay gone
    unlisted = {k.decode().split("/", 3)[3] for k in r.hkeys("{catalog}:unlisted")}
    assert unlisted == {p.lstrip("/") for p in gone_paths}
    docs = {d["url"].split("/", 3)[3]: d for d in db.products.find({})}
    assert all("gone_at" in docs[p.lstrip("/")] for p in gone_paths)
    logs = "".join(n.log() for n in nodes)
    assert "freshness/unlisted" in logs and "revisit_scraped_count" in logs
    assert "is in no listing any more" in logs
