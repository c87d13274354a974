"""A node of the README's five-minute start that begins before any seed waits for one (the
README's lines themselves are run by the docs walk, tests/docs/test_walk.py)."""

from __future__ import annotations

from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import Node, wait_for


@pytest.mark.slow
def test_a_node_that_closes_when_drained_waits_for_the_first_seed(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=20)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="early")
    try:
        assert wait_for(
            lambda: (
                node.log_file.exists() and "waits for the first seed" in node.log_file.read_text()
            ),
            timeout=120,
        ), "the node never said it waits for a seed"
        assert node.proc.poll() is None  # still running, not drained
        redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
        assert node.wait() == 0
        client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
        stored = client.get_default_database()["products"].count_documents({})
        client.close()
        assert stored == 20
    finally:
        node.kill()
