"""``distcrawl migrate``: a half-done scrapy-redis crawl moves into the frontier and finishes
there with nothing missing and nothing fetched twice; pickles are refused unless trusted."""

from __future__ import annotations

import json
import pickle
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
import scrapy
from crawl_nodes import Node, stop_all, wait_for
from fixtures_cli import run_migrate
from frontier_state import queued as queued_in
from frontier_state import queued_values

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.migrate import share_crawl


@pytest.mark.slow
def test_half_done_scrapy_redis_crawl_finishes_on_the_frontier(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=80, tracking_params=False, latency_ms=100)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    r.lpush("mycrawler:start_urls", base + "/")
    common: dict[str, Any] = {
        "redis_url": redis_url,
        "mongo_uri": mongo_uri,
        "log_dir": tmp_path,
        "spider": "mycrawler_redis",
        "spider_args": {"domain": "127.0.0.1"},
        "settings_module": "redis_example_settings",
    }
    old = Node(
        node_id="scrapy-redis",
        settings={
            "SCHEDULER_SERIALIZER": "json_request_serializer",
            "CONCURRENT_REQUESTS": "2",
            "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        },
        **common,
    )
    try:
        assert wait_for(lambda: r.llen("mycrawler_redis:items") >= 15, 120), old.log()[-2000:]
        old.terminate()  # SIGTERM: scrapy-redis finishes what it started, keeps its queue
        assert old.wait() == 0
    finally:
        old.kill()
    queued = r.zcard("mycrawler_redis:requests")
    seen = r.scard("mycrawler_redis:dupefilter")
    assert queued > 10, "the crawl was not half done"

    # pickles are never read without the flag
    code, summary, err = run_migrate(redis_url, "mycrawler_redis", "--dry-run")
    assert code == 0, err
    assert summary["entries"] == queued and summary["refused"] == 0
    keys = FrontierKeys("mycrawler_redis", "mycrawler_redis:start_urls")
    assert queued_in(r, keys) == 0  # a dry run writes nothing

    code, summary, err = run_migrate(redis_url, "mycrawler_redis")
    assert code == 0, err
    assert "queue entries read" in err  # progress
    assert summary["migrated"] == queued
    assert summary["fingerprints"] == summary["fingerprints_copied"] == seen
    # a bare fingerprint names no site: every shard's dupefilter has them all
    assert {int(r.hget(s.seen_info, "n") or 0) for s in keys.all_shards()} == {seen}
    assert queued_in(r, keys) == queued
    # the old keys are untouched
    assert (r.zcard("mycrawler_redis:requests"), r.scard("mycrawler_redis:dupefilter")) == (
        queued,
        seen,
    )
    # running it again moves nothing twice
    code, again, err = run_migrate(redis_url, "mycrawler_redis")
    assert code == 0, err
    assert (again["migrated"], again["already_in_frontier"]) == (0, queued)

    new = Node(node_id="frontier", env={"EXAMPLE_FRONTIER": "1"}, **common)
    try:
        assert new.wait() == 0, new.log()[-3000:]
    finally:
        stop_all([new])
    assert "Cannot queue" not in new.log() and "Refused" not in new.log()
    items = [json.loads(x)["url"] for x in r.lrange("mycrawler_redis:items", 0, -1)]
    fetches = Counter(base + e["path"] for e in shop.request_log() if e["path"] != "/robots.txt")
    # nothing fetched twice; the seed's page twice, as on scrapy-redis itself (a dont_filter
    # seed does not mark its URL seen, so the home link of every page is fetched once more)
    assert {u: n for u, n in fetches.items() if n > 1} == {base + "/": 2}
    # nothing missing: every product, every page's item once
    assert Counter(items) == Counter(set(fetches))
    assert shop.expected_product_urls() <= set(items)


def test_a_pickled_queue_moves_only_with_the_trust_flag(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    for i, prio in enumerate((5, 0)):
        entry = scrapy.Request(f"http://shop.test/p/{i}.html", priority=prio).to_dict()
        # what scrapy-redis' PriorityQueue writes with its default serializer (picklecompat)
        r.zadd("pickled:requests", {pickle.dumps(entry, protocol=-1): -prio})
    r.sadd("pickled:dupefilter", "0" * 40, "not a fingerprint")
    code, summary, err = run_migrate(redis_url, "pickled")
    assert code == 1
    assert summary["refused_by_reason"] == {"pickle_refused": 2}
    assert "--trust-pickle" in err
    keys = FrontierKeys("pickled", "pickled:start_urls")
    shards = keys.all_shards()
    assert queued_in(r, keys) == 0
    code, summary, _ = run_migrate(redis_url, "pickled", "--trust-pickle")
    assert code == 1  # the bad fingerprint
    assert (summary["migrated"], summary["fingerprints_refused"]) == (2, 1)
    # a stored payload is "<site>\n<payload>" unless its URL names its site
    queued = [v for s in shards for v in queued_values(r, s).values()]
    values = [v.decode().rpartition("\n")[2] for v in queued]
    payloads = [json.loads(v) for v in values]
    assert sorted(p.get("u") or p["url"] for p in payloads) == [
        "http://shop.test/p/0.html",
        "http://shop.test/p/1.html",
    ]
    assert r.zcard("pickled:requests") == 2 and r.scard("pickled:dupefilter") == 2  # untouched


def test_a_migration_shares_the_crawl_first_waiting_for_its_solo_node(redis_url: str) -> None:
    # a solo node takes any URL it does not remember for new: a migration writes fingerprints,
    # so the solo node writes what it holds and shares the crawl before the migration writes
    r = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("soloed", "soloed:start_urls")
    r.delete(keys.solo, keys.solo_end)
    store = FrontierStore(redis.Redis.from_url(redis_url), keys)
    store.heartbeat("a", "{}")  # a live member
    assert store.claim_solo("a")
    waiting = threading.Thread(target=share_crawl, args=(store, "migrate-test"))
    waiting.start()
    try:
        assert wait_for(lambda: r.get(keys.solo_end) == b"migrate-test", 30)
        assert r.get(keys.solo) == b"a"  # nothing is written while it waits
    finally:
        store.end_solo()  # what the solo node does once it wrote what it holds
        waiting.join(30)
    assert not waiting.is_alive()
    assert r.get(keys.solo) == b"shared" and not r.exists(keys.solo_end)
    entry = pickle.dumps(scrapy.Request("http://shop.test/p/9.html").to_dict(), protocol=-1)
    r.zadd("fresh:requests", {entry: 0})
    fresh = FrontierKeys("fresh", "fresh:start_urls")
    r.delete(fresh.solo)
    code, summary, _ = run_migrate(redis_url, "fresh", "--trust-pickle")
    assert (code, summary["migrated"]) == (0, 1)
    assert r.get(fresh.solo) == b"shared"  # no node opening later may become solo
