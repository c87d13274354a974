"""The frontier's API (store.py) and its Lua library against a real Redis-protocol server."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis
from frontier_state import clear_frontier, wait_for_uptime
from store_records import child, fingerprint, leased_urls, leases_of, queued

from distcrawl.frontier.store import (
    Child,
    DeadLetter,
    Feedback,
    FrontierKeys,
    FrontierStore,
    SiteBudget,
    effective_factor,
)
from distcrawl.ops.snapshot import read_snapshot
from distcrawl.ops.status import build_status


def test_priority_first_then_first_in_first_out(store: FrontierStore) -> None:
    kids = [
        child("p1", 100),
        child("c1", 300),
        child("p2", 100),
        child("l1", 200),
        child("c2", 300),
    ]
    assert store.sync("n1", children=kids).added == 5
    assert leased_urls(store.sync("n1", lease=10)) == ["c1", "c2", "l1", "p1", "p2"]


def test_dupefilter_records_on_first_accept_and_dont_filter_bypasses(store: FrontierStore) -> None:
    r = store.sync("n1", children=[child("a"), child("a"), child("a", dont_filter=True)])
    assert (r.added, r.filtered) == (2, 1)
    assert store.seen() == 1


def in_flight(store: FrontierStore, site: str) -> int | None:
    """The site's requests in flight as its shard counts them (None: the shard counts none)."""
    active = store.keys.site_keys(site).active
    if not store.client.exists(active):
        return None
    return int(store.client.hget(active, site) or 0)


def test_requests_in_flight_are_counted_per_site_once_a_limit_applies(
    store: FrontierStore,
) -> None:
    sites = ["a.test", "b.test"]
    store.sync("n1", children=[child(f"http://{s}/{i}", site=s) for s in sites for i in range(4)])
    # no limit anywhere: a lease and its ack count nothing per site (nothing reads it)
    first = store.sync("n1", lease=2).leased
    assert [in_flight(store, s) for s in sites] == [None, None]
    assert {leased.lease.site for leased in first} <= set(sites)  # the node reads it itself
    # a limit of one site's own starts the counting in its shard, for every site there
    store.set_site_limits("a.test", rate=None, concurrency=10)
    assert in_flight(store, "a.test") == 0
    # the acks of leases made before it count down from zero: never below
    assert store.sync("n1", acks=[leased.lease for leased in first]).acked == 2
    assert in_flight(store, "a.test") == 0
    second = store.sync("n1", lease=2).leased
    counted = [leased.lease.site for leased in second if leased.lease.site == "a.test"]
    assert in_flight(store, "a.test") == len(counted)
    store.sync("n1", acks=[leased.lease for leased in second])
    assert in_flight(store, "a.test") == 0
    # so does a node's default concurrency, in every shard it leases from
    third = [
        leased.lease.site
        for leased in store.sync("n2", lease=4, budget=SiteBudget(concurrency=5)).leased
    ]
    assert len(third) == 4
    for site in set(third):
        assert in_flight(store, site) == third.count(site)


