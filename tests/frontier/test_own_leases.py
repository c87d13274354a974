"""A node's own children (``Child.own``): written as its leases, never queued, and ended by
its ack or by its recovery like any lease."""

from __future__ import annotations

import json

import pytest
import redis
from frontier_state import clear_frontier, wait_for_uptime

from distcrawl.frontier.batch import Child
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("t", "t:start_urls", shards=request.param)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0)


def child(url: str, prio: int = 0, *, own: bool = False, dont_filter: bool = False) -> Child:
    payload = json.dumps({"url": f"http://{url}.test/"})
    return Child(url.encode(), prio, dont_filter, 0, f"{url}.test", payload, own=own)


def queued(store: FrontierStore) -> int:
    return int(store.drained()[0])


def held(store: FrontierStore, node: str) -> int:
    return sum(len(rids) for rids in store.held_leases(node).values())


def test_own_children_are_the_nodes_leases_and_the_rest_is_queued(store: FrontierStore) -> None:
    kids = [child("a", own=True), child("b"), child("c", own=True), child("d")]
    result = store.sync("n1", children=kids)
    got = sorted((c.fp, lease is not None) for c, lease in result.own)  # (shard by shard)
    assert got == [(b"a", True), (b"c", True)]
    assert result.added == 2 and queued(store) == 2 and held(store, "n1") == 2
    # each lease names the shard that holds it: its ack ends it there, once
    leases = [lease for _, lease in result.own if lease is not None]
    assert {lease.site for lease in leases} == {"a.test", "c.test"}
    assert store.sync("n1", acks=leases).acked == 2
    assert held(store, "n1") == 0
    again = store.sync("n1", acks=leases)
    assert (again.acked, again.stale_acks) == (0, 2)
    # only what was queued is left for anyone to lease
    got = store.sync("n2", lease=10).leased
    assert sorted(json.loads(g.payload)["url"] for g in got) == ["http://b.test/", "http://d.test/"]


def test_an_own_child_the_dupefilter_holds_is_not_written(store: FrontierStore) -> None:
    store.sync("other", children=[child("a"), child("b")])
    result = store.sync(
        "n1", children=[child("a", own=True), child("b", own=True, dont_filter=True)]
    )
    # "a" was queued first by another node: the node learns it and nothing is stored twice;
    # dont_filter bypasses the dupefilter as for any child
    assert sorted((c.fp, lease is None) for c, lease in result.own) == [
        (b"a", True),
        (b"b", False),
    ]
    assert result.filtered == 1 and held(store, "n1") == 1 and queued(store) == 2


def test_a_dead_nodes_own_leases_return_to_the_queue_with_their_priority(
    store: FrontierStore,
) -> None:
    result = store.sync("dead", children=[child(f"u{i}", i, own=True) for i in range(20)])
    assert all(lease is not None for _, lease in result.own)
    assert held(store, "dead") == 20 and queued(store) == 0
    store.client.zadd(store.keys.nodes, {"dead": 1})  # last heartbeat long ago
    wait_for_uptime(store.client, 2)  # longer than the timeout
    assert store.recover("alive", 1000)[1] == 20
    assert held(store, "dead") == 0 and queued(store) == 20
    urls: list[str] = []
    while len(urls) < 20:
        got = store.sync("alive", lease=20).leased
        assert got
        urls += [json.loads(g.payload)["url"] for g in got]
    expected = [f"http://u{i}.test/" for i in reversed(range(20))]
    # priority order is exact within one shard (across shards it is approximate)
    assert urls == expected if store.keys.shards == 1 else sorted(urls) == sorted(expected)
    # an ack from the node presumed dead changes nothing
    late = store.sync("dead", acks=[lease for _, lease in result.own if lease is not None])
    assert (late.acked, late.stale_acks) == (0, 20)
    assert held(store, "alive") == 20
