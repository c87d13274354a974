"""A Redis outage longer than the heartbeat timeout recovers no live node: silence counts only
from the server's (re)start and, on each node, from the end of the outage it saw."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import redis
from crawl_nodes import start_nodes, stop_all, stored_urls, wait_for

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.servers.process import RedisServer


def child(url: str) -> tuple:
    return (url, 100, False, 0, "", json.dumps({"url": url}))


def leased(r: redis.Redis, node: str, spider: str = "catalog") -> int:
    keys = FrontierKeys(spider, f"{spider}:start_urls")
    return sum(int(r.hlen(shard.held(node))) for shard in keys.all_shards())


def uptime(r: redis.Redis) -> int:
    return int(r.info("server")["uptime_in_seconds"])


def test_after_a_restart_silence_counts_from_the_server_start(redis_server: RedisServer) -> None:
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    store = FrontierStore(r, FrontierKeys("o", "o:start_urls"))
    store.heartbeat("a", "{}")
    store.sync("a", children=[child(f"a{i}") for i in range(3)])
    store.sync("a", lease=3)
    store.heartbeat("b", "{}")
    store.sync("b", children=[child(f"b{i}") for i in range(3)])
    while store.sync("b", lease=3).leased:  # a node takes its share of a shallow queue
        pass
    timeout_ms = 2_000
    redis_server.stop()  # a clean stop: the append-only file keeps everything
    time.sleep(timeout_ms / 1000 * 1.5)  # the outage: longer than the heartbeat timeout
    redis_server.start()
    r = redis_server.client()
    store = FrontierStore(r, FrontierKeys("o", "o:start_urls"))
    assert leased(r, "a", "o") == 3 and leased(r, "b", "o") == 3  # same data
    # "a" is back first: every other heartbeat is older than the timeout, yet nobody is dead
    assert store.recover("a", timeout_ms) == [[], 0]
    store.heartbeat("a", "{}")
    assert store.recover("a", timeout_ms) == [[], 0]
    assert leased(r, "b", "o") == 3
    # "b" never comes back: once the server has been up for the timeout, it is dead
    assert wait_for(lambda: uptime(r) * 1000 >= timeout_ms, 60)
    store.heartbeat("a", "{}")
    nodes, reqs = store.recover("a", timeout_ms)
    assert (nodes, reqs) == (["b"], 3)
    assert leased(r, "a", "o") == 3
    assert int(r.hget("{o}:counters", "recovered_nodes")) == 1
    r.close()


@pytest.mark.slow
def test_redis_outage_longer_than_the_heartbeat_timeout_recovers_no_live_node(
    redis_server: RedisServer, mongo_uri: str, shop_factory, tmp_path
) -> None:
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    shop = shop_factory(products=200, latency_ms=100)
    timeout = 8.0
    settings = {
        "DISTCRAWL_HEARTBEAT_TIMEOUT": str(timeout),
        "CONCURRENT_REQUESTS": "4",
        # the bounded wait is the start's only: an outage later is waited out, however long
        "DISTCRAWL_REDIS_START_TIMEOUT": "1",
    }
    nodes = start_nodes(
        ("o1", "o2"),
        redis_url=redis_server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings=settings,
    )
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert wait_for(lambda: leased(r, "o1") > 0 and leased(r, "o2") > 0, 120), nodes[0].log()
        r.close()
        redis_server.stop()
        time.sleep(timeout * 1.5)  # the outage: every heartbeat goes stale
        redis_server.start()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    logs = "".join(n.log() for n in nodes)
    assert "Redis unavailable" in logs and "Redis is back" in logs
    assert "Recovered" not in logs
    r = redis_server.client()
    assert r.hget("{catalog}:counters", "recovered_nodes") is None
    r.close()
    # nobody's leases were handed out twice: every page was fetched once
    fetched = Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )
    assert fetched and max(fetched.values()) == 1, fetched.most_common(3)
    urls = stored_urls(mongo_uri)
    assert len(urls) == len(set(urls)) and set(urls) == shop.expected_product_urls()
