"""A Redis that answers but takes no writes is an outage, as one out of reach: what each reply
means, and the two log lines an operator reads for a whole outage, however many retries."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator

import pytest
import redis
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.connection import outage_reason
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.scheduler.outage import RedisOutage

KEYS = FrontierKeys("o", "o:start_urls")


def child(url: str) -> tuple:
    return (url, 100, False, 0, "", json.dumps({"url": url}))


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.config_set("maxmemory", 0)
    client.close()


def stats() -> MemoryStatsCollector:
    collector = MemoryStatsCollector(get_crawler())
    collector.open_spider()
    return collector


def test_a_redis_out_of_memory_refuses_the_frontier_and_that_is_an_outage(
    r: redis.Redis,
) -> None:
    store = FrontierStore(r, KEYS)
    store.sync("n", children=[child("http://a.test/1")])
    # maxmemory under the memory in use, noeviction (the default policy): no write is taken
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) // 2)
    with pytest.raises(redis.RedisError) as refused:
        store.sync("n", children=[child("http://a.test/2")])
    assert outage_reason(refused.value) == "out of memory"
    with pytest.raises(redis.RedisError) as refused:
        store.heartbeat("n", "{}")
    assert outage_reason(refused.value) == "out of memory"
    r.config_set("maxmemory", 0)
    assert store.sync("n", children=[child("http://a.test/2")]).added == 1


def test_a_redis_busy_running_a_script_is_an_outage(r: redis.Redis, redis_url: str) -> None:
    # a script that outlives busy-reply-threshold makes Redis answer BUSY to everyone else
    setting = "busy-reply-threshold" if "busy-reply-threshold" in r.config_get("busy*") else None
    threshold = setting or "lua-time-limit"
    before = r.config_get(threshold)[threshold]
    r.config_set(threshold, 100)
    started = threading.Event()
    busy_script = (
        "redis.call('SET', KEYS[1], 1) "
        "local t = redis.call('TIME') local stop = tonumber(t[1]) + 2 "
        "while tonumber(redis.call('TIME')[1]) < stop do end return 1"
    )

    def run_script() -> None:
        client = redis.Redis.from_url(redis_url, socket_timeout=30)
        started.set()
        try:
            client.eval(busy_script, 1, "busy-key")
        finally:
            client.close()

    thread = threading.Thread(target=run_script)
    thread.start()
    try:
        started.wait(10)
        other = redis.Redis.from_url(redis_url, socket_timeout=30)
        reason = None
        try:
            while thread.is_alive():  # until the script runs past the threshold
                try:
                    other.get("busy-key")
                except redis.ResponseError as exc:
                    reason = outage_reason(exc)
                    break
        finally:
            other.close()
    finally:
        thread.join()
        r.config_set(threshold, before)
    assert reason == "busy running a script"


def test_what_each_failure_means() -> None:
    assert outage_reason(redis.ConnectionError("refused")) == "unreachable"
    assert outage_reason(redis.TimeoutError("timed out")) == "unreachable"
    assert outage_reason(OSError("reset")) == "unreachable"
    assert outage_reason(redis.exceptions.BusyLoadingError("dataset")) == "loading its data"
    assert outage_reason(redis.exceptions.ReadOnlyError("replica")) == "a read-only replica"
    assert outage_reason(redis.exceptions.MasterDownError("down")) == "its master is down"
    assert outage_reason(redis.ResponseError("MASTERDOWN Link with MASTER is down")) == (
        "its master is down"
    )
    assert outage_reason(redis.ResponseError("NOREPLICAS Not enough good replicas")) == (
        "not enough replicas"
    )
    # errors that waiting does not mend: a bug, a wrong reply
    assert outage_reason(redis.ResponseError("WRONGTYPE Operation against a key")) is None
    assert outage_reason(ValueError("bad payload")) is None


def test_an_outage_is_one_line_when_it_starts_and_one_when_it_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.outage")
    collector = stats()
    outage = RedisOutage("n1", collector, heartbeat_timeout=30, settle=0.0)
    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    for _ in range(1000):
        outage.failed(oom, waiting="3 acks, 7 links")
    outage.failed(redis.ConnectionError("connection refused"), waiting="3 acks, 9 links")
    assert outage.answered() is True  # the first success: the caller guards recovery
    assert outage.answered() is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("Redis unavailable (out of memory: command not allowed")
    assert "Redis is back after" in lines[1]
    assert "out of memory x1000, unreachable x1" in lines[1]
    assert "with what waited: 3 acks, 9 links" in lines[1]
    assert collector.get_value("frontier/redis_errors") == 1001
    assert collector.get_value("frontier/outages") == 1


def test_an_outage_that_comes_and_goes_is_one_outage(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.outage")
    collector = stats()
    outage = RedisOutage("n1", collector, heartbeat_timeout=30, settle=3600.0)
    oom = redis.exceptions.OutOfMemoryError("command not allowed")
    for _ in range(5):  # Redis takes one call and refuses the next: not settled yet
        outage.failed(oom)
        assert outage.answered() is True
    assert [r.getMessage()[:17] for r in caplog.records] == ["Redis unavailable"]
    outage.finish()  # the node stops while Redis serves it: the outage is logged as over
    assert "Redis is back" in caplog.records[-1].getMessage()
    assert collector.get_value("frontier/outages") == 1
