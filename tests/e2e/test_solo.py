"""Solo mode on real nodes: a node alone in a crawl it began hands what it finds to Scrapy from
memory; a node that joins mid-crawl ends it, and each URL is still fetched once; a solo node
killed mid-crawl loses nothing."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

import frontier_state
import pytest
import redis
from crawl_nodes import (
    HEARTBEAT_TIMEOUT,
    Node,
    assert_each_product_once,
    stats_of,
    stop_all,
    stored_urls,
    wait_for,
)
from frontier_state import KEYS, delayed, leases_left, payloads, queued

pytestmark = pytest.mark.slow

#: the catalog spider records its seeds' fingerprints, which rules solo mode out: these nodes
#: follow Scrapy's rule instead (a start URL is dont_filter and marks nothing seen)
SOLO_SETTINGS = {
    "DISTCRAWL_RECORD_DONT_FILTER": "False",
    "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
    "CONCURRENT_REQUESTS": "4",
}


def node(name: str, redis_url: str, mongo_uri: str, tmp_path) -> Node:  # type: ignore[no-untyped-def]
    return Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id=name,
        settings=SOLO_SETTINGS,
    )


def solo_node(name: str, redis_url: str, mongo_uri: str, shop, tmp_path) -> Node:  # type: ignore[no-untyped-def]
    """A node seeded with the shop, once it has written leases of its own (it is solo)."""
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    started = node(name, redis_url, mongo_uri, tmp_path)
    try:
        assert wait_for(lambda: own_leases_written(r, name, started.log()), 60), started.log()[
            -2000:
        ]
    except BaseException:
        started.kill()
        raise
    return started


def frontier_left(r: redis.Redis) -> dict[str, int]:
    return {
        "queued": queued(r, KEYS),
        "delayed": delayed(r, KEYS),
        "leased": sum(r.hlen(k) for k in leases_left(r, KEYS)),
        "payloads": payloads(r, KEYS),
        "seeding": sum(r.llen(k) for k in r.keys(KEYS.seeds.taken("*")))
        + r.llen(KEYS.seeds.returned),
    }


def own_leases_written(r: redis.Redis, name: str, log: str) -> bool:
    return "solo mode" in log and frontier_state.leased(r, name) > 0


def fetched_twice(shop) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Pages the shop served more than once, the seed aside (a start URL is dont_filter, as on
    Scrapy: a link back to it fetches it again) and robots.txt."""
    counts = Counter(e["path"] for e in shop.request_log() if e["method"] == "GET")
    return {path: n for path, n in counts.items() if n > 1 and path not in ("/", "/robots.txt")}


def test_a_node_joining_a_solo_node_mid_crawl_ends_solo_mode_and_no_url_is_fetched_twice(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    # the shop answers slowly until the second node has joined, so that the first cannot finish
    # the crawl alone however long the second takes to start on a loaded machine
    shop = shop_factory(products=160, latency_ms=3000)
    r = redis.Redis.from_url(redis_url)
    nodes = [solo_node("first", redis_url, mongo_uri, shop, tmp_path)]
    try:
        # the first node has fetched a product page, found by a page it fetched alone: it
        # handed requests to Scrapy from memory (its robots.txt read first)
        products = {urlsplit(u).path for u in shop.expected_product_urls()}
        served = lambda: any(e["path"] in products for e in shop.request_log())  # noqa: E731
        assert wait_for(served, 300), nodes[0].log()[-2000:]
        nodes.append(node("second", redis_url, mongo_uri, tmp_path))
        joined = "Node first ends solo mode (another node joins the crawl)"
        assert wait_for(lambda: joined in nodes[0].log(), 300), nodes[0].log()[-2000:]
        shop.set_faults(latency_ms=200)
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    logs = [n.log() for n in nodes]
    assert "Node first is alone in a crawl it began (solo mode)" in logs[0]
    assert "Node second is alone" not in logs[1]
    assert "Node first ends solo mode (another node joins the crawl)" in logs[0]
    assert "Node second waits for node first to end solo mode" in logs[1]
    assert "the crawl is shared" in logs[0]
    stats = [stats_of(log) for log in logs]
    assert stats[0].get("frontier/own", 0) > 0
    assert "frontier/own" not in stats[1]  # it never held the key
    assert not any("frontier/own/seen" in s for s in stats)
    assert_each_product_once(mongo_uri, shop)
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    assert fetched_twice(shop) == {}
    assert frontier_left(r) == {"queued": 0, "delayed": 0, "leased": 0, "payloads": 0, "seeding": 0}


def test_kill_9_of_a_solo_node_loses_nothing(redis_url, mongo_uri, shop_factory, tmp_path) -> None:
    # its own leases return to the queue like any, and a page whose own children were not
    # written yet was never acknowledged: it is fetched again
    shop = shop_factory(products=120, latency_ms=250)
    r = redis.Redis.from_url(redis_url)
    alone = solo_node("alone", redis_url, mongo_uri, shop, tmp_path)
    nodes = [alone]
    try:
        alone.kill()
        nodes.append(node("after", redis_url, mongo_uri, tmp_path))
        assert nodes[1].wait() == 0
    finally:
        stop_all(nodes)
    assert_each_product_once(mongo_uri, shop)
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    assert frontier_left(r) == {"queued": 0, "delayed": 0, "leased": 0, "payloads": 0, "seeding": 0}
    after = nodes[1].log()
    assert "Recovered" in after
    # it waited for the solo node until recovery took it out of the members
    assert "waits for node alone to end solo mode" in after
    assert "its solo node alone is no live member any more" in after
