"""Redis comes back with older state (a crash with ``appendfsync everysec``, a failover to a
lagging replica): rids stay unique, nodes notice, forget what they pushed, and nothing is lost.

The older state is made the way it happens: a copy of every key taken mid-crawl (DUMP), and
later the server killed and restarted from a data directory holding only that copy.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import redis
from crawl_nodes import start_nodes, stop_all, stored_urls, wait_for
from frontier_state import leases_left, queued_values

from distcrawl.frontier.protocol.spec import queued_in
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.servers.process import RedisServer

Snapshot = list[tuple[bytes, int, bytes]]


def snapshot(r: redis.Redis) -> Snapshot:
    """Every key with its TTL and DUMP, read in one MULTI/EXEC (one consistent moment)."""
    keys = r.keys("*")
    pipe = r.pipeline(transaction=True)
    for key in keys:
        pipe.pttl(key)
        pipe.dump(key)
    got = pipe.execute()
    return [
        (key, max(0, int(got[2 * i])), got[2 * i + 1])
        for i, key in enumerate(keys)
        if got[2 * i + 1] is not None
    ]


def restart_from(server: RedisServer, snap: Snapshot, scratch: Path) -> None:
    """Kill ``server`` and start it again on its port from a data directory holding ``snap``
    only (written by a scratch server, so no node sees the server before the data is back)."""
    scratch_server = RedisServer(data_dir=scratch / "data", log_path=scratch / "redis.log")
    scratch_server.start()
    try:
        c = scratch_server.client()
        for key, ttl, value in snap:
            c.restore(key, ttl, value, replace=True)
        c.close()
    finally:
        scratch_server.stop()  # a clean stop: its append-only file holds the snapshot
    server.kill()
    shutil.rmtree(server.data_dir)
    shutil.copytree(scratch / "data", server.data_dir)
    server.start()


def child(url: str) -> Child:
    return Child(url, 100, False, 0, "w.test", json.dumps({"url": url}))


def test_a_node_sees_its_last_write_gone_and_rids_stay_unique(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    keys = FrontierKeys("w", "w:start_urls")
    shard_keys = keys.site_keys("w.test")  # every request here is of one site, one shard

    def queued_rids() -> set[str]:
        return set(queued_values(r, shard_keys))

    store = FrontierStore(r, keys)
    reply = store.sync("n1", children=[child("a")], tag="t1")
    assert reply.added == 1 and reply.rewound is None
    snap = snapshot(r)
    reply = store.sync("n1", children=[child("b"), child("c")], tag="t1")
    assert reply.added == 2
    before = queued_rids()
    r.close()
    restart_from(redis_server, snap, tmp_path)
    r = redis_server.client()
    store.client = r
    kept = queued_rids()
    assert len(kept) == 1  # b and c are gone with the lost write
    lost = before - kept
    # the node's next sync finds its last mark missing: nothing is done, it is told
    reply = store.sync("n1", children=[child("d")], tag="t1")
    assert reply.rewound == b"t1:1"
    assert [b.children for b in reply.unsent] == [[child("d")]]
    assert queued_rids() == kept
    # with a new tag (and no mark expected) it goes on; its rids repeat no lost one
    reply = store.sync("n1", children=[child("b"), child("c")], tag="t2")
    assert reply.added == 2 and reply.rewound is None
    new = queued_rids() - kept
    assert len(new) == 2
    assert not new & lost  # an old holder's ack of a lost rid cannot hit a new request
    # the seq went back: the new requests have the lost ones' seqs, told apart by the tag
    assert {rid.split(".")[0] for rid in new} == {rid.split(".")[0] for rid in lost}
    # a sync that already ran (its reply lost) may come again with the same marks
    shard = keys.shard_of("w.test")
    mark = r.hget(keys.shard(shard).marks, "n1").decode()
    fenced = store._fences["n1"]
    fenced.pending[shard] = f"t2:{fenced.count + 1}"
    fenced.count += 1
    assert store.sync("n1", children=[child("e")], tag="t2").added == 1  # it ran: mark written
    fenced.last[shard] = mark  # as if its reply was lost: the same mark goes again
    fenced.pending[shard] = r.hget(keys.shard(shard).marks, "n1").decode()
    again = store.sync("n1", children=[child("e")], tag="t2")
    assert again.rewound is None and again.filtered == 1
    assert store.sync("n1", children=[child("f")], tag="t2").added == 1
    r.close()


def frontier_left(r: redis.Redis) -> dict[str, int]:
    shards = FrontierKeys("catalog", "catalog:start_urls").all_shards()
    return {
        "queued": sum(queued_in(r.zrange(s.levels, 0, -1, withscores=True)) for s in shards),
        "delayed": sum(r.zcard(s.delayed) for s in shards),
        "leased": len(leases_left(r)),
        "payloads": sum(r.hlen(s.requests) for s in shards),
        "site_active": sum(int(n) for s in shards for n in r.hvals(s.active)),
    }


@pytest.mark.slow
def test_redis_restarted_from_older_data_mid_crawl_loses_nothing(
    redis_server: RedisServer, mongo_uri: str, shop_factory, tmp_path: Path
) -> None:
    if not redis_server.running:
        redis_server.start()
    r = redis_server.client()
    r.flushall()
    shop = shop_factory(products=200, latency_ms=100)
    settings = {
        "DISTCRAWL_HEARTBEAT_TIMEOUT": "30",
        "DISTCRAWL_SITE_CONCURRENCY": "2",
        "CONCURRENT_REQUESTS": "4",
    }
    nodes = start_nodes(
        ("w1", "w2"),
        redis_url=redis_server.url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings=settings,
    )
    try:
        r.lpush("catalog:start_urls", shop.url)
        # early, while listings are still being found (they go before product pages)
        assert wait_for(lambda: len(shop.request_log()) >= 4, 120), nodes[0].log()[-2000:]
        snap = snapshot(r)
        at_snapshot = len(shop.request_log())
        # the crawl goes on: listings acked, product links pushed and remembered, products
        # not fetched yet; all of that is lost with the rewind
        assert wait_for(lambda: len(shop.request_log()) >= at_snapshot + 40, 120)
        r.close()
        restart_from(redis_server, snap, tmp_path / "scratch")
        r = redis_server.client()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert Counter(urls).most_common(1)[0][1] == 1
    assert set(urls) == shop.expected_product_urls()
    assert frontier_left(r) == {
        "queued": 0,
        "delayed": 0,
        "leased": 0,
        "payloads": 0,
        "site_active": 0,
    }
    r.close()
    logs = "".join(n.log() for n in nodes)
    assert "Redis lost this node's last writes" in logs
