"""Retries back off, wait in Redis, survive a node's death; the last failure is a dead letter."""

from __future__ import annotations

import time
from collections import Counter
from itertools import pairwise

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
from frontier_state import dead_records, delayed, leases_left, queued

from distcrawl.base.backoff import backoff_delay, parse_retry_after
from distcrawl.demo.checks import attempts_by_path, retry_gap_violations
from distcrawl.frontier.store import FrontierKeys, FrontierStore

pytestmark = pytest.mark.slow

BACKOFF = {"RETRY_BACKOFF_BASE": 0.3, "RETRY_BACKOFF_MAX": 3.0, "RETRY_BACKOFF_JITTER": 0.5}


def test_backoff_delay_grows_and_is_capped() -> None:
    delays = [backoff_delay(n, base=1.0, cap=10.0, jitter=0.5) for n in range(1, 7)]
    for n, d in enumerate(delays, start=1):
        minimum = min(10.0, 2.0 ** (n - 1))
        assert minimum <= d <= minimum * 1.5


def test_retry_after_forms() -> None:
    assert parse_retry_after(b"7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after(b"soon") is None
    assert parse_retry_after(None) is None


def test_random_503s_every_product_stored_and_gaps_grow(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=150, error_rate=0.3, retry_after=None)
    redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
    settings = {**BACKOFF, "RETRY_TIMES": 10}
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"n{i}",
            settings=settings,
        )
        for i in (1, 2)
    ]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert Counter(urls).most_common(1)[0][1] == 1
    assert set(urls) == shop.expected_product_urls()
    log = shop.request_log()
    retried = [a for a in attempts_by_path(log).values() if len(a) >= 3]
    assert retried, "with 30% errors some URL must have needed two retries"
    assert retry_gap_violations(log, base=0.3, cap=3.0, retry_statuses=frozenset({503})) == []
    for node in nodes:
        assert_clean_log(node.log())


def test_429_retry_after_is_honoured(redis_url, mongo_uri, shop_factory, tmp_path) -> None:
    shop = shop_factory(products=30, rate_limit_429=0.2, retry_after=2)
    redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="ra",
        settings={**BACKOFF, "RETRY_TIMES": 10},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    gaps = [
        b["t"] - a["t"]
        for attempts in attempts_by_path(shop.request_log()).values()
        for a, b in pairwise(attempts)
        if a["status"] == 429
    ]
    assert gaps, "some request must have been rate-limited"
    assert min(gaps) >= 2.0


def test_always_failing_urls_become_dead_letters_and_requeue_after_healing(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=60, fail_products=4)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {**BACKOFF, "RETRY_TIMES": 2}
    node = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="d1", settings=settings
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    failing = shop.failing_product_urls()
    dead = dead_records(r)
    assert {d["url"] for d in dead} == failing
    for d in dead:
        assert d["reason"] == "http_500" and d["attempts"] == 3 and d["node"] == "d1"
        assert d["last_attempt"] > d["first_attempt"]
    assert set(stored_urls(mongo_uri)) == shop.recoverable_product_urls()
    # nowhere else: not queued, parked or leased
    assert queued(r) == delayed(r) == 0
    assert not leases_left(r)

    shop.set_faults(fail_products=0)
    store = FrontierStore(r, FrontierKeys("catalog", "catalog:start_urls"))
    assert store.requeue_dead() == len(failing)
    node = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="d2", settings=settings
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    assert not dead_records(r)
    assert f"'frontier/requeued_dead_letters': {len(failing)}," in node.log()


def test_kill_9_while_retries_are_parked_loses_nothing(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=100, error_rate=0.4, retry_after=None)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {
        "RETRY_BACKOFF_BASE": 1.5,
        "RETRY_BACKOFF_MAX": 4,
        "RETRY_TIMES": 10,
        "DISTCRAWL_HEARTBEAT_TIMEOUT": HEARTBEAT_TIMEOUT,
    }
    first = Node(
        redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id="p1", settings=settings
    )
    nodes = [first]
    try:
        assert wait_for(lambda: delayed(r) >= 3, 60)
        first.kill()
        parked = delayed(r)
        assert parked >= 3
        time.sleep(0.5)
        nodes.append(
            Node(
                redis_url=redis_url,
                mongo_uri=mongo_uri,
                log_dir=tmp_path,
                node_id="p2",
                settings=settings,
            )
        )
        assert nodes[-1].wait() == 0
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert_each_product_once(mongo_uri, shop)  # by SKU: _id (the URL) cannot show it
    assert set(urls) == shop.expected_product_urls()
