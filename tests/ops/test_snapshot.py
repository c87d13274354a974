"""One snapshot of a crawl read from a real Redis: named figures, the same from the blocking and
the asyncio reader, and a bounded number of commands however big the crawl."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
import redis.asyncio as aioredis
from crawl_writes import beat, queue, queue_raw

from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.ops.snapshot import Snapshot, aread_snapshot, read_snapshot
from distcrawl.ops.status import build_status

# several shards: the snapshot reads every one of them
KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)
PRIORITIES = {"seed": 1000, "category": 300, "listing": 200, "product": 100}


def test_queue_split_by_page_kind_counts_retries_and_custom_seeds_with_the_nearest_kind(r) -> None:
    # a retried product (99), a retried listing (199), a JSON seed at 5000, one at priority 0
    queue(r, KEYS, 1000, 5000, 300, 299, 200, 199, 100, 99, 98, 0, -50)
    snap = read_snapshot(r, KEYS, page_priorities=PRIORITIES)
    assert snap.queued == 11
    assert snap.queued_by_kind == {"seed": 2, "category": 2, "listing": 2, "product": 5}


def test_the_async_reader_sees_what_the_blocking_one_sees(r, redis_url) -> None:
    queue(r, KEYS, 1000, 300, 100)
    beat(r, KEYS, "a", {"item_scraped_count": 1})
    r.hset(KEYS.shard(0).dead, "d", json.dumps({"url": "http://a.test/", "reason": "http_500"}))

    async def read() -> Snapshot:
        client = aioredis.from_url(redis_url)
        try:
            return await aread_snapshot(client, KEYS, dead_sample=10)
        finally:
            await client.aclose()

    sync = read_snapshot(r, KEYS)
    async_ = asyncio.run(read())
    for snap in (sync, async_):
        snap.at_ms = 0
        snap.nodes["a"].heartbeat_ms = None
        # Redis' memory moves between two reads; both read it (INFO memory)
        assert snap.redis_memory is not None and snap.redis_memory["policy"] == "noeviction"
        snap.redis_memory = None
    assert sync == async_
    assert sync.dead_letters.by_reason == {"http_500": 1}


def test_reading_a_large_queue_is_a_few_round_trips(r) -> None:
    queue_raw(r, KEYS.shard(0), 100, *(str(seq) for seq in range(1, 20_001)))
    before = int(r.info("stats")["total_commands_processed"])
    snap = read_snapshot(r, KEYS)
    after = int(r.info("stats")["total_commands_processed"])
    assert snap.queued_by_kind["product"] == 20_000
    # a bounded number of commands (ZCOUNTs per band, per shard), never one per queued entry
    # - 1: the first INFO (3: revisits; 4: the error groups and findings; 3: Crawl-delays and
    # holds)
    assert after - before - 1 < 15 + KEYS.shards * 21


def _commands(r: redis.Redis) -> dict[str, int]:
    return {k: v["calls"] for k, v in r.info("commandstats").items()}


def _crawl_over_sites(r: redis.Redis, sites: int) -> None:
    """*sites* sites that were crawled (each has its budget hash), a tenth of them with a
    request in flight and one waiting for its site, on two nodes."""
    store = FrontierStore(r, KEYS)
    one_each = SiteBudget(concurrency=1)
    kids = [
        (f"a{i}", 100, False, 0, f"s{i}.test", json.dumps({"url": f"http://s{i}.test/"}))
        for i in range(sites)
    ]
    for at in range(0, sites, 2000):
        store.sync("n1", children=kids[at : at + 2000])
    while True:
        store.views.poke()
        reply = store.sync("n1", lease=500)
        if not reply.leased:
            break
        store.sync("n1", acks=[leased.lease for leased in reply.leased])
    busy = max(1, sites // 10)
    more = [
        (f"{k}{i}", 100, False, 0, f"s{i}.test", json.dumps({"url": f"http://s{i}.test/{k}"}))
        for i in range(busy)
        for k in "bc"
    ]
    store.sync("n2", children=more)
    for _ in range(2 * busy // 500 + 4):
        store.views.poke()
        store.sync("n2", lease=500, budget=one_each)
    beat(r, KEYS, "n1", {})
    beat(r, KEYS, "n2", {})


@pytest.mark.parametrize("sites", [10, 10_000])
def test_one_status_read_costs_the_same_bounded_commands_for_10_or_10000_sites(r, sites) -> None:
    _crawl_over_sites(r, sites)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    busy = max(1, sites // 10)
    assert status["frontier"]["waiting_for_site"] == busy
    assert status["frontier"]["sites_waiting"] == busy
    assert status["frontier"]["in_flight"] == busy
    before = _commands(r)
    read_snapshot(r, KEYS, page_priorities=PRIORITIES)
    after = _commands(r)
    calls = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    calls["cmdstat_info"] -= 1  # the INFO that read the figures
    total = sum(calls.values())
    bands, shards, nodes, top = len(PRIORITIES), KEYS.shards, 2, 20
    # control slot, each shard, each node, the first due sites of each shard, the top sites
    # (and as many of the latest cut or held sites), their requests in flight (one read per
    # shard); the servers of several sites (none here)
    bound = 6 + shards * (14 + bands) + 3 * nodes + shards * top + top * (2 + bands) + 1
    print(f"status read: {sites} sites, {total} commands (bound {bound})")
    assert total <= bound, calls
    assert not any("scan" in name or name == "cmdstat_keys" for name in calls), calls


def test_dead_letters_are_counted_over_a_sample_of_the_records(r) -> None:
    for i in range(30):
        record = {"url": f"http://s{i % 3}.test/{i}", "reason": "http_503"}
        r.hset(KEYS.shard(i % KEYS.shards).dead, f"d{i}", json.dumps(record))
    snap = read_snapshot(r, KEYS, dead_sample=10)
    assert (snap.dead_letters.total, snap.dead_letters.counted) == (30, 10)
    assert snap.dead_letters.by_reason == {"http_503": 10}
    whole = read_snapshot(r, KEYS)
    assert whole.dead_letters.counted == 30
    assert whole.dead_letters.by_site == {"s0.test": 10, "s1.test": 10, "s2.test": 10}
    assert read_snapshot(r, KEYS, dead_sample=0).dead_letters.by_reason == {}
