"""Fenced leases: reports for a lease a node no longer holds change nothing but a counter,
and every path that frees a site slot frees exactly the slot its request took."""

from __future__ import annotations

import json
import time

import pytest
import redis

from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget

SITE = "a.test"
BUDGET = SiteBudget(concurrency=1)


@pytest.fixture
def store(redis_url: str) -> FrontierStore:
    return FrontierStore(redis.Redis.from_url(redis_url), FrontierKeys("f", "f:start_urls"))


def child(url: str, site: str = SITE, prio: int = 100) -> tuple:
    return (url, prio, False, 0, site, json.dumps({"url": f"http://{site}/{url}"}))


def rids(out: list) -> list[str]:
    return [out[i].decode() for i in range(0, len(out), 2)]


def active(store: FrontierStore, site: str = SITE) -> int:
    return int(store.client.hget(store.keys.site(site), "active") or 0)


def stale_acks(store: FrontierStore) -> int:
    return int(store.client.hget(store.keys.prefix + ":counters", "stale_acks") or 0)


def wait_for_uptime(client: redis.Redis, seconds: int) -> None:
    """Silence counts from the server's start only: wait until it has been up long enough."""
    deadline = time.monotonic() + 60
    while client.info("server")["uptime_in_seconds"] < seconds:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def presume_dead(store: FrontierStore, node: str) -> None:
    """``node`` stops heart-beating (its last heartbeat is far in the past), another recovers."""
    store.client.zadd(store.keys.nodes, {node: 1})
    wait_for_uptime(store.client, 2)
    nodes, _ = store.recover("rescuer", 1_000)
    assert [n.decode() for n in nodes] == [node]


def test_ack_from_the_old_holder_of_a_re_leased_request_changes_nothing(
    store: FrontierStore,
) -> None:
    store.sync("old", children=[child("p0")])
    (rid,) = rids(store.sync("old", lease=5, budget=BUDGET)[4])
    assert active(store) == 1
    presume_dead(store, "old")
    assert active(store) == 0  # its slot returned with the lease
    # the new holder leases the same request; two more wait for the site's one slot
    assert rids(store.sync("new", lease=5, budget=BUDGET)[4]) == [rid]
    store.sync("new", children=[child("p1"), child("p2")])
    assert store.sync("new", lease=5, budget=BUDGET)[4] == []
    assert store.client.zcard(store.keys.wait(SITE)) == 2
    assert active(store) == 1
    reply = store.sync("old", acks=[rid], budget=BUDGET)  # the old holder was alive after all
    assert reply[3] == 0 and reply[7] == 1  # acked 0, stale 1
    assert stale_acks(store) == 1
    assert active(store) == 1
    assert store.client.hexists(store.keys.requests, rid)  # the payload the new holder needs
    assert store.client.zscore(store.keys.leases("new"), rid) is not None
    # the new holder's ack frees the slot: the wait queue drains one by one to the end
    done = [rid]
    acked = store.sync("new", acks=[rid], budget=BUDGET)[3]
    assert acked == 1
    for _ in range(10):
        got = rids(store.sync("new", lease=5, budget=BUDGET)[4])
        if not got:
            break
        assert len(got) == 1 and active(store) == 1
        store.sync("new", acks=got, budget=BUDGET)
        done += got
    assert len(set(done)) == 3
    assert active(store) == 0
    assert store.drained() == [0, 0, 0, 0, 0]
    assert store.client.hlen(store.keys.requests) == 0
    assert not store.client.exists(store.keys.prefix + ":req:site")


def test_ack_of_a_request_back_in_the_queue_leaves_it_there(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (rid,) = rids(store.sync("old", lease=5, budget=BUDGET)[4])
    presume_dead(store, "old")
    assert store.sync("old", acks=[rid], budget=BUDGET)[7] == 1
    assert store.client.zscore(store.keys.queue, rid) is not None
    assert store.client.hget(store.keys.prefix + ":req:site", rid) == SITE.encode()
    assert rids(store.sync("new", lease=5, budget=BUDGET)[4]) == [rid]
    assert active(store) == 1
    store.sync("new", acks=[rid], budget=BUDGET)
    assert active(store) == 0


def test_dead_letter_from_the_old_holder_is_not_written(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (rid,) = rids(store.sync("old", lease=5, budget=BUDGET)[4])
    presume_dead(store, "old")
    assert rids(store.sync("new", lease=5, budget=BUDGET)[4]) == [rid]
    record = json.dumps({"request": "{}", "url": "http://a.test/p", "reason": "http_500"})
    reply = store.sync("old", dead=[("fp", record, rid)], acks=[rid], budget=BUDGET)
    assert reply[7] == 2  # the dead letter and the ack
    assert store.client.hlen(store.keys.dead) == 0
    assert stale_acks(store) == 2
    # the holder's own dead letter, in the same call as its ack, is written
    reply = store.sync("new", dead=[("fp", record, rid)], acks=[rid], budget=BUDGET)
    assert (reply[3], reply[7]) == (1, 0)
    assert store.client.hlen(store.keys.dead) == 1
    assert active(store) == 0


def test_release_of_a_lease_not_held_changes_nothing(store: FrontierStore) -> None:
    store.sync("old", children=[child("p")])
    (rid,) = rids(store.sync("old", lease=5, budget=BUDGET)[4])
    presume_dead(store, "old")
    assert rids(store.sync("new", lease=5, budget=BUDGET)[4]) == [rid]
    assert store.release("old", [rid]) == 0
    assert store.release("old") == 0
    assert active(store) == 1
    assert store.client.zscore(store.keys.leases("new"), rid) is not None


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
    store.sync("n1", dead=[(f"fp{i}", r) for i, r in enumerate(records)])
    assert store.requeue_dead() == 4
    got = rids(store.sync("n1", lease=10, budget=BUDGET)[4])
    assert len(got) == 1  # one slot for the failing site: the other three wait for it
    assert active(store) == 1
    assert store.client.zcard(store.keys.wait(SITE)) == 3
    for _ in range(10):
        store.sync("n1", acks=got, budget=BUDGET)
        got = rids(store.sync("n1", lease=10, budget=BUDGET)[4])
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
        store.sync("n1", dead=[(f"fp{i}", record)])
    assert store.requeue_dead() == 3
    sites = store.client.hvals(store.keys.prefix + ":req:site")
    assert sorted(s.decode() for s in sites) == sorted(urls.values())
