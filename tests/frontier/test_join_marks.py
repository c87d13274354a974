"""A node that opens writes its mark in every shard: Redis coming back with data older than
the node's open (which lost its membership too) is noticed at the node's first call of any
shard, before it leases, so it never holds a lease outside the members that recovery and drain
detection read."""

from __future__ import annotations

import hashlib
import json

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore

SITE = "j.test"


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def keys(redis_url: str, request: pytest.FixtureRequest) -> FrontierKeys:
    keys = FrontierKeys("jm", "jm:start_urls", shards=request.param)
    client = redis.Redis.from_url(redis_url)
    clear_frontier(client, keys)
    client.close()
    return keys


def child(path: str) -> Child:
    url = f"http://{SITE}/{path}"
    payload = json.dumps({"u": url}, separators=(",", ":"))
    return Child(hashlib.sha1(url.encode()).digest(), 0, False, 0, SITE, payload)


def snapshot(r: redis.Redis) -> list[tuple[bytes, int, bytes]]:
    return [(k, max(0, int(r.pttl(k))), r.dump(k)) for k in r.scan_iter(count=1000)]


def restore(r: redis.Redis, dump: list[tuple[bytes, int, bytes]]) -> None:
    r.flushall()
    for key, ttl, value in dump:
        r.restore(key, ttl, value, replace=True)


def test_a_rewind_to_before_a_nodes_open_is_noticed_before_it_leases(
    redis_url: str, keys: FrontierKeys
) -> None:
    r = redis.Redis.from_url(redis_url)
    a = FrontierStore(redis.Redis.from_url(redis_url), keys, refresh=0.0)
    a.heartbeat("a", "{}")
    a.sync("a", children=[child(f"p{i}") for i in range(4)], tag="ta")
    older = snapshot(r)  # a replica's copy, from before "b" opened
    b = FrontierStore(redis.Redis.from_url(redis_url), keys, refresh=0.0)
    assert b.rejoin("b") == 0
    b.heartbeat("b", "{}")
    restore(r, older)  # a failover to that replica: "b" is no member any more
    assert r.zscore(keys.nodes, "b") is None
    result = b.sync("b", lease=4, tag="tb")
    assert result.rewound is not None and not result.leased
    # the node does what it does after a rewind: a member again, then it leases
    b.heartbeat("b", "{}")
    leased = []
    for _ in range(3):  # (a node that knows no shard's queue reads them first)
        again = b.sync("b", lease=4, tag="tb2")
        assert again.rewound is None
        leased += again.leased
        if leased:
            break
    assert leased
    assert r.zscore(keys.nodes, "b") is not None
    r.close()
