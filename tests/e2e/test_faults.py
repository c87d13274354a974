"""Faults around a node's Redis, end to end with real ``scrapy crawl catalog`` processes: a
Redis out of memory mid-crawl is one outage (two log lines, nothing lost), a Redis out of reach
at start ends the node with a clear error, an evicting Redis is refused, and a forced stop that
leaves leases behind says so with its exit status."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from crawl_nodes import (
    Node,
    assert_each_product_once,
    start_nodes,
    stats_of,
    stop_all,
    wait_for,
)

from distcrawl.base.processes import free_port
from distcrawl.commands.crawl import EXIT_LEASES_HELD, EXIT_REFUSED
from distcrawl.frontier.store import FrontierKeys
from distcrawl.servers.process import RedisServer

KEYS = FrontierKeys("catalog", "catalog:start_urls")


def leased(r: redis.Redis, node: str) -> int:
    return sum(int(r.hlen(shard.held(node))) for shard in KEYS.all_shards())


def oom_errors(r: redis.Redis) -> int:
    """Commands Redis refused for want of memory so far (INFO errorstats)."""
    oom = r.info("errorstats").get("errorstat_OOM")
    return int(oom["count"]) if isinstance(oom, dict) else 0


@pytest.fixture
def server(redis_server: RedisServer) -> Any:
    """The module's Redis, running, empty, with no memory limit once the test is over."""
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    r.config_resetstat()
    yield redis_server
    r = redis_server.client()
    r.config_set("maxmemory", 0)
    r.config_set("maxmemory-policy", "noeviction")
    r.close()


@pytest.mark.slow
def test_redis_out_of_memory_mid_crawl_is_one_outage_and_loses_nothing(
    server: RedisServer, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=150, latency_ms=100)
    r = server.client()
    r.lpush("catalog:start_urls", shop.url)
    timeout = 8.0
    nodes = start_nodes(
        ("oom1", "oom2"),
        redis_url=server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings={"CONCURRENT_REQUESTS": "4", "DISTCRAWL_HEARTBEAT_TIMEOUT": str(timeout)},
    )
    try:
        assert wait_for(lambda: leased(r, "oom1") > 0 and leased(r, "oom2") > 0, 120)
        # a tiny maxmemory under noeviction: Redis refuses every write of the frontier
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", int(r.info("memory")["used_memory"]) // 2)
        began = time.monotonic()
        # the outage: many refusals (each a retry, none a log line), and longer than the
        # heartbeat timeout (every heartbeat goes stale, the live nodes' too)
        assert wait_for(
            lambda: oom_errors(r) >= 20 and time.monotonic() - began > 1.5 * timeout, 120
        )
        r.config_set("maxmemory", 0)
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    for node in nodes:
        log = node.log()
        assert log.count("Redis unavailable (out of memory") == 1, log
        assert log.count("Redis is back") == 1
        assert "Traceback" not in log and "Frontier loop error" not in log
        assert "Recovered" not in log  # no live node was declared dead
        stats = stats_of(log)
        assert stats["frontier/outages"] == 1
        assert stats["frontier/redis_errors"] >= 2
    assert_each_product_once(mongo_uri, shop)
    fetched = Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )
    assert max(fetched.values()) == 1, fetched.most_common(3)
    r.close()


def test_a_node_that_cannot_reach_redis_at_start_exits_with_a_clear_error(
    mongo_uri: str, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    node = Node(
        redis_url=url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="nowhere",
        settings={"DISTCRAWL_REDIS_START_TIMEOUT": "2"},
    )
    try:
        assert node.wait() == EXIT_REFUSED
    finally:
        stop_all([node])
    log = node.log()
    assert f"Node refuses to start: Redis at {url} did not serve this node within 2s" in log
    assert "check REDIS_URL, or wait longer with DISTCRAWL_REDIS_START_TIMEOUT" in log
    assert "Redis unavailable at start (unreachable" in log  # a warning per try
    # one error, and no traceback: the spider closes with the refusal as its finish reason
    assert [ln for ln in log.splitlines() if "] ERROR: " in ln] == [
        next(ln for ln in log.splitlines() if "Node refuses to start" in ln)
    ]
    assert "Traceback" not in log
    assert "Spider closed (redis_unreachable)" in log


def test_a_node_refuses_a_redis_that_may_evict_the_crawl(
    server: RedisServer, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=5)
    r = server.client()
    r.lpush("catalog:start_urls", shop.url)
    r.config_set("maxmemory-policy", "allkeys-lru")
    refused = Node(redis_url=server.url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="evict")
    try:
        assert refused.wait() != 0
    finally:
        stop_all([refused])
    log = refused.log()
    assert "Node refuses to start: Redis' maxmemory-policy is allkeys-lru" in log
    assert "Traceback" not in log and "Spider closed (redis_evicts)" in log
    assert "DISTCRAWL_ALLOW_EVICTION = True" in log
    assert r.zcard(KEYS.nodes) == 0  # it never joined the crawl
    assert r.llen("catalog:start_urls") == 1  # nor took a seed
    accepted = Node(
        redis_url=server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="evict-ok",
        settings={"DISTCRAWL_ALLOW_EVICTION": "1"},
    )
    try:
        assert accepted.wait() == 0
    finally:
        stop_all([accepted])
    assert "accepted by DISTCRAWL_ALLOW_EVICTION" in accepted.log()
    assert_each_product_once(mongo_uri, shop)
    r.close()


@pytest.mark.slow
def test_a_forced_stop_that_leaves_leases_behind_exits_non_zero(
    server: RedisServer, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    # slow pages: the graceful stop waits for the downloads, the second signal cuts it short
    shop = shop_factory(products=60, latency_ms=20_000)
    r = server.client()
    r.lpush("catalog:start_urls", shop.url)
    node = Node(
        redis_url=server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="forced",
        settings={"CONCURRENT_REQUESTS": "4", "DOWNLOAD_TIMEOUT": "60"},
    )
    try:
        assert wait_for(lambda: leased(r, "forced") > 0, 120), node.log()
        node.terminate()
        assert wait_for(lambda: "shutting down gracefully" in node.log(), 60), node.log()
        node.terminate()  # the second signal: a forced stop
        assert node.wait() == EXIT_LEASES_HELD
    finally:
        stop_all([node])
    log = node.log()
    assert "Exiting with status 4: node forced stopped holding" in log
    assert leased(r, "forced") > 0  # they return once its heartbeat times out
    r.close()
