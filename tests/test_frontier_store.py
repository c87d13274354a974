"""The frontier's Redis protocol (frontier.lua) against a real Redis-protocol server."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from distcrawl.cluster import build_status, read_snapshot
from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget, effective_factor


@pytest.fixture
def store(redis_url: str) -> FrontierStore:
    return FrontierStore(redis.Redis.from_url(redis_url), FrontierKeys("t", "t:start_urls"))


def child(
    url: str,
    prio: int = 0,
    fp: str | None = None,
    dont_filter: bool = False,
    delay: int = 0,
    site: str = "",
):
    return (fp if fp is not None else url, prio, dont_filter, delay, site, json.dumps({"url": url}))


def leased_urls(out: list) -> list[str]:
    return [json.loads(out[i + 1])["url"] for i in range(0, len(out), 2)]


def test_priority_first_then_first_in_first_out(store: FrontierStore) -> None:
    kids = [
        child("p1", 100),
        child("c1", 300),
        child("p2", 100),
        child("l1", 200),
        child("c2", 300),
    ]
    added, *_ = store.sync("n1", children=kids)
    assert added == 5
    out = store.sync("n1", lease=10)[4]
    assert leased_urls(out) == ["c1", "c2", "l1", "p1", "p2"]


def test_dupefilter_records_on_first_accept_and_dont_filter_bypasses(store: FrontierStore) -> None:
    added, filtered, *_ = store.sync(
        "n1", children=[child("a"), child("a"), child("a", dont_filter=True)]
    )
    assert (added, filtered) == (2, 1)
    assert store.client.sismember(store.keys.dupefilter, "a")


def test_lease_moves_to_in_flight_and_ack_removes(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a"), child("b")])
    out = store.sync("n1", lease=1)[4]
    rid = out[0].decode()
    assert store.client.zcard(store.keys.leases("n1")) == 1
    assert store.client.zcard(store.keys.queue) == 1
    _, _, _, acked, *_ = store.sync("n1", acks=[rid])
    assert acked == 1
    assert store.client.zcard(store.keys.leases("n1")) == 0
    assert not store.client.hexists(store.keys.requests, rid)


def test_release_returns_leases_with_their_priority(store: FrontierStore) -> None:
    store.sync("n1", children=[child("hi", 300), child("lo", 100)])
    store.sync("n1", lease=2)
    assert store.release("n1") == 2
    out = store.sync("n2", lease=1)[4]
    assert leased_urls(out) == ["hi"]


def test_recover_dead_node_once_even_when_two_nodes_race(
    store: FrontierStore, redis_url: str
) -> None:
    store.sync("dead", children=[child(f"u{i}") for i in range(50)])
    store.sync("dead", lease=50)
    store.client.zadd(store.keys.nodes, {"dead": 1})  # last heartbeat long ago
    # silence counts from the server's start only: let it be up for longer than the timeout
    deadline = time.monotonic() + 30
    while store.client.info("server")["uptime_in_seconds"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    results: list = []
    barrier = threading.Barrier(2)

    def recover(me: str) -> None:
        s = FrontierStore(redis.Redis.from_url(redis_url), store.keys)
        barrier.wait()
        results.append(s.recover(me, 1000))

    threads = [threading.Thread(target=recover, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r[1] for r in results) == [0, 50]
    assert store.client.zcard(store.keys.queue) == 50
    assert not store.client.exists(store.keys.leases("dead"))


def test_live_node_is_not_recovered(store: FrontierStore) -> None:
    store.sync("alive", children=[child("a")])
    store.sync("alive", lease=1)
    assert store.recover("other", 60_000) == [[], 0]
    assert store.client.zcard(store.keys.leases("alive")) == 1


def test_delayed_retry_is_parked_until_due(store: FrontierStore) -> None:
    # parked for a minute: no slow machine gets from one sync to the next in that time
    _, _, parked, *_ = store.sync("n1", children=[child("r", delay=60_000, dont_filter=True)])
    assert parked == 1
    out = store.sync("n1", lease=5)[4]
    assert out == []
    # the minute passes: its due time (server clock, ms) is now in the past
    delayed = store.keys.delayed
    store.client.zadd(delayed, {rid: 0 for rid in store.client.zrange(delayed, 0, -1)})
    out = store.sync("n1", lease=5)[4]
    assert leased_urls(out) == ["r"]


def test_seeds_move_through_a_per_node_list_and_return_on_release(store: FrontierStore) -> None:
    store.client.lpush(store.keys.start_urls, "s1", "s2", "s3")
    assert store.take_seeds("n1", 2) == [b"s1", b"s2"]
    assert store.drained()[3] == 2  # held by n1, not lost
    store.release("n1")
    assert store.client.lrange(store.keys.start_urls, 0, -1) == [b"s3", b"s2", b"s1"]
    assert store.take_seeds("n2", 3) == [b"s1", b"s2", b"s3"]
    store.sync("n2", children=[child("s1")], seeds_done=True)
    assert store.drained() == [1, 0, 0, 0, 0]


def test_dead_letters_and_requeue(store: FrontierStore) -> None:
    record = json.dumps(
        {"request": json.dumps({"url": "http://x.test/"}), "priority": 100, "reason": "http_500"}
    )
    store.sync("n1", dead=[("fp1", record)])
    assert store.client.hlen(store.keys.dead) == 1
    assert store.requeue_dead() == 1
    out = store.sync("n1", lease=1)[4]
    assert leased_urls(out) == ["http://x.test/"]
    assert store.client.hlen(store.keys.dead) == 0


def test_paused_cluster_hands_out_nothing(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a")])
    store.client.set(store.keys.paused, "1")
    assert store.sync("n1", lease=5)[4] == []
    store.client.delete(store.keys.paused)
    assert leased_urls(store.sync("n1", lease=5)[4]) == ["a"]


def test_a_shallow_queue_is_shared_among_the_live_nodes(store: FrontierStore) -> None:
    store.sync("n2")  # a second live node (its heartbeat)
    store.sync("n1", children=[child(f"u{i}") for i in range(10)])
    # n1 found the ten links and may hold 32, but takes its half; then n2 its half of the rest
    assert len(leased_urls(store.sync("n1", lease=32)[4])) == 5
    assert len(leased_urls(store.sync("n2", lease=32)[4])) == 3
    # a deep queue is not cut: the share is above what a node asks for
    store.sync("n1", children=[child(f"v{i}") for i in range(100)])
    assert len(leased_urls(store.sync("n1", lease=32)[4])) == 32


def _next_message(pubsub: redis.client.PubSub, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the subscription's own confirmation comes first and reads as None
        message = pubsub.get_message(timeout=max(0.0, deadline - time.monotonic()))
        if message is not None:
            return message
    return None


def test_idle_nodes_are_woken_when_links_arrive(store: FrontierStore) -> None:
    pubsub = store.client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(store.keys.wake)
    assert store.sync("idle", lease=16)[4] == []  # nothing to do: it sleeps
    assert store.client.smembers(store.keys.idle) == {b"idle"}
    store.sync("busy", children=[child("a"), child("b")])
    message = _next_message(pubsub, 2.0)
    assert message is not None and message["data"] == b"2"
    assert not store.client.exists(store.keys.idle)  # woken once, until it idles again
    store.sync("busy", children=[child("c")])
    assert _next_message(pubsub, 0.2) is None  # nobody sleeps: nothing published
    # leases returned by a stopping node wake the idle ones too
    assert len(leased_urls(store.sync("busy", lease=16)[4])) == 2  # its share of three
    assert len(leased_urls(store.sync("idle", lease=16)[4])) == 1
    assert store.sync("idle", lease=16)[4] == []
    store.release("busy")
    message = _next_message(pubsub, 2.0)
    assert message is not None and message["data"] == b"2"
    assert len(leased_urls(store.sync("idle", lease=16)[4])) == 2
    pubsub.close()


def test_all_keys_share_one_hash_slot(store: FrontierStore) -> None:
    from redis.crc import key_slot

    keys = store.keys
    names = [
        keys.queue,
        keys.requests,
        keys.dupefilter,
        keys.nodes,
        keys.delayed,
        keys.dead,
        keys.rejected,
        keys.paused,
        keys.idle,
        keys.wake,
        keys.leases("n"),
        keys.seeding("n"),
        keys.node("n"),
    ]
    assert len({key_slot(k.encode()) for k in names}) == 1


def test_site_budget_rate_limits_one_site_without_blocking_another(store: FrontierStore) -> None:
    kids = [child(f"a{i}", 100, site="a.test") for i in range(10)]
    kids += [child(f"b{i}", 100, site="b.test") for i in range(10)]
    store.sync("n1", children=kids)
    store.set_site_limits("a.test", rate=5, concurrency=None)
    out = store.sync("n1", lease=20)[4]
    urls = leased_urls(out)
    # one token for a.test (burst 1), every b.test request: a.test waits aside, unpolled
    assert [u for u in urls if u.startswith("a")] == ["a0"]
    assert sorted(u for u in urls if u.startswith("b")) == sorted(f"b{i}" for i in range(10))
    assert store.client.zcard(store.keys.wait("a.test")) == 9
    assert store.drained()[0] == 9  # waiting requests still count as queued
    time.sleep(0.25)  # 5/s: one more token after 200 ms
    assert leased_urls(store.sync("n1", lease=20)[4]) == ["a1"]


def test_site_concurrency_is_cluster_wide_and_acks_free_slots(store: FrontierStore) -> None:
    store.sync("n1", children=[child(f"a{i}", site="a.test") for i in range(5)])
    budget = SiteBudget(concurrency=2)
    first = store.sync("n1", lease=5, budget=budget)[4]
    assert len(leased_urls(first)) == 2
    assert leased_urls(store.sync("n2", lease=5, budget=budget)[4]) == []
    store.sync("n1", acks=[first[0].decode()], budget=budget)
    assert len(leased_urls(store.sync("n2", lease=5, budget=budget)[4])) == 1
    store.release("n1")  # returned leases free their slots too
    assert len(leased_urls(store.sync("n2", lease=5, budget=budget)[4])) == 1


def test_throttled_site_slows_down_for_everyone_then_recovers(store: FrontierStore) -> None:
    key = store.keys.site("a.test")
    store.sync("n1", feedback=[("a.test", 0, 3, 0)])
    assert float(store.client.hget(key, "factor")) == 0.5
    store.sync("n2", feedback=[("a.test", 0, 1, 0)])  # within a second: one cut per second
    assert float(store.client.hget(key, "factor")) == 0.5
    store.sync("n2", feedback=[("a.test", 20, 0, 0)])
    assert float(store.client.hget(key, "factor")) == pytest.approx(0.7, abs=0.01)  # + wear-off


def test_a_cut_wears_off_with_time_as_a_function_of_server_time() -> None:
    # cut to 0.5 at t=1000 ms, wearing off from 0 to 1 in 1000 ms: +0.25 per 250 ms
    fields = {"factor": "0.5", "fts": "1000", "recover_ms": "1000"}
    assert effective_factor(fields, 1000) == 0.5
    assert effective_factor(fields, 1250) == pytest.approx(0.75)
    assert effective_factor(fields, 1500) == 1.0
    assert effective_factor(fields, 10**9) == 1.0
    assert effective_factor({}, 1000) == 1.0  # never cut


def test_an_idle_sites_cut_recovers_and_is_reported_cut_then_recovered(
    store: FrontierStore,
) -> None:
    budget = SiteBudget(recovery=0.5)  # a cut to 0 wears off within half a second
    key = store.keys.site("a.test")
    events = store.sync("n1", feedback=[("a.test", 0, 1, 0)], budget=budget)[8]
    assert [e.decode() for e in events] == ["a.test", "cut", "1", "0.5", "throttled"]
    assert float(store.client.hget(key, "factor")) == 0.5
    # nothing of the site comes by: the cut wears off all the same (status sees it)
    deadline = time.monotonic() + 60
    while True:
        status = build_status(read_snapshot(store.client, store.keys), heartbeat_timeout=30)
        if not status["sites"]:
            break
        assert time.monotonic() < deadline, status["sites"]
        time.sleep(0.05)
    # the next call that looks at the site forgets the cut and reports it as recovered
    store.sync("n1", children=[child("a1", site="a.test")], budget=budget)
    events = [e.decode() for e in store.sync("n1", lease=1, budget=budget)[8]]
    assert events[:4] == ["a.test", "recovered", "0.5", "1"]
    assert int(events[4]) >= 250  # ms since the cut: at least half of the factor to make up
    assert store.client.hget(key, "factor") is None


def test_status_shows_the_effective_rate_of_a_cut_site_without_a_limit(
    store: FrontierStore,
) -> None:
    budget = SiteBudget(adaptive_rate=8.0, recovery=3600)
    store.sync("n1", children=[child("a1", site="a.test")], budget=budget)
    store.sync("n1", lease=1, budget=budget)  # in flight: a busy site
    store.sync("n1", feedback=[("a.test", 0, 1, 0)], budget=budget)
    (site,) = build_status(read_snapshot(store.client, store.keys), heartbeat_timeout=30)["sites"]
    assert site["limit_rate"] is None
    assert site["factor"] == pytest.approx(0.5, abs=0.01)
    assert site["allowed_rate"] == pytest.approx(4.0, abs=0.1)  # 8/s halved


def test_a_cut_stored_before_cuts_wore_off_wears_off_from_its_cut_at(
    store: FrontierStore,
) -> None:
    key = store.keys.site("old.test")
    seconds, _ = store.client.time()
    long_ago = (int(seconds) - 3600) * 1000  # an hour ago: long worn off
    store.client.hset(key, mapping={"factor": "0.107", "cut_at": long_ago})
    assert effective_factor({"factor": "0.107", "cut_at": str(long_ago)}, long_ago + 1000) < 0.2
    store.sync("n1", children=[child("o1", site="old.test")])
    events = [e.decode() for e in store.sync("n1", lease=1)[8]]
    assert events[:2] == ["old.test", "recovered"]
    assert store.client.hget(key, "factor") is None
