"""A spider passing a ``scrapy.Item`` in meta and a dataclass and an attrs object in cb_kwargs
crawls on two nodes, one killed mid-crawl: every product is stored once, and every product page
got its items back as their classes."""

from __future__ import annotations

import re

import pytest
import redis
from crawl_nodes import HEARTBEAT_TIMEOUT, Node, assert_each_product_once, stop_all, stored_urls
from crawl_nodes import wait_for as wait_until
from frontier_state import leased
from probe_spiders.items_spider import ITEM_CLASSES

from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow

SPIDER = "catalog_items"
KEYS = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")


def test_items_in_meta_and_cb_kwargs_on_two_nodes_one_killed(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=120, latency_ms=150)
    r = redis.Redis.from_url(redis_url)
    r.lpush(f"{SPIDER}:start_urls", shop.url)
    settings = {
        "SPIDER_MODULES": "distcrawl.node.spiders,probe_spiders",
        "DISTCRAWL_ITEM_CLASSES": ITEM_CLASSES,
        "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "CONCURRENT_REQUESTS": "4",
    }

    def node(name: str) -> Node:
        return Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=name,
            spider=SPIDER,
            settings=settings,
        )

    victim, survivor = node("victim"), node("survivor")
    try:
        # killed while it holds leases of product pages, their items in flight with them
        assert wait_until(lambda: len(stored_urls(mongo_uri)) >= 10, 120), victim.log()[-2000:]
        assert wait_until(lambda: leased(r, "victim", KEYS) > 0, 60), victim.log()[-2000:]
        victim.kill()
        assert survivor.wait() == 0, survivor.log()[-3000:]
    finally:
        stop_all([victim, survivor])
    assert_each_product_once(mongo_uri, shop)
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    logs = victim.log() + survivor.log()
    assert "Cannot queue" not in logs and "Refused queue entry" not in logs
    assert "AssertionError" not in logs
    assert "Recovered" in survivor.log()
    # a product page whose items came back otherwise raised, and its product is not stored
    checked = re.findall(r"'items_probe/checked': (\d+)", survivor.log())
    assert checked and int(checked[-1]) > 0
