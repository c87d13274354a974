"""Fenced leases: reports for a lease a node no longer holds change nothing but a counter,
and every path that frees a site slot frees exactly the slot its request took."""

from __future__ import annotations

import json

import pytest
import redis
from frontier_state import clear_frontier, queued_rids, wait_for_uptime

from distcrawl.frontier.store import (
    Child,
    DeadLetter,
    FrontierKeys,
    FrontierStore,
    Lease,
    SiteBudget,
    SyncResult,
)

SITE = "a.test"
BUDGET = SiteBudget(concurrency=1)


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("f", "f:start_urls", shards=request.param)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0)


def child(url: str, site: str = SITE, prio: int = 100) -> Child:
    return Child(url, prio, False, 0, site, json.dumps({"url": f"http://{site}/{url}"}))


def leases(result: SyncResult) -> list[Lease]:
    return [leased.lease for leased in result.leased]


def active(store: FrontierStore, site: str = SITE) -> int:
    return int(store.client.hget(store.keys.site_keys(site).active, site) or 0)


def stale_acks(store: FrontierStore) -> int:
    return sum(
        int(store.client.hget(s.counters, "stale_acks") or 0) for s in store.keys.all_shards()
    )


def site_shard(store: FrontierStore, site: str = SITE):
    return store.keys.site_keys(site)


def presume_dead(store: FrontierStore, node: str) -> None:
    """``node`` stops heart-beating (its last heartbeat is far in the past), another recovers."""
    store.client.zadd(store.keys.nodes, {node: 1})
    wait_for_uptime(store.client, 2)
    nodes, _ = store.recover("rescuer", 1_000)
    assert nodes == [node]


def test_ack_from_the_old_holder_of_a_re_leased_request_changes_nothing(
    store: FrontierStore,
) -> None:
    store.sync("old", children=[child("p0")])
    (lease,) = leases(store.sync("old", lease=5, budget=BUDGET))
    assert active(store) == 1
    presume_dead(store, "old")
    assert active(store) == 0  # its slot returned with the lease
    # the new holder leases the same request; two more wait for the site's one slot
    assert leases(store.sync("new", lease=5, budget=BUDGET)) == [lease]
    store.sync("new", children=[child("p1"), child("p2")])
    assert store.sync("new", lease=5, budget=BUDGET).leased == []
    assert store.client.zcard(site_shard(store).wait(SITE)) == 2
    assert active(store) == 1
    reply = store.sync("old", acks=[lease], budget=BUDGET)  # the old holder was alive after all
    assert (reply.acked, reply.stale_acks) == (0, 1)
    assert stale_acks(store) == 1
    assert active(store) == 1
    # the new holder's lease, with the payload it needs
    held = store.client.hget(site_shard(store).held("new"), lease.rid)
    assert held is not None and held.endswith(json.dumps({"url": f"http://{SITE}/p0"}).encode())
    # the new holder's ack frees the slot: the wait queue drains one by one to the end
    done = [lease]
    assert store.sync("new", acks=[lease], budget=BUDGET).acked == 1
    for _ in range(10):
        got = leases(store.sync("new", lease=5, budget=BUDGET))
        if not got:
            break
        assert len(got) == 1 and active(store) == 1
        store.sync("new", acks=got, budget=BUDGET)
        done += got
    assert len(set(done)) == 3
    assert active(store) == 0
    assert store.drained() == [0, 0, 0, 0, 0]
    assert store.client.hlen(site_shard(store).requests) == 0