def test_lease_moves_to_in_flight_and_ack_removes(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a"), child("b")])
    [leased] = store.sync("n1", lease=1).leased
    assert leases_of(store, "n1") == 1
    assert queued(store) == 1
    assert store.sync("n1", acks=[leased.lease]).acked == 1
    assert leases_of(store, "n1") == 0
    assert not store.client.hexists(store.keys.shard(0).requests, leased.lease.rid)
    # a second ack of the same lease (a node that lost it) changes nothing and is counted
    again = store.sync("n1", acks=[leased.lease])
    assert (again.acked, again.stale_acks) == (0, 1)


def test_release_returns_leases_with_their_priority(store: FrontierStore) -> None:
    store.sync("n1", children=[child("hi", 300), child("lo", 100)])
    store.sync("n1", lease=2)
    assert store.release("n1") == 2
    assert leased_urls(store.sync("n2", lease=1)) == ["hi"]


def test_a_lease_is_one_hash_entry_with_its_value_and_its_ack_removes_it(
    store: FrontierStore,
) -> None:
    payload = '{"u":"http://a.test/x"}'  # its URL names its site: the value is the payload
    store.sync("n1", children=[Child(b"a", 100, False, 0, "a.test", payload)])
    (got,) = store.sync("n1", lease=1).leased
    shard = store.keys.shard(got.lease.shard)
    prio, rid, value = store.client.hget(shard.held("n1"), got.lease.rid).split(b"\t", 2)
    assert (int(prio), rid.decode(), value) == (100, got.lease.rid, payload.encode())
    assert not store.client.hexists(shard.requests, got.lease.rid)  # one copy of the value
    assert store.sync("n1", acks=[got.lease]).acked == 1
    assert not store.client.exists(shard.held("n1")) and queued(store) == 0


def test_recover_dead_node_once_even_when_two_nodes_race(
    store: FrontierStore, redis_url: str
) -> None:
    store.sync("dead", children=[child(f"u{i}") for i in range(50)])
    assert len(store.sync("dead", lease=50).leased) == 50
    store.client.zadd(store.keys.nodes, {"dead": 1})  # last heartbeat long ago
    wait_for_uptime(store.client, 2)  # longer than the timeout
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
    assert queued(store) == 50
    assert leases_of(store, "dead") == 0


def test_live_node_is_not_recovered(store: FrontierStore) -> None:
    store.sync("alive", children=[child("a")])
    store.sync("alive", lease=1)
    store.heartbeat("alive", "{}")
    assert store.recover("other", 60_000) == [[], 0]
    assert leases_of(store, "alive") == 1


def test_delayed_retry_is_parked_until_due(store: FrontierStore) -> None:
    # parked for a minute: no slow machine gets from one sync to the next in that time
    r = store.sync("n1", children=[child("r", delay=60_000, dont_filter=True)])
    assert r.parked == 1
    r = store.sync("n1", lease=5)
    assert r.leased == []
    assert 0 <= r.next_due_ms <= 60_000
    # the minute passes: its due time (server clock, ms) is now in the past
    for shard in store.keys.all_shards():
        for rid in store.client.zrange(shard.delayed, 0, -1):
            store.client.zadd(shard.delayed, {rid: 0})
    store.views.poke()
    assert leased_urls(store.sync("n1", lease=5)) == ["r"]


def test_seeds_move_through_a_per_node_list_and_are_given_back_on_release(
    store: FrontierStore,
) -> None:
    store.client.lpush(store.keys.start_urls, "s1", "s2", "s3")
    assert store.take_seeds("n1", 2) == ([], [b"s1", b"s2"])
    assert store.drained()[3] == 2  # held by n1, not lost
    assert store.release("n1") == 2
    assert store.client.lrange(store.keys.seeds.returned, 0, -1) == [b"s2", b"s1"]
    assert store.drained()[3:] == [2, 1]  # given back (taken again first), and one waiting
    # given back first, oldest first, then the seed list
    assert store.take_seeds("n2", 3) == ([b"s1", b"s2"], [b"s3"])
    store.sync("n2", children=[child("s1")], seeds_done=True)  # the seeds' requests are in
    assert store.drained() == [1, 0, 0, 0, 0]


def test_dead_letters_and_requeue(store: FrontierStore) -> None:
    record = json.dumps(
        {"request": json.dumps({"url": "http://x.test/"}), "priority": 100, "reason": "http_500"}
    )
    store.sync("n1", dead=[DeadLetter("fp1", record, "x.test")])
    dead = store.keys.site_keys("x.test").dead
    assert store.client.hlen(dead) == 1
    assert store.requeue_dead() == 1
    assert leased_urls(store.sync("n1", lease=1)) == ["http://x.test/"]
    assert store.client.hlen(dead) == 0
    assert store.client.hget(store.keys.counters, "requeued_dead_letters") == b"1"


def test_paused_cluster_hands_out_nothing(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a", site="a.test")])
    store.set_paused("1")
    assert store.sync("n1", lease=5).leased == []
    store.set_paused(None)
    assert leased_urls(store.sync("n1", lease=5)) == ["a"]


def test_a_shallow_queue_is_shared_among_the_live_nodes(store: FrontierStore) -> None:
    store.heartbeat("n2", "{}")  # a second live node
    store.heartbeat("n1", "{}")
    store.sync("n1", children=[child(f"u{i}") for i in range(10)])
    # n1 found the ten links and may hold 32, but takes its half; then n2 its half of the rest
    assert len(leased_urls(store.sync("n1", lease=32))) == 5
    assert len(leased_urls(store.sync("n2", lease=32))) == 3
    # a deep queue is not cut: the share is above what a node asks for
    store.sync("n1", children=[child(f"v{i}") for i in range(100)])
    assert len(leased_urls(store.sync("n1", lease=32))) == 32


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
    assert store.sync("idle", lease=16).leased == []  # nothing to do: it sleeps
    assert store.client.smembers(store.keys.idle) == {b"idle"}
    busy = FrontierStore(store.client, store.keys, refresh=0.0)
    busy.heartbeat("busy", "{}")  # learns that a node sleeps
    busy.sync("busy", children=[child("a", site="a.test"), child("b", site="a.test")])
    message = _next_message(pubsub, 2.0)
    shard = str(store.keys.shard_of("a.test")).encode()
    assert message is not None and message["data"] == shard  # the shard that got work
    store.heartbeat("idle", "{}")  # learns that two nodes are live
    assert len(leased_urls(store.sync("idle", lease=16))) == 1  # its share of two
    assert not store.client.exists(store.keys.idle)  # it works again
    assert len(leased_urls(busy.sync("busy", lease=16))) == 1
    # leases returned by a stopping node wake the others too
    busy.release("busy")
    message = _next_message(pubsub, 2.0)
    assert message is not None and message["data"] == shard
    assert len(leased_urls(store.sync("idle", lease=16))) == 1
    pubsub.close()


def test_leases_follow_priority_across_shards(store: FrontierStore) -> None:
    sites = [f"s{i}.test" for i in range(40)]
    kids = [child(f"{site}/p{j}", 100, site=site) for site in sites for j in range(3)]
    kids += [child(f"{site}/c", 300, site=site) for site in sites]
    store.sync("n1", children=kids)
    first = store.sync("n1", lease=40)
    # every category page before any product page, whichever shard it is in
    assert sorted(leased.priority for leased in first.leased) == [300] * 40
    second = store.sync("n1", lease=200)
    assert {leased.priority for leased in second.leased} == {100}
    assert len(second.leased) == 120
    assert first.priority_inversions == 0


def test_all_keys_share_one_hash_slot(store: FrontierStore) -> None:
    from redis.crc import key_slot

    from distcrawl.frontier.keys import SCHEMA

    def every_key(slot: object, declared_in: str) -> list[str]:
        """Every key the schema declares for the slot, with parameters filled in."""
        out = []
        for key in SCHEMA:
            if key.slot == declared_in:
                value = getattr(slot, key.name)
                out.append(value(*(["7"] * len(key.params))) if key.params else value)
        return out

    keys = store.keys
    control = every_key(keys, "control")
    assert len(control) >= 13
    assert len({key_slot(k.encode()) for k in control}) == 1
    slots = set()
    for shard in keys.all_shards():
        names = every_key(shard, "shard")
        assert len(names) >= 25
        assert len({key_slot(k.encode()) for k in names}) == 1
        slots.add(key_slot(shard.levels.encode()))
    assert len(slots) == keys.shards  # each shard a slot of its own
    # the seed list's neighbours share its slot, wherever its name hashes
    beside = [keys.start_urls, *every_key(keys.seeds, "seeds")]
    assert len({key_slot(k.encode()) for k in beside}) == 1


def test_site_budget_rate_limits_one_site_without_blocking_another(store: FrontierStore) -> None:
    kids = [child(f"a{i}", 100, site="a.test") for i in range(10)]
    kids += [child(f"b{i}", 100, site="b.test") for i in range(10)]
    store.sync("n1", children=kids)
    store.set_site_limits("a.test", rate=5, concurrency=None)
    urls = leased_urls(store.sync("n1", lease=20))
    # one token for a.test (burst 1), every b.test request: a.test waits aside, unpolled
    assert [u for u in urls if u.startswith("a")] == ["a0"]
    assert sorted(u for u in urls if u.startswith("b")) == sorted(f"b{i}" for i in range(10))
    assert store.client.zcard(store.keys.site_keys("a.test").wait("a.test")) == 9
    assert store.drained()[0] == 9  # waiting requests still count as queued
    time.sleep(0.25)  # 5/s: one more token after 200 ms
    assert leased_urls(store.sync("n1", lease=20)) == ["a1"]


def test_site_concurrency_is_cluster_wide_and_acks_free_slots(store: FrontierStore) -> None:
    store.sync("n1", children=[child(f"a{i}", site="a.test") for i in range(5)])
    budget = SiteBudget(concurrency=2)
    first = store.sync("n1", lease=5, budget=budget)
    assert len(leased_urls(first)) == 2
    assert leased_urls(store.sync("n2", lease=5, budget=budget)) == []
    store.sync("n1", acks=[first.leased[0].lease], budget=budget)
    assert len(leased_urls(store.sync("n2", lease=5, budget=budget))) == 1
    store.release("n1")  # returned leases free their slots too
    assert len(leased_urls(store.sync("n2", lease=5, budget=budget))) == 1


def test_throttled_site_slows_down_for_everyone_then_recovers(store: FrontierStore) -> None:
    key = store.keys.site("a.test")
    store.sync("n1", feedback=[Feedback("a.test", 0, 3, 0)])
    assert float(store.client.hget(key, "factor")) == 0.5
    store.sync("n2", feedback=[Feedback("a.test", 0, 1, 0)])  # one cut per second at most
    assert float(store.client.hget(key, "factor")) == 0.5
    store.sync("n2", feedback=[Feedback("a.test", 20, 0, 0)])
    assert float(store.client.hget(key, "factor")) == pytest.approx(0.7, abs=0.01)  # + wear-off


def test_fine_answers_from_a_site_never_cut_cost_the_shard_no_reads(store: FrontierStore) -> None:
    def calls(name: str) -> int:
        return int(store.client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))

    before = calls("hmget"), calls("time")
    store.sync("n1", feedback=[Feedback("fine.test", 20, 0, 0)])
    # only a cut's factor could change: with no cut in the shard nothing is read or written
    assert (calls("hmget"), calls("time")) == before
    assert not store.client.exists(store.keys.site("fine.test"))
    store.sync("n1", feedback=[Feedback("fine.test", 0, 1, 0)])
    assert float(store.client.hget(store.keys.site("fine.test"), "factor")) == 0.5


def test_exact_dupefilter_costs_at_most_40_bytes_per_url(store: FrontierStore) -> None:
    n = 60_000
    for start in range(0, n, 3000):
        kids = [
            Child(fingerprint(i), 0, False, 0, f"s{i % 50}.test", "{}")
            for i in range(start, start + 3000)
        ]
        assert store.sync("n1", children=kids).added == 3000
        # at every size, also right after the buckets grew
        assert store.dupefilter_bytes() / (start + 3000) <= 40
    assert store.seen() == n
    again = store.sync(
        "n1",
        children=[
            Child(fingerprint(i), 0, False, 0, f"s{i % 50}.test", "{}") for i in range(0, n, 7)
        ],
    )
    assert again.added == 0 and again.filtered == len(range(0, n, 7))  # exact: none is new


def test_bloom_dupefilter_filters_seen_urls_within_its_error_rate(redis_url: str) -> None:
    from distcrawl.frontier.store import Dupefilter

    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("bloomtest", "bloomtest:start_urls", shards=4)
    clear_frontier(client, keys)
    n = 20_000
    # sized for n URLs per shard; every URL here is of one site, so of one shard
    bloom_n = Dupefilter("bloom", 4 * n, 0.001)
    store = FrontierStore(client, keys, dupefilter=bloom_n, refresh=0.0)
    site = "s.test"
    added = 0
    for start in range(0, n, 2000):
        kids = [Child(fingerprint(i), 0, False, 0, site, "{}") for i in range(start, start + 2000)]
        kids.append(kids[0])  # a duplicate in the same batch
        r = store.sync("n1", children=kids)
        added += r.added
    false_positives = n - added
    assert false_positives <= n * 0.003
    again = store.sync(
        "n1", children=[Child(fingerprint(i), 0, False, 0, site, "{}") for i in range(500)]
    )
    assert (again.added, again.filtered) == (0, 500)  # every seen URL is filtered
    bloom = keys.site_keys(site).bloom
    assert client.memory_usage(bloom, samples=0) / n <= 2.0


def test_a_payload_that_names_its_site_is_stored_without_it(store: FrontierStore) -> None:
    cases = {
        '{"u":"http://User@A.Test:8080/x"}': "a.test",
        '{"u":"https://[::1]:8443/y"}': "::1",
        '{"u":"http://b.test/z"}': "other.test",  # a site of its own: kept next to it
        '{"u":"http://C.Test/q"}': "c.test",  # a plain host, in upper case
        '{"u":"http://d.test"}': "d.test",  # no path
        '{"u":"http://e.test?x=1"}': "e.test",
        '{"u":"http://f_g.test/"}': "f_g.test",  # not a plain host name: the long way
    }
    kids = [Child(p, 0, False, 0, site, p) for p, site in cases.items()]
    store.sync("n1", children=kids)
    got = store.sync("n1", lease=10).leased
    assert sorted((x.payload.decode(), x.lease.site) for x in got) == sorted(cases.items())
    # a leased request's value is in its node's held hash, after its order score and rid
    held = [v for s in store.keys.all_shards() for v in store.client.hvals(s.held("n1"))]
    stored = {v.split(b"\t", 2)[2] for v in held}
    assert b'{"u":"http://b.test/z"}' not in stored  # prefixed with its site
    assert b'{"u":"http://User@A.Test:8080/x"}' in stored
    plain = {b'{"u":"http://C.Test/q"}', b'{"u":"http://d.test"}', b'{"u":"http://f_g.test/"}'}
    assert plain <= stored  # stored without their site, found again from the URL


def test_a_cut_wears_off_with_time_as_a_function_of_server_time() -> None:
    # cut to 0.5 at t=1000 ms, wearing off from 0 to 1 in 1000 ms: +0.25 per 250 ms
    fields = {"factor": "0.5", "fts": "1000", "recover_ms": "1000"}
    assert effective_factor(fields, 1000) == 0.5
    assert effective_factor(fields, 1250) == pytest.approx(0.75)
    assert effective_factor(fields, 1500) == 1.0
    assert effective_factor(fields, 10**9) == 1.0
    assert effective_factor({}, 1000) == 1.0  # never cut
    assert effective_factor({"factor": "0.5"}, 1000) == 1.0  # no time or recovery: over


def test_an_idle_sites_cut_recovers_and_is_reported_cut_then_recovered(
    store: FrontierStore,
) -> None:
    budget = SiteBudget(recovery=0.5)  # a cut to 0 wears off within half a second
    key = store.keys.site("a.test")
    events = store.sync("n1", feedback=[("a.test", 0, 1, 0)], budget=budget).site_events
    assert [tuple(e) for e in events] == [("a.test", "cut", 1.0, 0.5, "throttled")]
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
    (event,) = store.sync("n1", lease=1, budget=budget).site_events
    assert tuple(event)[:4] == ("a.test", "recovered", 0.5, 1.0)
    assert int(event.detail) >= 250  # ms since the cut: at least half of the factor to make up
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
