"""Faults around a node's Redis, end to end with real ``scrapy crawl catalog`` processes: a
Redis refusing writes mid-crawl (a failed save, memory, a password or an ACL changed) is one
outage (two log lines, nothing lost), a Redis out of reach
at start ends the node with a clear error, an evicting Redis is refused, and a forced stop that
leaves leases behind says so with its exit status."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
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
from redis_refusals import RefusingRedis, node_url, refusing

from distcrawl.base.processes import free_port
from distcrawl.commands.crawl import EXIT_LEASES_HELD, EXIT_REFUSED
from distcrawl.frontier.store import FrontierKeys
from distcrawl.servers.process import RedisServer

KEYS = FrontierKeys("catalog", "catalog:start_urls")


def leased(r: redis.Redis, node: str) -> int:
    return sum(int(r.hlen(shard.held(node))) for shard in KEYS.all_shards())


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


@pytest.fixture(scope="module")
def refusing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefusingRedis]:
    home = tmp_path_factory.mktemp("refusing")
    server = RefusingRedis(data_dir=home / "data", log_path=home / "redis.log").start()
    try:
        yield server
    finally:
        server.stop()


def refusals(admin: redis.Redis, code: str) -> int:
    """Commands Redis refused with *code* so far (INFO errorstats)."""
    stat = admin.info("errorstats").get(f"errorstat_{code}")
    return int(stat["count"]) if isinstance(stat, dict) else 0


@pytest.mark.slow
@pytest.mark.parametrize("code", ["MISCONF", "OOM", "WRONGPASS", "NOPERM"])
def test_redis_refusing_writes_mid_crawl_is_one_outage_and_loses_nothing(
    refusing_server: RefusingRedis, code: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    """A failed save (MISCONF), memory (OOM), a password rotated (WRONGPASS), an ACL changed
    (NOPERM), longer than the heartbeat timeout: one line when it starts (naming the class),
    one when it is over, no live node recovered, no ack fenced, no page fetched twice."""
    admin = refusing_server.admin()
    admin.flushall()
    admin.config_resetstat()
    # slow enough pages that the crawl is still under way once Redis refuses
    shop = shop_factory(products=200, latency_ms=250)
    admin.lpush("catalog:start_urls", shop.url)
    timeout = 8.0
    nodes = start_nodes(
        ("r1", "r2"),
        redis_url=node_url(refusing_server),
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings={"CONCURRENT_REQUESTS": "4", "DISTCRAWL_HEARTBEAT_TIMEOUT": str(timeout)},
    )
    try:
        assert wait_for(lambda: leased(admin, "r1") > 0 and leased(admin, "r2") > 0, 120)
        with refusing(refusing_server, code):
            assert all(n.proc.poll() is None for n in nodes), "the crawl ended first"
            began = time.monotonic()
            # many refusals (each a retry, none a log line), for longer than the heartbeat
            # timeout (every heartbeat goes stale, the live nodes' too)
            assert wait_for(
                lambda: refusals(admin, code) >= 20 and time.monotonic() - began > 1.5 * timeout,
                120,
            )
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    for node in nodes:
        log = node.log()
        assert log.count("Redis unavailable (") == 1, log
        named = [
            line
            for line in log.splitlines()
            if "unavailable (" in line or "still unavailable" in line
        ]
        assert any(f" {code}, " in line or f"({code}, " in line for line in named), named
        assert log.count("Redis is back") == 1
        assert "Traceback" not in log and "Frontier loop error" not in log
        assert "Recovered" not in log  # no live node was declared dead
        assert "leases it no longer holds" not in log  # no ack was fenced
        stats = stats_of(log)
        assert stats["frontier/outages"] == 1
        assert stats["frontier/redis_errors"] >= 2
        assert "frontier/acks/stale" not in stats
    assert_each_product_once(mongo_uri, shop)
    fetched = Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )
    assert max(fetched.values()) == 1, fetched.most_common(3)
    admin.close()


@pytest.mark.slow
@pytest.mark.parametrize("signals_sent", [1, 2])
def test_a_node_stopped_while_it_waits_to_replay_its_journal_exits_3_saying_how_many(
    server: RedisServer,
    mongo_server: Any,
    mongo_uri: str,
    shop_factory: Any,
    tmp_path: Path,
    signals_sent: int,
) -> None:
    """MongoDB down: the node journals every product, and once the crawl is drained its close
    waits for MongoDB to replay them. SIGTERM then: it stops waiting, returns its leases, says
    how many products the journal holds and exits 3; stopped twice (forced), it exits 3 and
    says how many all the same."""
    shop = shop_factory(products=30)
    r = server.client()
    r.lpush("catalog:start_urls", shop.url)
    mongo_server.stop()
    node = Node(
        redis_url=server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="journaling",
        settings={
            "MONGO_JOURNAL_PATH": str(tmp_path / "journal"),
            "MONGO_JOURNAL_AFTER": "0.5",
            "MONGO_CLOSE_TIMEOUT": "0.5",
            "MONGO_TIMEOUT": "1",
            "MONGO_RETRY_BACKOFF_MAX": "1",
        },
    )
    try:
        assert wait_for(lambda: "Waiting for MongoDB to replay" in node.log(), 240), node.log()[
            -3000:
        ]
        node.terminate()
        if signals_sent == 2:
            assert wait_for(lambda: "shutting down gracefully" in node.log(), 60)
            node.terminate()
        code = node.wait(120)
    finally:
        node.kill()
        mongo_server.start()
    log = node.log()
    assert code == 3, log[-3000:]
    assert f"products wait in {tmp_path / 'journal'}" in log  # how many, and where
    held = int(log.split("Exiting with status 3: ", 1)[1].split(" products", 1)[0])
    assert held == len(shop.expected_product_urls())
    if signals_sent == 1:
        assert "the node was stopped while it waited" in log
        assert "Node journaling closing (finished): returned" in log
        assert leased(r, "journaling") == 0
    assert "Traceback" not in log
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
        # no robots.txt: the leased pages start downloading at once (a request waiting for its
        # site's robots.txt is unstarted, and a stop returns it)
        settings={"CONCURRENT_REQUESTS": "4", "DOWNLOAD_TIMEOUT": "60", "ROBOTSTXT_OBEY": "False"},
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
