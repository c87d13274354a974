"""A node recovers nobody while its own heartbeats come further apart than half the heartbeat
timeout (Redis answering slowly, its loop stalled): the others' heartbeats were held up alike,
so their silence says nothing of their death. Once its own beats come in time again for a
timeout, it recovers the nodes that stayed silent."""

from __future__ import annotations

import asyncio
import time

import redis
import redis.asyncio as aioredis
from frontier_state import clear_frontier, wait_for_uptime
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.scheduler.membership import Membership

KEYS = FrontierKeys("g", "g:start_urls")
TIMEOUT = 2.0
INTERVAL = 0.1


def test_a_node_whose_own_beats_came_late_recovers_nobody_for_a_timeout(redis_url: str) -> None:
    direct = redis.Redis.from_url(redis_url)
    clear_frontier(direct, KEYS)
    wait_for_uptime(direct, 2)
    asyncio.run(_guarded(redis_url, direct))
    direct.close()


async def _guarded(redis_url: str, direct: redis.Redis) -> None:
    client = aioredis.from_url(redis_url)
    stats = MemoryStatsCollector(get_crawler())
    stats.open_spider()
    store = FrontierStore(client, KEYS)
    membership = Membership(
        store=store,
        node_id="me",
        stats=stats,
        heartbeat_interval=INTERVAL,
        heartbeat_timeout=TIMEOUT,
    )
    await membership.tick({})
    FrontierStore(direct, KEYS).heartbeat("other", "{}")
    # neither beats for longer than the timeout: "other"'s silence is no sign of its death,
    # this node's own beats were held up too
    await asyncio.sleep(TIMEOUT * 1.2)
    assert not await membership.tick({})
    assert direct.zscore(KEYS.nodes, "other") is not None
    # this node beats in time again; "other" stays silent: after a timeout it is recovered
    deadline = time.monotonic() + 30
    recovered = False
    while not recovered:
        assert time.monotonic() < deadline
        await asyncio.sleep(INTERVAL)
        recovered = await membership.tick({})
    assert direct.zscore(KEYS.nodes, "other") is None
    await client.aclose()
