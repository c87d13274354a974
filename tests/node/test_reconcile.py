"""Reconciling a node's leases with Redis after a round trip of unknown outcome, on a real
Redis: what the node finishes while it asks Redis what it holds stays its own.

Found by the fault search (``bench/chaos.py --replay 91313593``: a 0.4 s ``CLUSTERDOWN``; a
page fetched twice): the acks were read before Redis answered and the requests in progress
after, so a request done meanwhile was in neither; its lease went back to the queue, another
node fetched the page again and the first node's ack was fenced off as stale."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import deque

import pytest
import redis
import redis.asyncio
from frontier_state import clear_frontier
from scrapy import Request
from scrapy.utils.test import get_crawler

from distcrawl.frontier.batch import Lease
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.node.scheduler.reconcile import reconcile_leases

SITE = "r.test"


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def keys(redis_url: str, request: pytest.FixtureRequest) -> FrontierKeys:
    keys = FrontierKeys("rec", "rec:start_urls", shards=request.param)
    clear_frontier(redis.Redis.from_url(redis_url), keys)
    return keys


def child(path: str) -> Child:
    url = f"http://{SITE}/{path}"
    payload = json.dumps({"u": url}, separators=(",", ":"))
    return Child(hashlib.sha1(url.encode()).digest(), 0, False, 0, SITE, payload)


def test_a_request_done_while_redis_answers_keeps_its_lease(
    redis_url: str, keys: FrontierKeys
) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = FrontierStore(client, keys, refresh=0.0)
            await store.heartbeat("n", "{}")
            await store.sync("n", children=[child("a"), child("b")], tag="t")
            leased: list[Lease] = []
            for _ in range(3):  # (a node that knows no shard's queue reads them first)
                leased += [x.lease for x in (await store.sync("n", lease=2, tag="t")).leased]
                if len(leased) == 2:
                    break
            assert len(leased) == 2
            first, second = (Request(f"http://{SITE}/{x}") for x in "ab")
            in_progress = {first: leased[0], second: leased[1]}
            acks: list[Lease] = []

            def done() -> None:  # the engine finishes ``first`` as the node acks it
                acks.append(in_progress.pop(first))

            # runs at the reconcile's first wait: its question to Redis
            asyncio.get_running_loop().call_soon(done)
            stats = get_crawler().stats
            assert stats is not None
            await reconcile_leases(
                store, "n", leased=in_progress, acks=lambda: acks, ready=deque(), stats=stats
            )
            assert not in_progress.get(first) and acks == [leased[0]]
            held = await store.held_leases("n")
            assert sum(len(rids) for rids in held.values()) == 2  # nothing went back
            assert (await store.drained())[0] == 0
        finally:
            await client.aclose()

    asyncio.run(main())
