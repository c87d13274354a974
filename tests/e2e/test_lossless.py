"""No URL lost: kill -9, SIGTERM, every terminal path of a request, and a Redis restart."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import frontier_state
import pytest
import redis
from crawl_nodes import (
    HEARTBEAT_TIMEOUT,
    Node,
    assert_clean_log,
    assert_each_product_once,
    stop_all,
    stored_urls,
    wait_for,
)
from frontier_state import dead_records, delayed, leases_left, payloads, queued

from distcrawl import settings as project_settings
from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow


def frontier_left(r: redis.Redis, spider: str = "catalog") -> dict[str, int]:
    keys = FrontierKeys(spider, f"{spider}:start_urls")
    return {
        "queued": queued(r, keys),
        "delayed": delayed(r, keys),
        "leased": sum(r.zcard(k) for k in leases_left(r, keys)),
        "payloads": payloads(r, keys),  # every accepted request's payload lives until its ack
        "seeding": sum(r.llen(k) for k in r.keys(keys.seeds.taken("*")))
        + r.llen(keys.seeds.returned),
    }


def leased(r: redis.Redis, node: str) -> int:
    return frontier_state.leased(r, node)


def test_kill_9_three_times_loses_nothing(redis_url, mongo_uri, shop_factory, tmp_path) -> None:
    # slow enough (250 ms a page, 4 at a time per node) that all three kills land mid-crawl
    shop = shop_factory(products=300, latency_ms=250)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT), "CONCURRENT_REQUESTS": "4"}
    mk = lambda name: Node(  # noqa: E731
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=name, settings=settings
    )
    nodes = [mk("a0"), mk("b0")]
    rng = random.Random(7)
    kills = 0
    try:
        for round_no in range(1, 4):
            victim = nodes[0]
            # kill while it holds leases: requests in flight, prefetched, children unflushed
            victim_id = victim.node_id
            assert wait_for(lambda v=victim_id: leased(r, v) > 0, 60), victim.log()[-2000:]
            time.sleep(rng.uniform(0.2, 1.0))
            victim.kill()
            kills += 1
            nodes = [*nodes[1:], mk(f"k{round_no}")]
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    assert kills == 3
    urls = stored_urls(mongo_uri)
    assert_each_product_once(mongo_uri, shop)  # by SKU: _id (the URL) cannot show it
    assert set(urls) == shop.expected_product_urls()
    assert frontier_left(r) == {"queued": 0, "delayed": 0, "leased": 0, "payloads": 0, "seeding": 0}
    logs = "".join(n.log() for n in nodes)
    assert "Recovered" in logs


def test_sigterm_returns_leases_at_once(redis_url, mongo_uri, shop_factory, tmp_path) -> None:
    # the shop answers slowly until "a" is stopped: "b" (solo at first, as fast as Scrapy alone)
    # cannot finish the crawl before "a", slower to start on a loaded machine, holds leases
    shop = shop_factory(products=200, latency_ms=3000)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    # a heartbeat timeout far longer than the test: only a clean stop can return the leases
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "600"}
    a = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="a", settings=settings
    )
    b = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="b", settings=settings
    )
    try:
        assert wait_for(lambda: leased(r, "a") > 3, 120), a.log()[-3000:]
        a.terminate()
        shop.set_faults(latency_ms=60)
        assert a.wait(60) == 0, a.log()[-3000:]
        assert leased(r, "a") == 0
        assert "returned" in a.log()
        assert b.wait(120) == 0
    finally:
        stop_all([a, b])
    assert sorted(stored_urls(mongo_uri)) == sorted(shop.expected_product_urls())
    assert_clean_log(a.log())


#: where a node's engine waits, its scheduler open and leasing: a pipeline slow to open
#: (before ``spider_opened``), or an ``engine_started`` handler slow to return (the spider is
#: open, the engine runs once every handler is done)
ENGINE_GATES = {
    "pipeline_open": {
        "ITEM_PIPELINES": '{"distcrawl.node.pipeline.MongoPipeline": 300, '
        '"probe_spiders.gated_open.GatedOpenPipeline": 100}',
    },
    "engine_started": {
        "EXTENSIONS": json.dumps(
            {**project_settings.EXTENSIONS, "probe_spiders.gated_open.GatedEngineStart": 0}
        ),
    },
}


@pytest.mark.parametrize("gate_at", sorted(ENGINE_GATES))
@pytest.mark.parametrize("second_signal", [False, True])
def test_a_graceful_stop_before_the_engine_runs_returns_the_leases(
    redis_url, mongo_uri, shop_factory, tmp_path, second_signal: bool, gate_at: str
) -> None:
    """SIGTERM while the scheduler has opened and leased but the engine is still opening (a
    pipeline slow to open) or starting (an ``engine_started`` handler slow to return, the
    spider open): the node stops its engine once it runs (its spider closes, its stats are
    dumped), or, stopped again meanwhile, returns what it holds itself; either way its leases
    and seeds are back at once and it exits 0."""
    shop = shop_factory(products=40)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    gate = tmp_path / "gate"
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="early",
        settings={
            "DISTCRAWL_HEARTBEAT_TIMEOUT": "600",  # only a clean stop returns the leases
            **ENGINE_GATES[gate_at],
        },
        env={"PROBE_OPEN_GATE": str(gate)},
    )
    try:
        assert wait_for(lambda: leased(r, "early") > 0, 120), node.log()[-3000:]
        if gate_at == "engine_started":
            # the spider is open, the engine not running yet: Scrapy's own stop passes it by
            assert wait_for(lambda: "start waits for the gate" in node.log(), 120)
        node.terminate()
        # the stop is under way (or over: without a guard the node exits at once, with 4)
        assert wait_for(
            lambda: (
                "is stopped before its engine runs" in node.log() or node.proc.poll() is not None
            ),
            60,
        ), node.log()[-3000:]
        if second_signal:
            node.terminate()  # the engine never runs: the node returns its leases itself
        else:
            gate.touch()  # the engine runs now, and is stopped at once
        assert node.wait(120) == 0, node.log()[-3000:]
    finally:
        node.kill()
    log = node.log()
    assert leased(r, "early") == 0
    keys = FrontierKeys("catalog", "catalog:start_urls")
    assert r.llen(keys.seeds.taken("early")) == 0  # seeds it took are back too
    assert "Node early closing (shutdown): returned" in log, log[-3000:]
    assert "is stopped while it closes" not in log, log[-3000:]
    if not second_signal:
        assert "Spider closed (shutdown)" in log and "Dumping Scrapy stats" in log
    assert "Traceback" not in log and "Exiting with status" not in log
    r.close()


#: moments of a node's life a stop may come at: a condition to wait for (None: the process'
#: first instant), then a random delay of up to half a second
MOMENTS = (
    None,
    "] INFO: Scrapy ",  # its first log line: settings, add-ons, the crawler being made
    "] INFO: Spider opened",  # the engine opening: the scheduler's open under way
    "Frontier node ",  # the scheduler claiming its node id, the crawl's record
    "leased",  # the scheduler leasing, the engine still starting or just started
    "fetched",  # downloads under way
)


@pytest.mark.parametrize("seed", range(8))
def test_a_graceful_stop_at_a_random_moment_returns_what_the_node_holds(
    redis_url, mongo_uri, shop_factory, tmp_path, seed: int
) -> None:
    """SIGTERM at a moment of the node's life drawn from the seed (its first instant, its
    settings, the engine's and the scheduler's open, its first leases, its downloads), plus a
    random delay: the node exits 0 holding nothing (or, stopped while Python itself starts,
    dies by the signal holding nothing), and a second node finishes the crawl: every product
    stored once."""
    rng = random.Random(seed)
    moment, jitter = MOMENTS[seed % len(MOMENTS)], rng.uniform(0.0, 0.5)
    shop = shop_factory(products=60, latency_ms=50)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "600"}  # only a clean stop returns the leases
    a = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="a", settings=settings
    )
    try:
        if moment == "leased":
            assert wait_for(lambda: leased(r, "a") > 0, 120)
        elif moment == "fetched":
            assert wait_for(lambda: len(shop.request_log()) > 5, 120)
        elif moment is not None:
            assert wait_for(lambda: moment in a.log(), 120)
        time.sleep(jitter)  # the moment of the stop: the schedule, not a wait for a condition
        a.terminate()
        code = a.wait(120)
    finally:
        a.kill()
    keys = FrontierKeys("catalog", "catalog:start_urls")
    log = a.log()
    where = (moment, round(jitter, 3), code, log[-3000:])
    assert leased(r, "a") == 0, where
    assert r.llen(keys.seeds.taken("a")) == 0, where
    if code != 0:
        # killed by the signal before Scrapy or distcrawl could handle it: it held nothing
        assert code == -15 and moment is None and "Frontier node a on" not in log, where
    assert "Traceback" not in log and "Exiting with status" not in log, where
    b = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="b", settings=settings
    )
    try:
        assert b.wait() == 0
    finally:
        b.kill()
    assert_each_product_once(mongo_uri, shop)
    r.close()


def test_every_terminal_path_acks_its_lease(redis_url, mongo_uri, shop_factory, tmp_path) -> None:
    """Parsed, failed after the last retry, dropped by robots.txt, callback raised: all acked."""
    shop = shop_factory(products=120, hostile=True, fail_products=3)
    r = redis.Redis.from_url(redis_url)
    # robots.txt-forbidden, oversized, not HTML, a redirect loop: each ends its own way
    extra = ["private/secret", "big", "file.bin", "loop/a"]
    r.lpush("catalog_raising:start_urls", shop.url, *(shop.url + path for path in extra))
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="paths",
        spider="catalog_raising",
        settings={
            "SPIDER_MODULES": "distcrawl.node.spiders,probe_spiders",
            "RETRY_TIMES": 1,
            "RETRY_BACKOFF_BASE": 0.1,
            "DEPTH_LIMIT": 8,
        },
    )
    try:
        assert node.wait() == 0  # a leaked lease would keep the frontier from draining
    finally:
        node.kill()
    log = node.log()
    assert "probe: callback raised" in log
    assert "robotstxt/forbidden" in log  # the stats dump: a request dropped by robots.txt
    assert len(dead_records(r, FrontierKeys("catalog_raising", "catalog_raising:start_urls"))) >= 3
    assert frontier_left(r, "catalog_raising") == {
        "queued": 0,
        "delayed": 0,
        "leased": 0,
        "payloads": 0,
        "seeding": 0,
    }


def test_redis_restart_mid_crawl(redis_server, mongo_uri, shop_factory, tmp_path) -> None:
    redis_url = redis_server.url
    r = redis.Redis.from_url(redis_url)
    r.flushall()
    shop = shop_factory(products=200, latency_ms=30)
    r.lpush("catalog:start_urls", shop.url)
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"r{i}",
            settings={"DISTCRAWL_HEARTBEAT_TIMEOUT": "20"},
        )
        for i in (1, 2)
    ]
    try:
        # mid-crawl: Redis holds accepted work, queued or leased (a node prefetches up to five
        # times its concurrency, so most of a small shop's pages may be leased at once)
        assert wait_for(lambda: queued(r) + leased(r, "r1") + leased(r, "r2") > 20, 60)
        redis_server.stop()
        time.sleep(3)
        redis_server.start()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert Counter(urls).most_common(1)[0][1] == 1
    assert set(urls) == shop.expected_product_urls()
    logs = "".join(n.log() for n in nodes)
    assert "Redis unavailable" in logs and "Redis is back" in logs
    r = redis.Redis.from_url(redis_url)
    assert frontier_left(r) == {"queued": 0, "delayed": 0, "leased": 0, "payloads": 0, "seeding": 0}