def test_ack_of_a_request_back_in_the_queue_leaves_it_there(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (lease,) = leases(store.sync("old", lease=5, budget=BUDGET))
    presume_dead(store, "old")
    assert store.sync("old", acks=[lease], budget=BUDGET).stale_acks == 1
    assert lease.rid in queued_rids(store.client, site_shard(store))
    assert leases(store.sync("new", lease=5, budget=BUDGET)) == [lease]
    assert active(store) == 1
    store.sync("new", acks=[lease], budget=BUDGET)
    assert active(store) == 0


@pytest.mark.parametrize(
    "budget", [SiteBudget(), SiteBudget(concurrency=2)], ids=["no-limit", "concurrency-2"]
)
def test_one_call_with_held_and_stale_acks_acks_only_the_held_ones(
    store: FrontierStore, budget: SiteBudget
) -> None:
    store.sync("a", children=[child("p0"), child("p1")])
    kept, back = leases(store.sync("a", lease=5, budget=budget))
    assert store.release("a", [back]) == 1  # back in the queue, its payload with it
    reply = store.sync("a", acks=[back, kept], budget=budget)  # the stale one first
    assert (reply.acked, reply.stale_acks) == (1, 1)
    assert active(store) == 0
    # the request back in the queue is whole: another node leases it with its payload
    (again,) = store.sync("b", lease=5, budget=budget).leased
    assert again.lease.rid == back.rid
    assert json.loads(again.payload)["url"] == f"http://{SITE}/p1"
    assert active(store) == (1 if budget.concurrency else 0)
    assert store.sync("b", acks=[again.lease], budget=budget).acked == 1
    assert not any(store.drained())
    assert store.client.hlen(site_shard(store).requests) == 0


def test_dead_letter_from_the_old_holder_is_not_written(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (lease,) = leases(store.sync("old", lease=5, budget=BUDGET))
    presume_dead(store, "old")
    assert leases(store.sync("new", lease=5, budget=BUDGET)) == [lease]
    record = json.dumps({"request": "{}", "url": "http://a.test/p", "reason": "http_500"})
    dead = DeadLetter("fp", record, SITE, lease)
    reply = store.sync("old", dead=[dead], acks=[lease], budget=BUDGET)
    assert reply.stale_acks == 2  # the dead letter and the ack
    assert store.client.hlen(site_shard(store).dead) == 0
    assert stale_acks(store) == 2
    # the holder's own dead letter, in the same call as its ack, is written
    reply = store.sync("new", dead=[dead], acks=[lease], budget=BUDGET)
    assert (reply.acked, reply.stale_acks) == (1, 0)
    assert store.client.hlen(site_shard(store).dead) == 1
    assert active(store) == 0


def test_release_of_a_lease_not_held_changes_nothing(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (lease,) = leases(store.sync("old", lease=5, budget=BUDGET))
    presume_dead(store, "old")
    assert leases(store.sync("new", lease=5, budget=BUDGET)) == [lease]
    assert store.release("old", [lease]) == 0
    assert store.release("old") == 0
    assert active(store) == 1
    assert store.client.hexists(site_shard(store).held("new"), lease.rid)


def test_requeued_dead_letters_go_through_the_site_budget(store: FrontierStore) -> None:
    records = [
        json.dumps(
            {
                "request": json.dumps({"url": f"http://A.Test:8080/p{i}"}),
                "url": f"http://user@A.Test:8080/p{i}",  # an old record: no "site" field
                "priority": 100,
                "reason": "http_503",
            }
        )
        for i in range(3)
    ]
    records.append(
        json.dumps({"request": "{}", "url": "http://x/", "site": SITE, "reason": "http_503"})
    )
    # dead letters of no given site go to the shard of their record's site
    store.sync("n1", dead=[DeadLetter(f"fp{i}", r) for i, r in enumerate(records)])
    assert store.requeue_dead() == 4
    got = leases(store.sync("n1", lease=10, budget=BUDGET))
    assert len(got) == 1  # one slot for the failing site: the other three wait for it
    assert active(store) == 1
    assert store.drained()[0] == 3  # queued, or waiting for their site
    for _ in range(10):
        store.sync("n1", acks=got, budget=BUDGET)
        got = leases(store.sync("n1", lease=10, budget=BUDGET))
        if not got:
            break
        assert len(got) == 1
    assert active(store) == 0
    assert store.drained() == [0, 0, 0, 0, 0]


def test_the_site_of_a_record_comes_from_its_url_in_every_form(store: FrontierStore) -> None:
    urls = {
        "http://User:pw@Shop.Example.COM:8080/a?b#c": "shop.example.com",
        "https://[::1]:8443/x": "::1",
        "http://h.test": "h.test",
    }
    for i, url in enumerate(urls):
        record = json.dumps({"request": "{}", "url": url, "reason": "x"})
        store.sync("n1", dead=[DeadLetter(f"fp{i}", record)])
    assert store.requeue_dead() == 3
    got = leases(store.sync("n1", lease=10))
    assert sorted(lease.site for lease in got) == sorted(urls.values())
