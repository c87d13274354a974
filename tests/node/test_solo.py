"""The solo handshake on a real Redis: a node opening a crawl that never held a request may win
``solo``; any other node shares the crawl before it writes, waiting for the solo node to write
what it holds, or taking over from a solo node recovery took out of the members. Only the
holder of ``solo`` ever hands out requests from memory."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio
from frontier_state import clear_frontier, wait_for_uptime
from scrapy.utils.test import get_crawler

from distcrawl.frontier.protocol.solo import SHARED
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.node.scheduler.reconcile import reconcile_leases
from distcrawl.node.scheduler.solo import SoloMode

T = TypeVar("T")
TIMEOUT = 20.0  # the nodes' heartbeat timeout (s): a solo node stays so for half of it


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def keys(redis_url: str, request: pytest.FixtureRequest) -> FrontierKeys:
    keys = FrontierKeys("solo", "solo:start_urls", shards=request.param)
    clear_frontier(redis.Redis.from_url(redis_url), keys)
    return keys


def run(redis_url: str, keys: FrontierKeys, test: Callable[..., Awaitable[T]]) -> T:
    """Run ``test(mode, store, sync_client)`` with a solo-mode maker on an asyncio client."""

    async def main() -> T:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = FrontierStore(client, keys, refresh=0.0)

            async def mode(node: str) -> SoloMode:
                await store.heartbeat(node, "{}")  # a member, as at a node's open
                return SoloMode(store=store, node_id=node, heartbeat_timeout=TIMEOUT)

            return await test(mode, store, redis.Redis.from_url(redis_url))
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_a_joining_node_waits_until_the_solo_node_wrote_what_it_holds(
    redis_url: str, keys: FrontierKeys
) -> None:
    async def test(mode: Any, store: FrontierStore, r: redis.Redis) -> None:
        a = await mode("a")
        await a.open(eligible=True)
        assert a.solo and r.get(keys.solo) == b"a"
        assert await a.gate() and a.solo  # nobody asked: it stays solo
        b = await mode("b")
        await b.open(eligible=True)  # too late: a holds the key
        assert not b.solo and b.blocked
        assert not await b.gate()  # it asks a to end, and waits
        assert r.get(keys.solo_end) == b"b" and b.blocked
        # a's next round trip sees the request: no more requests from memory, at once
        assert await a.gate() and not a.solo
        await a.after_flush(own_pending=True)  # an own request still unwritten: a waits
        assert r.get(keys.solo) == b"a" and not await b.gate()
        await a.after_flush(own_pending=False)
        assert r.get(keys.solo) == SHARED.encode() and not r.exists(keys.solo_end)
        assert await b.gate() and not b.blocked and not b.solo
        assert await a.gate() and not a.solo  # for good
        # a third node finds the crawl shared at once
        c = await mode("c")
        await c.open(eligible=True)
        assert await c.gate() and not c.solo

    run(redis_url, keys, test)


def test_a_solo_node_no_longer_a_member_is_taken_over(redis_url: str, keys: FrontierKeys) -> None:
    async def test(mode: Any, store: FrontierStore, r: redis.Redis) -> None:
        a = await mode("a")
        await a.open(eligible=True)
        b = await mode("b")
        assert not await b.gate()
        # a dies: its heartbeat goes stale and recovery takes it out of the members
        r.zadd(keys.nodes, {"a": 1})
        wait_for_uptime(r, 2)
        assert (await store.recover("b", 1000))[0] == ["a"]
        assert await b.gate() and not b.blocked
        assert r.get(keys.solo) == SHARED.encode()
        # were it only frozen, its next round trip finds the crawl shared
        assert await a.gate() and not a.solo

    run(redis_url, keys, test)


def test_no_node_is_solo_in_a_crawl_that_held_a_request_or_when_not_eligible(
    redis_url: str, keys: FrontierKeys
) -> None:
    async def test(mode: Any, store: FrontierStore, r: redis.Redis) -> None:
        a = await mode("a")
        await a.open(eligible=False)
        assert not a.solo and not r.exists(keys.solo)
        assert await a.gate() and r.get(keys.solo) == SHARED.encode()
        r.delete(keys.solo)  # (as if the key had never been written)
        payload = json.dumps({"url": "http://s.test/"})
        await store.sync("x", children=[Child(b"s", 0, False, 0, "s.test", payload)])
        b = await mode("b")
        await b.open(eligible=True)
        assert not b.solo and not r.exists(keys.solo)
        # an earlier run of the same node id left it holding the key: the new run shares
        r.set(keys.solo, "b")
        assert await b.gate() and r.get(keys.solo) == SHARED.encode()

    run(redis_url, keys, test)


def test_a_solo_node_that_stood_still_half_a_heartbeat_timeout_hands_out_nothing(
    redis_url: str, keys: FrontierKeys
) -> None:
    async def test(mode: Any, store: FrontierStore, r: redis.Redis) -> None:
        a = await mode("a")
        a.window = 0.0  # (as if every round trip came back after half the timeout)
        await a.open(eligible=True)
        assert r.get(keys.solo) == b"a" and not a.solo
        a.window = TIMEOUT / 2
        assert await a.gate() and a.solo  # a round trip found it still solo

    run(redis_url, keys, test)


def test_own_children_a_failed_round_trip_wrote_after_all_are_adopted_not_returned(
    redis_url: str, keys: FrontierKeys
) -> None:
    # the round trip's reply was lost, but Redis ran it: the own children are the node's
    # leases already; returning them would have them fetched again beside Scrapy's own fetch
    async def test(mode: Any, store: FrontierStore, r: redis.Redis) -> None:
        payload = json.dumps({"url": "http://o.test/a"})
        mine = Child(b"oa", 3, False, 0, "o.test", payload, own=True)
        other = Child(b"ob", 3, False, 0, "p.test", json.dumps({"url": "http://p.test/b"}))
        await store.sync("n", children=[mine, other._replace(own=True)])  # the lost reply
        stats = get_crawler().stats
        assert stats is not None
        adopted = await reconcile_leases(
            store, "n", leased={}, acks=list, ready=deque(), stats=stats, own=[mine]
        )
        assert [(child, lease.site) for child, lease in adopted] == [(mine, "o.test")]
        held = await store.held_leases("n")
        assert [lease.rid for _, lease in adopted] == held[keys.shard_of("o.test")]
        # the other one is no child waiting here: it goes back to the queue
        assert sum(len(rids) for rids in held.values()) == 1
        assert (await store.drained())[0] == 1

    run(redis_url, keys, test)
