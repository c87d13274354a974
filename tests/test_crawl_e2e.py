"""End to end: real `scrapy crawl catalog` processes, a real Redis, SecantusDB and demo shop."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pymongo
import pytest
import redis
from crawl_nodes import Node, assert_clean_log, stop_all, stored_urls
from frontier_state import KEYS, leases_left, queued

pytestmark = pytest.mark.slow

PROFILES = Path(__file__).resolve().parent.parent / "distcrawl" / "demo" / "profiles"


def lpush(redis_cli: Path, redis_url: str, *values: str) -> None:
    """Seed exactly as an operator would: the real redis-cli binary."""
    subprocess.run(
        [str(redis_cli), "-u", redis_url, "lpush", "catalog:start_urls", *values],
        check=True,
        capture_output=True,
    )


def test_two_nodes_store_every_product_exactly_once(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=300)
    lpush(redis_cli, redis_url, shop.url)
    nodes = [
        Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=f"n{i}")
        for i in (1, 2)
    ]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert Counter(urls).most_common(1)[0][1] == 1
    assert set(urls) == shop.expected_product_urls()
    fetched = Counter(e["path"] for e in shop.request_log() if e["path"] != "/robots.txt")
    assert max(fetched.values()) == 1, "a page was fetched twice"
    for node in nodes:
        assert_clean_log(node.log())
        assert "Spider closed (frontier_drained)" in node.log()
    r = redis.Redis.from_url(redis_url)
    assert queued(r) == 0
    assert not leases_left(r)


def test_plain_variant_with_a_site_profile(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=120, variant="plain")
    lpush(redis_cli, redis_url, shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="plain",
        env={"DISTCRAWL_SITE_PROFILES": str(PROFILES)},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert sorted(stored_urls(mongo_uri)) == sorted(shop.expected_product_urls())
    assert_clean_log(node.log())


def test_json_seeds_carry_priority_and_meta_and_bad_seeds_are_skipped(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=40)
    seed = json.dumps({"url": shop.url, "priority": 5000, "meta": {"seed_campaign": "xmas"}})
    lpush(redis_cli, redis_url, "not a url", "ftp://x.test/", '{"url": 1}', seed)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="seeds")
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    log = node.log()
    assert f"Seed accepted: {shop.url} (priority 5000)" in log
    assert log.count("Refused seed") == 3
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    rejected = [
        json.loads(x) for x in redis.Redis.from_url(redis_url).lrange(KEYS.rejected, 0, -1)
    ]
    assert sorted(r["reason"] for r in rejected) == ["bad_characters", "bad_scheme", "missing_url"]


def test_category_pages_leave_the_queue_before_product_pages(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=60, tracking_params=False)
    lpush(redis_cli, redis_url, shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="order",
        settings={"CONCURRENT_REQUESTS": 1, "DISTCRAWL_PREFETCH": 1},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    paths = [e["path"] for e in shop.request_log() if e["path"] != "/robots.txt"]
    kinds = [
        "product" if p.startswith("/p/") else "category" if p.count("/") == 3 else "other"
        for p in paths
    ]
    first_product = kinds.index("product")
    assert "category" not in kinds[first_product:], paths


def test_plain_variant_without_a_profile_is_crawled_completely(
    redis_url, mongo_uri, redis_cli, shop_factory, tmp_path
) -> None:
    """A shop the spider has never seen, with no structured data and no profile: heuristics."""
    shop = shop_factory(products=80, variant="plain")
    lpush(redis_cli, redis_url, shop.url)
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="noprof")
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert sorted(stored_urls(mongo_uri)) == sorted(shop.expected_product_urls())
    client = pymongo.MongoClient(mongo_uri)
    try:
        docs = list(client.get_default_database()["products"].find())
    finally:
        client.close()
    assert all(d["name"] and d.get("price") is not None and d.get("currency") for d in docs)
    assert all(len(d["category_path"]) == 2 for d in docs)
