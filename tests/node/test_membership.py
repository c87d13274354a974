"""A node holding leases is always a member the cluster can see: in C:nodes from its open on,
or claimed in C:recovering until every shard released its leases; its seeds are in a list
until the shards have them, and an ack goes to Redis only with or after its page's children.
Else a death loses work: recovery and drain detection read the members' leases only."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import redis
from crawl_nodes import assert_clean_log, assert_each_product_once, start_nodes, stop_all, wait_for
from frontier_state import KEYS, clear_frontier, wait_for_uptime
from frontier_state import leased as leased_by

from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore

SITE = "m.test"


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("m", "m:start_urls", shards=request.param)
    clear_frontier(client, keys)
    client.delete(keys.start_urls)
    return FrontierStore(client, keys, refresh=0.0)


def child(path: str) -> Child:
    return Child(path, 100, False, 0, SITE, json.dumps({"url": f"http://{SITE}/{path}"}))


def leased(store: FrontierStore) -> int:
    return int(store.drained()[2])


def silent_since_long(store: FrontierStore, node: str) -> None:
    store.client.zadd(store.keys.nodes, {node: 1})
    wait_for_uptime(store.client, 2)


def test_a_node_is_a_member_from_its_open_so_its_death_after_a_first_lease_is_recovered(
    store: FrontierStore,
) -> None:
    # an earlier run of n1 died holding a lease and a seed
    store.sync("n1", children=[child("a"), child("b")])
    store.client.lpush(store.keys.start_urls, "http://m.test/seed")
    assert store.take_seeds("n1", 5).fresh == [b"http://m.test/seed"]
    assert len(store.sync("n1", lease=1).leased) == 1
    # the next run's open: its claim, then what the earlier run held goes back (the seed to
    # be taken again first, through the dupefilter: its request may be in the crawl)
    assert store.claim("n1", json.dumps({"run": "2"}), 60_000, force=True)[0] == 1
    assert store.rejoin("n1") == 2
    assert leased(store) == 0 and store.drained()[0] == 2
    assert store.client.lrange(store.keys.seeds.returned, 0, -1) == [b"http://m.test/seed"]
    assert store.client.zscore(store.keys.nodes, "n1") is not None  # still a member
    # its first lease, and it dies before its first heartbeat
    assert len(store.sync("n1", lease=1).leased) == 1
    assert leased(store) == 1  # the crawl is not drained
    silent_since_long(store, "n1")
    nodes, moved = store.recover("n2", 1_000)
    assert nodes == ["n1"] and moved == 1
    assert leased(store) == 0 and store.drained()[0] == 2


def test_a_clean_stop_still_leaves_the_cluster(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a")])
    store.claim("n1", json.dumps({"run": "1"}), 60_000)
    store.sync("n1", lease=1)
    assert store.release("n1") == 1
    assert store.client.zscore(store.keys.nodes, "n1") is None
    assert store.client.hget(store.keys.node("n1"), "stopped_at") is not None


def test_leases_of_a_node_whose_recovery_did_not_finish_keep_the_crawl_from_draining(
    store: FrontierStore,
) -> None:
    store.sync("dead", children=[child("a"), child("b")])
    assert len(store.sync("dead", lease=2).leased) == 2
    silent_since_long(store, "dead")
    # a claimer takes the dead node out of C:nodes, and dies before any shard released its
    # leases (what `recover` does first, in the control slot)
    assert store.client.zrem(store.keys.nodes, "dead") == 1
    now_ms = int(time.time() * 1000)
    store.client.zadd(store.keys.recovering, {"dead": now_ms - 5_000})
    assert leased(store) == 2  # the crawl is not drained
    # a recovery later takes the stuck claim over
    nodes, moved = store.recover("n2", 1_000)
    assert nodes == ["dead"] and moved == 2
    assert leased(store) == 0 and store.drained()[0] == 2
    assert store.client.zcard(store.keys.recovering) == 0


def test_seeds_stay_in_the_taken_list_while_a_shard_refused_their_push(
    store: FrontierStore,
) -> None:
    store.client.lpush(store.keys.start_urls, "http://m.test/")
    assert store.take_seeds("n1", 5).fresh == [b"http://m.test/"]
    seeding = store.keys.seeds.taken("n1")
    # the node wrote its mark in the seeds' shard once; Redis then lost it (a restart from
    # older data, a reset): the shard does nothing with the next fenced call
    assert store.sync("n1", children=[child("x")], tag="t1").rewound is None
    shard = store.keys.site_keys(SITE)
    assert store.client.hdel(shard.marks, "n1") == 1
    result = store.sync("n1", children=[child("seed")], seeds_done=True, tag="t1")
    assert result.rewound is not None and result.seeds_pending
    assert store.client.llen(seeding) == 1  # a death now gives the seed back
    # the node goes on with a new tag: the push lands, then the taken list is cleared
    store.forget_marks("n1")
    (batch,) = result.unsent
    again = store.sync("n1", children=batch.children, seeds_done=True, tag="t2")
    assert again.rewound is None and not again.seeds_pending and again.added == 1
    assert store.client.llen(seeding) == 0


def test_a_node_presumed_dead_leases_nothing_before_it_is_a_member_again(
    store: FrontierStore,
) -> None:
    # n1 pushed to one shard and never leased: it wrote no mark in any other shard
    store.heartbeat("n1", "{}")
    assert store.sync("n1", children=[child("a")], tag="t1").added == 1
    # work in the other shards (with one shard: in that one), pushed by another node
    others = [f"o{i}.test" for i in range(64)]
    store.sync(
        "n2", children=[Child(s, 100, False, 0, s, f'{{"url": "http://{s}/"}}') for s in others]
    )
    # n1 falls silent for longer than the timeout, and is recovered
    silent_since_long(store, "n1")
    assert store.recover("n2", 1_000)[0] == ["n1"]
    assert store.client.zscore(store.keys.nodes, "n1") is None
    # n1 was alive after all: its next call is told so by every shard, one it never called
    # too, and leases nothing while it is outside C:nodes (a death then would leave a lease
    # that no recovery and no drain count sees)
    result = store.sync("n1", lease=1, tag="t1")
    assert result.rewound is not None and result.rewound.startswith(b"!")
    assert not result.leased and leased(store) == 0
    # a member again (its heartbeat), it leases: the tombstones are what it expects now
    store.heartbeat("n1", "{}")
    again = store.sync("n1", lease=1, tag="t2")
    assert again.rewound is None and len(again.leased) == 1
    # a later run of n1 (its open returns what this one holds) starts from no mark
    later = FrontierStore(store.client, store.keys, refresh=0.0)
    assert later.rejoin("n1") == 1
    assert later.sync("n1", lease=1, tag="t3").rewound is None


@pytest.mark.slow
def test_a_node_paused_past_its_timeout_joins_again_and_the_crawl_loses_nothing(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    """A node stopped (SIGSTOP: a long pause) until another one recovered its leases, then
    resumed: it learns it at its next call, joins again, and the crawl stores every product
    once."""
    shop = shop_factory(products=200, latency_ms=200)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "5", "CONCURRENT_REQUESTS": "2"}
    paused, other = nodes = start_nodes(
        ["paused", "other"],
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        settings=settings,
    )
    try:
        assert wait_for(lambda: leased_by(r, "paused") > 0, 120), paused.log()[-2000:]
        os.kill(paused.proc.pid, signal.SIGSTOP)
        try:
            # its leases back in the frontier, and out of C:nodes: the other node recovered it
            recovered = wait_for(
                lambda: r.zscore(KEYS.nodes, "paused") is None and leased_by(r, "paused") == 0,
                120,
            )
        finally:
            os.kill(paused.proc.pid, signal.SIGCONT)
        assert recovered, other.log()[-2000:]
        assert paused.wait() == 0 and other.wait() == 0
    finally:
        stop_all(nodes)
    log = paused.log()
    assert "was presumed dead and its leases were recovered" in log, log[-3000:]
    assert_clean_log(log)
    assert_clean_log(other.log())
    assert_each_product_once(mongo_uri, shop)


def test_tombstones_of_nodes_that_never_came_back_go_after_a_day(store: FrontierStore) -> None:
    day_ms = 86_400_000
    now_ms = int(time.time() * 1000)
    shards = [store.keys.shard(i) for i in range(store.keys.shards)]
    for shard in shards:
        store.client.hset(shard.marks, "gone", f"!{now_ms - day_ms - 60_000}.old")
        store.client.hset(shard.marks, "recent", f"!{now_ms - day_ms // 2}.new")
        store.client.hset(shard.marks, "live", "t:1")
    store.heartbeat("n1", "{}")
    silent_since_long(store, "n1")
    assert store.recover("n2", 1_000)[0] == ["n1"]
    for shard in shards:
        marks = store.client.hgetall(shard.marks)
        assert b"gone" not in marks  # a recovery drops tombstones older than a day
        assert marks[b"recent"].endswith(b".new") and marks[b"live"] == b"t:1"
        assert marks[b"n1"].startswith(b"!")  # and leaves its own, the same in every shard
    assert len({store.client.hget(s.marks, "n1") for s in shards}) == 1
