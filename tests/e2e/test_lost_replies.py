"""A node whose Redis replies are lost after the commands ran (the fault proxy drops them, as
a connection reset after Redis answered would) finishes the crawl: every product stored once,
nothing left in the frontier."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from crawl_nodes import Node, assert_each_product_once
from frontier_state import KEYS

from distcrawl.demo.server import DemoShop
from distcrawl.frontier.store import FrontierStore
from distcrawl.servers.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.slow

#: seconds a 60-product crawl may take on a loaded machine
CRAWL_TIMEOUT = 180.0


def test_a_node_whose_seed_take_reply_is_lost_crawls_its_seed(
    redis_url: str, mongo_uri: str, shop_factory: Callable[..., DemoShop], tmp_path: Path
) -> None:
    shop = shop_factory(products=60)
    direct = redis.Redis.from_url(redis_url)
    direct.lpush(KEYS.start_urls, shop.url)
    with FaultProxy(redis_url) as proxy:
        # the take moves the seed into the node's taken list; the node never hears of it
        lost = proxy.add(Fault("drop", match=("FCALL distcrawl_*_take_seeds",), count=1))
        node = Node(redis_url=proxy.url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="n1")
        assert node.wait(CRAWL_TIMEOUT) == 0, node.log()[-3000:]
    assert lost.hits == 1
    assert_each_product_once(mongo_uri, shop)
    assert FrontierStore(direct, KEYS).drained() == [0, 0, 0, 0, 0]
    assert "Seed taken again" in node.log()
    direct.close()
