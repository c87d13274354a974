"""Redis' memory as a node checks it: an evicting ``maxmemory-policy`` is refused at open unless
``DISTCRAWL_ALLOW_EVICTION`` accepts it, a Redis near its limit is warned about (at open and
while running), on a real valkey-server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.memory import evicts_frontier, read_memory
from distcrawl.node.scheduler.memory import EvictingRedis, MemoryWatch, check_memory_at_open


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.config_set("maxmemory", 0)
    client.config_set("maxmemory-policy", "noeviction")
    client.close()


def check(redis_url: str, *, allow: bool) -> None:
    async def run() -> None:
        client = aioredis.from_url(redis_url)
        try:
            await check_memory_at_open(client, allow_eviction=allow)
        finally:
            await client.aclose()

    asyncio.run(run())


def test_an_evicting_policy_is_refused_naming_the_setting_and_the_cost(
    r: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.memory")
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random"):
        r.config_set("maxmemory-policy", policy)
        with pytest.raises(EvictingRedis) as refused:
            check(redis_url, allow=False)
        text = str(refused.value)
        assert f"maxmemory-policy is {policy}" in text
        assert "DISTCRAWL_ALLOW_EVICTION = True" in text
        assert "lose requests" in text and "fetch pages again" in text
    # accepted: one warning, and the node starts
    caplog.clear()
    check(redis_url, allow=True)
    assert ["accepted by DISTCRAWL_ALLOW_EVICTION" in m.getMessage() for m in caplog.records] == [
        True
    ]
    # noeviction and the volatile-* policies keep the frontier's keys (they have no TTL)
    for policy in ("noeviction", "volatile-lru", "volatile-ttl"):
        r.config_set("maxmemory-policy", policy)
        check(redis_url, allow=False)
        assert not evicts_frontier(policy)


def test_a_redis_near_its_limit_is_warned_about_at_open_and_while_running(
    r: redis.Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.memory")
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", int(used / 0.9))  # ~90 % in use
    check(redis_url, allow=False)
    (line,) = [m.getMessage() for m in caplog.records]
    assert "of its maxmemory" in line and "policy noeviction" in line
    memory = read_memory(r)
    assert memory is not None and memory.share is not None and memory.share >= 0.8

    async def watch() -> MemoryStatsCollector:
        stats = MemoryStatsCollector(get_crawler())
        stats.open_spider()
        client = aioredis.from_url(redis_url)
        try:
            watcher = MemoryWatch(client, stats, interval=0.0)
            await watcher.tick()
            await watcher.tick()  # warned once, not at every read
        finally:
            await client.aclose()
        return stats

    caplog.clear()
    stats = asyncio.run(watch())
    assert len([m for m in caplog.records if "of its maxmemory" in m.getMessage()]) == 1
    assert stats.get_value("frontier/redis_maxmemory") == int(used / 0.9)
    assert stats.get_value("frontier/redis_memory_used") > 0
