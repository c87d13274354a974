"""What sites ask of the frontier beyond their limits: a robots.txt Crawl-delay shared by every
node, holds (robots.txt unavailable, Retry-After), throttled answers as one incident per cut, a
token for a request outside the queue, and server budgets shared by the sites of one address,
against a real Redis-protocol server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from frontier_state import clear_frontier
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distcrawl.base.names.status import RETRY_AFTER_HOLD, ROBOTS_TXT_DELAY, ROBOTS_UNAVAILABLE_HOLD
from distcrawl.frontier.store import (
    Child,
    Feedback,
    FrontierKeys,
    FrontierStore,
    Revisit,
    ServerLimits,
    SiteBudget,
    SyncResult,
)

NODES = ("n1", "n2", "n3")


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("t", "t:start_urls", shards=request.param)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0)


def child(url: str, site: str, prio: int = 0) -> Child:
    return Child(url.encode(), prio, False, 0, site, json.dumps({"url": url}))


def urls(result: SyncResult) -> list[str]:
    return [json.loads(leased.payload)["url"] for leased in result.leased]


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not met")


def server_ms(store: FrontierStore) -> int:
    sec, usec = store.client.time()
    return sec * 1000 + usec // 1000


# -- Crawl-delay ------------------------------------------------------------------------------


def test_a_crawl_delay_lets_one_request_at_a_time_start_a_delay_after_the_last_finished(
    store: FrontierStore,
) -> None:
    store.sync("n1", children=[child(f"a{i}", "a.test") for i in range(4)])
    store.set_site_robots("a.test", delay_ms=300, source=ROBOTS_TXT_DELAY)
    key = store.keys.site("a.test")
    # the robots.txt fetch was the site's last request: nothing for a delay after it
    assert all(urls(store.sync(n, lease=10)) == [] for n in NODES)
    first = wait_for(lambda: store.sync("n1", lease=10).leased)
    assert len(first) == 1
    # one in flight: no other node gets one, however long it waits
    time.sleep(0.4)
    assert all(urls(store.sync(n, lease=10)) == [] for n in NODES)
    done_at = server_ms(store)
    store.sync("n1", acks=[first[0].lease])
    assert int(store.client.hget(key, "next_ok")) >= done_at + 300
    # the next one a delay after the first finished, on whichever node asks
    second = wait_for(lambda: store.sync("n2", lease=10).leased)
    assert len(second) == 1 and server_ms(store) >= done_at + 300
    assert store.client.hget(key, "delay_src").decode() == ROBOTS_TXT_DELAY


def test_returned_leases_and_revisit_acks_also_start_the_delay(store: FrontierStore) -> None:
    store.sync("n1", children=[child(f"a{i}", "a.test") for i in range(3)])
    store.set_site_robots("a.test", delay_ms=200, source=ROBOTS_TXT_DELAY)
    first = wait_for(lambda: store.sync("n1", lease=10).leased)
    store.release("n1", [first[0].lease])  # returned unfinished: the delay starts again
    assert urls(store.sync("n2", lease=10)) == []
    assert wait_for(lambda: store.sync("n2", lease=10).leased)


def test_a_configured_rate_slower_than_the_crawl_delay_still_holds(store: FrontierStore) -> None:
    store.sync("n1", children=[child(f"a{i}", "a.test") for i in range(3)])
    store.set_site_limits("a.test", rate=0.5, concurrency=None)  # one per 2 s
    store.set_site_robots("a.test", delay_ms=50, source=ROBOTS_TXT_DELAY)
    first = wait_for(lambda: store.sync("n1", lease=10).leased)
    store.sync("n1", acks=[first[0].lease])
    time.sleep(0.3)  # the delay is long over; the rate's next token is not due
    assert urls(store.sync("n1", lease=10)) == []


def test_no_crawl_delay_any_more_lifts_it(store: FrontierStore) -> None:
    store.sync("n1", children=[child(f"a{i}", "a.test") for i in range(3)])
    store.set_site_robots("a.test", delay_ms=60_000, source=ROBOTS_TXT_DELAY)
    assert urls(store.sync("n1", lease=10)) == []
    store.set_site_robots("a.test", delay_ms=0)
    store.sync("n1")  # the waiting room is served when its site's time comes
    assert len(wait_for(lambda: store.sync("n1", lease=10).leased, 3)) >= 1


# -- holds ------------------------------------------------------------------------------------


def test_a_held_site_waits_until_its_hold_ends_and_other_sites_go_on(store: FrontierStore) -> None:
    kids = [child(f"a{i}", "a.test") for i in range(3)] + [child("b0", "b.test")]
    store.sync("n1", children=kids)
    store.set_site_robots("a.test", hold_ms=60_000, why=ROBOTS_UNAVAILABLE_HOLD)
    assert urls(store.sync("n1", lease=10)) == ["b0"]
    shard = store.keys.site_keys("a.test")
    assert store.client.zscore(shard.holds, "a.test") is not None
    # a Retry-After hold is not ended by robots.txt being read again
    store.sync("n1", feedback=[Feedback("a.test", 0, 0, 0, 0, 60_000)])
    store.set_site_robots("a.test", hold_ms=0, why=ROBOTS_UNAVAILABLE_HOLD)
    assert urls(store.sync("n1", lease=10)) == []
    assert store.client.hget(store.keys.site("a.test"), "hold_why").decode() == RETRY_AFTER_HOLD
    store.set_site_robots("a.test", hold_ms=0, why=RETRY_AFTER_HOLD)
    got: list[str] = []
    wait_for(lambda: got.extend(urls(store.sync("n1", lease=10))) or len(got) == 3)
    assert sorted(got) == ["a0", "a1", "a2"]
    assert store.client.zscore(shard.holds, "a.test") is None


def test_a_hold_that_ran_out_is_forgotten_by_the_next_lease(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a0", "a.test")])
    store.set_site_robots("a.test", hold_ms=100, why=ROBOTS_UNAVAILABLE_HOLD)
    assert urls(store.sync("n1", lease=10)) == []
    assert wait_for(lambda: store.sync("n1", lease=10).leased, 3)
    assert store.client.zcard(store.keys.site_keys("a.test").holds) == 0


# -- throttled answers: one incident per cut --------------------------------------------------


def test_throttled_answers_sent_before_the_last_cut_are_that_cuts_incident(
    store: FrontierStore,
) -> None:
    key = store.keys.site("a.test")
    store.sync("n1", feedback=[Feedback("a.test", 0, 8, 0, 5)])
    assert float(store.client.hget(key, "factor")) == 0.5
    cut_at = int(store.client.hget(key, "cut_at"))
    wait_for(lambda: server_ms(store) > cut_at + 1100)  # past the one-cut-a-second rule
    # the same incident's answers from other nodes, slow to arrive: sent before the cut
    for node in ("n2", "n3"):
        age = server_ms(store) - cut_at + 200
        store.sync(node, feedback=[Feedback("a.test", 0, 4, 0, age)])
    assert float(store.client.hget(key, "factor")) == pytest.approx(0.5, abs=0.02)
    # a throttled answer to a request sent after the cut is a new incident
    store.sync("n2", feedback=[Feedback("a.test", 0, 1, 0, 0)])
    assert float(store.client.hget(key, "factor")) == pytest.approx(0.25, abs=0.02)


def test_retry_after_zero_holds_nothing_but_still_cuts(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a0", "a.test")])
    store.sync("n1", feedback=[Feedback("a.test", 0, 1, 0, 0, 0)])
    assert float(store.client.hget(store.keys.site("a.test"), "factor")) == 0.5
    assert store.client.hget(store.keys.site("a.test"), "hold_until") is None
    assert urls(store.sync("n1", lease=10)) == ["a0"]


# -- a token outside the queue ----------------------------------------------------------------


def test_a_token_outside_the_queue_waits_for_holds_delays_and_tokens(store: FrontierStore) -> None:
    budget = SiteBudget(rate=2.0, burst=1.0)
    assert store.take_token("a.test", budget, debt=False) == 0
    assert 0 < store.take_token("a.test", budget, debt=False) <= 500
    # robots.txt goes into debt rather than wait...
    assert store.take_token("b.test", budget) == 0
    assert store.take_token("b.test", budget) == 0
    # ... except for a Retry-After hold, which every request waits for
    store.sync("n1", feedback=[Feedback("b.test", 0, 0, 0, 0, 30_000)])
    assert store.take_token("b.test", budget) > 20_000
    store.set_site_robots("c.test", hold_ms=30_000, why=ROBOTS_UNAVAILABLE_HOLD)
    assert store.take_token("c.test", SiteBudget()) == 0  # robots.txt: fetched to end it
    assert store.take_token("c.test", SiteBudget(), debt=False) > 20_000
    store.set_site_robots("d.test", delay_ms=30_000, source=ROBOTS_TXT_DELAY)
    assert store.take_token("d.test", SiteBudget(), debt=False) > 20_000
    assert store.take_token("d.test", SiteBudget()) > 20_000  # robots.txt fetched again too


# -- server budgets ---------------------------------------------------------------------------


def test_server_grants_are_shared_by_every_node(store: FrontierStore) -> None:
    limits = ServerLimits(concurrency=2, rate=0.0, burst=1.0)
    for node in NODES:
        store.heartbeat(node, "{}")

    def take(node: str, want: int, done: int = 0) -> int:
        grants = store.take_server(
            node, [("10.0.0.1", want, done)], limits=limits, timeout_ms=60_000
        )
        return int(grants[0].granted)

    assert take("n1", 1) == 1
    assert take("n2", 5) == 1
    assert take("n3", 5) == 0
    assert take("n1", 0, done=1) == 0  # given back
    assert take("n3", 5) == 1
    assert take("n2", 0, done=9) == 0  # a node gives back at most what it holds
    key = store.keys.server("10.0.0.1")
    assert int(store.client.hget(key, "inuse")) == 1


def test_server_grants_of_a_node_gone_silent_come_back(store: FrontierStore) -> None:
    limits = ServerLimits(concurrency=1, rate=0.0, burst=1.0)
    store.heartbeat("n1", "{}")
    store.heartbeat("n2", "{}")
    assert (
        store.take_server("n1", [("10.0.0.1", 1, 0)], limits=limits, timeout_ms=60_000)[0].granted
        == 1
    )
    assert (
        store.take_server("n2", [("10.0.0.1", 1, 0)], limits=limits, timeout_ms=60_000)[0].granted
        == 0
    )
    store.client.zrem(store.keys.nodes, "n1")  # n1 stopped (or was recovered as dead)
    assert (
        store.take_server("n2", [("10.0.0.1", 1, 0)], limits=limits, timeout_ms=60_000)[0].granted
        == 1
    )


def test_a_server_rate_spaces_grants(store: FrontierStore) -> None:
    limits = ServerLimits(concurrency=0, rate=4.0, burst=1.0)
    first = store.take_server("n1", [("10.0.0.1", 3, 0)], limits=limits, timeout_ms=60_000)[0]
    assert first.granted == 1
    second = store.take_server("n2", [("10.0.0.1", 3, 0)], limits=limits, timeout_ms=60_000)[0]
    assert second.granted == 0 and 0 < second.due_ms <= 250


def test_sites_of_one_server_are_noted_for_the_status(store: FrontierStore) -> None:
    assert (
        store.note_servers([("a.test", "10.0.0.1"), ("b.test", "10.0.0.1"), ("c.test", "10.0.0.2")])
        == 3
    )
    assert store.note_servers([("a.test", "10.0.0.1")]) == 0
    assert store.client.zscore(store.keys.servers, "10.0.0.1") == 2
    store.note_servers([("b.test", "10.0.0.2")])  # moved
    assert store.client.zscore(store.keys.servers, "10.0.0.1") == 1
    assert store.client.smembers(store.keys.server_sites("10.0.0.2")) == {b"b.test", b"c.test"}


# -- a search: random schedules of three nodes against the Crawl-delay ------------------------

DELAY_MS = 60
_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["push", "lease", "lease", "ack", "ack", "release", "revisit", "delay", "hold", "wait"]
        ),
        st.sampled_from(NODES),
        st.sampled_from(["a.test", "b.test"]),
        st.integers(1, 4),
    ),
    min_size=5,
    max_size=40,
)


@given(ops=_OPS)
@example(
    ops=[
        ("push", "n1", "a.test", 4),
        ("wait", "n1", "a.test", 4),
        ("lease", "n1", "a.test", 4),
        ("ack", "n1", "a.test", 1),
        ("lease", "n2", "a.test", 4),
    ]
)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_whatever_the_schedule_a_crawl_delay_site_has_one_request_at_a_time_spaced_by_it(
    store: FrontierStore, ops: list[tuple[str, str, str, int]]
) -> None:
    """Three nodes push, lease, ack, return leases and revisit in a random order while the
    sites' Crawl-delay and holds change: a site with a delay never has two requests in
    flight, and each lease of it starts a delay after the last one finished (server times
    read just before each finish and just after each lease)."""
    clear_frontier(store.client, store.keys)
    # revisit mode: its acks (revisits) end a lease too
    store = FrontierStore(store.client, store.keys, refresh=0.0, forget_ms=600_000)
    held: dict[str, list[Any]] = {n: [] for n in NODES}
    delays = {"a.test": DELAY_MS, "b.test": 0}
    store.set_site_robots("a.test", delay_ms=DELAY_MS, source=ROBOTS_TXT_DELAY)
    finished_at: dict[str, int] = {}
    in_flight: dict[str, int] = {"a.test": 0, "b.test": 0}
    seq = 0
    for op, node, site, n in ops:
        if op == "push":
            kids = [child(f"{site}/{seq + i}", site) for i in range(n)]
            seq += n
            store.sync(node, children=kids)
        elif op == "lease":
            got = store.sync(node, lease=n).leased
            now = server_ms(store)
            for leased in got:
                s = leased.lease.site or json.loads(leased.payload)["url"].split("/")[0]
                if delays[s]:
                    assert in_flight[s] == 0, "two requests of a Crawl-delay site in flight"
                    if s in finished_at:
                        assert now >= finished_at[s] + delays[s], (now, finished_at[s])
                in_flight[s] += 1
                held[node].append((leased.lease, s))
        elif op in ("ack", "release", "revisit") and held[node]:
            leases, held[node] = held[node][:n], held[node][n:]
            before = server_ms(store)
            if op == "ack":
                store.sync(node, acks=[lease for lease, _ in leases])
            elif op == "release":
                store.release(node, [lease for lease, _ in leases])
            else:
                revisits = [Revisit(lease, 10_000, '{"u":"x"}', b"") for lease, _ in leases]
                store.sync(node, revisits=revisits)
            for _, s in leases:
                in_flight[s] -= 1
                finished_at[s] = before
        elif op == "delay":
            delays[site] = DELAY_MS if not delays[site] else 0
            store.set_site_robots(site, delay_ms=delays[site], source=ROBOTS_TXT_DELAY)
            if delays[site] and in_flight[site]:
                # requests leased before the delay: the nodes give them back (the gate)
                for other in NODES:
                    back = [(lease, s) for lease, s in held[other] if s == site]
                    held[other] = [(lease, s) for lease, s in held[other] if s != site]
                    if back:
                        before = server_ms(store)
                        store.release(other, [lease for lease, _ in back])
                        in_flight[site] -= len(back)
                        finished_at[site] = before
        elif op == "hold":
            store.set_site_robots(site, hold_ms=40, why=ROBOTS_UNAVAILABLE_HOLD)
        else:
            time.sleep(n * DELAY_MS / 2000)
