"""Revisit mode end to end: real nodes keep a changing shop fresh through kill -9 and a Redis
restart, with conditional requests, and no page's revisit is lost or doubled."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
import redis
from crawl_nodes import HEARTBEAT_TIMEOUT, Node, stop_all, wait_for
from frontier_state import leases_left, queued_values

from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow

KEYS = FrontierKeys("catalog", "catalog:start_urls")
#: every page comes back within 2 s of its visit (backing off up to 8 s while it does not change)
SETTINGS = {
    "DISTCRAWL_REVISIT": "*:2s",
    "DISTCRAWL_REVISIT_MAX_BACKOFF": "4",
    "DISTCRAWL_CLOSE_WHEN_DRAINED": "0",  # a continuous crawl: stopped by the test
    "DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
    "CONCURRENT_REQUESTS": "4",
}


def frontier_entries(r: redis.Redis) -> dict[str, Any]:
    """Where every request of the crawl is: each rid with its URL and its places."""
    places: Counter[str] = Counter()
    urls: dict[str, str] = {}
    states: dict[str, dict[str, Any]] = {}
    for shard in KEYS.all_shards():
        for rid, value in r.hgetall(shard.requests).items():
            text = value.decode()
            payload = json.loads(text[text.index("{") :])
            urls[rid.decode()] = payload["u"]
            states[payload["u"]] = (payload.get("mt") or {}).get("~v") or {}
        for rid, value in queued_values(r, shard).items():  # inline entries included
            text = value.decode()
            payload = json.loads(text[text.index("{") :])
            urls[rid] = payload["u"]
            state = (payload.get("mt") or {}).get("~v")
            if state:  # an inline entry carries its page's state itself
                states[payload["u"]] = state
            places[rid] += 1
        places.update(rid.decode() for rid in r.zrange(shard.delayed, 0, -1))
        places.update(m.decode().partition(":")[2] for m in r.zrange(shard.revisit, 0, -1))
        for site in r.zrange(shard.waiting, 0, -1):
            places.update(rid.decode() for rid in r.zrange(shard.wait(site.decode()), 0, -1))
        for key in r.scan_iter(match=shard.held("*")):
            places.update(rid.decode() for rid in r.hkeys(key))
    return {"places": places, "urls": urls, "states": states}


def assert_each_page_once(r: redis.Redis, pages: set[str]) -> dict[str, Any]:
    found = frontier_entries(r)
    by_url = Counter(found["urls"].values())
    doubled = {u: n for u, n in by_url.items() if n > 1}
    assert not doubled, f"pages with two entries: {sorted(doubled.items())[:5]}"
    lost = pages - set(by_url)
    assert not lost, f"pages no longer scheduled: {sorted(lost)[:5]}"
    misplaced = {rid: found["places"][rid] for rid in found["urls"] if found["places"][rid] != 1}
    assert not misplaced, f"entries not in exactly one place: {list(misplaced.items())[:5]}"
    return found


def fetched_since(shop: Any, since: float) -> Counter[str]:
    return Counter(e["path"] for e in shop.request_log(since=since) if e["path"] != "/robots.txt")


def test_revisits_survive_kill_9_and_redis_restart(
    redis_server, mongo_uri, shop_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    redis_url = redis_server.url
    r = redis.Redis.from_url(redis_url)
    r.flushall()
    # a shop that changes a fifth of its products every 3 s, with ETag / 304
    shop = shop_factory(
        products=40, latency_ms=20, change_interval=3.0, change_rate=0.2, tracking_params=False
    )
    r.lpush("catalog:start_urls", shop.url)
    mk = lambda name: Node(  # noqa: E731
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=name, settings=SETTINGS
    )
    nodes = [mk("a"), mk("b")]
    try:
        products = {u.split("/", 3)[3] for u in shop.expected_product_urls()}
        # the first pass: every product page fetched and scheduled again
        assert wait_for(
            lambda: products <= {u.split("/", 3)[3] for u in frontier_entries(r)["urls"].values()},
            120,
        ), nodes[0].log()[-3000:]
        first = {u for u in frontier_entries(r)["urls"].values()}
        assert wait_for(lambda: sum(r.zcard(s.revisit) for s in KEYS.all_shards()) > 20, 120)

        # kill -9 a node while it holds leases; a new node joins
        assert wait_for(lambda: any(r.hlen(s.held("a")) for s in KEYS.all_shards()), 60, 0.01), (
            nodes[0].log()[-3000:]
        )
        nodes[0].kill()
        killed_at = time.time()
        nodes.append(mk("c"))
        # its leases come back (recovery) and every product is visited again after the kill
        assert wait_for(
            lambda: not any(r.hlen(s.held("a")) for s in KEYS.all_shards()),
            HEARTBEAT_TIMEOUT * 6,
        )
        after_kill = lambda: fetched_since(shop, killed_at)  # noqa: E731
        assert wait_for(lambda: all(after_kill()["/" + p] >= 1 for p in products), 180), sorted(
            set(products) - {p.lstrip("/") for p in after_kill()}
        )[:5]

        # Redis goes away and comes back from its own data
        redis_server.stop()
        time.sleep(2)
        redis_server.start()
        r = redis.Redis.from_url(redis_url)
        back_at = time.time()
        assert wait_for(
            lambda: all(fetched_since(shop, back_at)["/" + p] >= 1 for p in products), 180
        )
        for node in nodes[1:]:
            node.terminate()
        assert [n.wait() for n in nodes[1:]] == [0, 0]
    finally:
        stop_all(nodes)
    r = redis.Redis.from_url(redis_url)
    found = assert_each_page_once(r, first)
    # nothing in flight after the clean stops: the pages wait in the queue or their revisit
    assert leases_left(r) == []
    # revisits were conditional: the shop answered 304 to pages that had not changed, and an
    # unchanged page backs off (its factor grew above 1)
    statuses = Counter(e["status"] for e in shop.request_log())
    assert statuses[304] > 0
    assert any(float(s.get("x", 1)) > 1 for s in found["states"].values())
    product_states = [s for u, s in found["states"].items() if u.split("/", 3)[3] in products]
    assert len(product_states) == len(products)
    assert all(s.get("e") and s.get("h") for s in product_states)
    logs = "".join(n.log() for n in nodes)
    assert "Revisit mode" in logs and "Redis is back" in logs
    assert "revisit/not_modified" in logs
