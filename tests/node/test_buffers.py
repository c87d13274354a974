"""A node's write buffers against a real Redis: an ack goes only with its page's children or
after them (a probed link: after the round trip that pushes it), a failed round trip keeps
every write in order, and a rewound shard's writes go again with the next one."""

from __future__ import annotations

import json
import random
import socket

import pytest
import redis
from frontier_state import clear_frontier
from redis.backoff import NoBackoff
from redis.retry import Retry

from distcrawl.frontier.batch import DeadLetter, Feedback, Lease, Revisit
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore, SyncResult
from distcrawl.node.scheduler.buffers import WriteBuffers, hold_back


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("b", "b:start_urls", shards=request.param)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0)


def child(site: str, path: str, priority: int = 100) -> Child:
    return Child(path, priority, False, 0, site, json.dumps({"url": f"http://{site}/{path}"}))


def two_sites(keys: FrontierKeys) -> tuple[str, str]:
    """Two sites in different shards (with one shard: two sites of that one)."""
    first = "a.test"
    for i in range(200):
        other = f"s{i}.test"
        if keys.shards == 1 or keys.shard_of(other) != keys.shard_of(first):
            return first, other
    raise AssertionError("no second shard found")


def round_trip(writes: WriteBuffers, store: FrontierStore, *, lease: int = 0) -> SyncResult | None:
    """One round trip as the node's I/O loop makes it."""
    out = writes.take(store.keys.shard_of, lease=lease)
    if out is None:
        return None
    try:
        result = store.sync(
            "n1",
            children=out.children,
            probes=out.probes,
            acks=out.acks,
            dead=out.dead,
            rejected=out.rejected,
            seeds_done=out.seeds_done,
            lease=lease,
            feedback=out.feedback,
            tag="t1",
            revisits=out.revisits,
        )
    except BaseException:
        writes.restore(out)
        raise
    writes.sent(out, result)
    assert isinstance(result, SyncResult)
    return result


def test_an_ack_goes_with_children_of_its_own_shard_only_else_after_them() -> None:
    acks = [Lease(shard, f"{i}.t", "s") for i, shard in enumerate((3, 5, 3))]
    shard = lambda a: a.shard  # noqa: E731
    assert hold_back(acks, set(), shard) == (acks, [])  # no children: every ack goes
    # children to shard 3 only: shard 3's acks are one script call with them
    assert hold_back(acks, {3}, shard) == ([acks[0], acks[2]], [acks[1]])
    # children to two shards: any ack might be the parent of either, so none goes
    assert hold_back(acks, {3, 5}, shard) == ([], acks)


def test_nothing_to_write_and_nothing_to_lease_is_no_round_trip() -> None:
    writes = WriteBuffers(latency_target=5.0)
    assert not writes.pending() and not writes.urgent()
    assert writes.take(lambda site: 0, lease=0) is None
    out = writes.take(lambda site: 0, lease=4)  # a lease alone is a round trip
    assert out is not None and not out.children and not out.acks


def test_what_flushes_at_once_and_what_the_node_still_holds() -> None:
    writes = WriteBuffers(latency_target=5.0)
    lease = Lease(0, "1.t", "s")
    writes.acks.append(lease)
    assert writes.pending() and not writes.urgent()  # an ack may wait for more pages
    writes.dead.append(DeadLetter("fp", "{}", "s", None))
    assert writes.urgent()  # a dead letter may not
    writes.dead.clear()
    writes.seeds_pending = True
    assert writes.urgent()
    again = Lease(0, "2.t", "s")
    writes.revisits_after.append(Revisit(again, 1000, "{}", b"fp"))
    assert writes.held_leases() == [lease, again]


def test_an_ack_waits_for_children_pushed_to_another_shard(store: FrontierStore) -> None:
    own, other = two_sites(store.keys)
    store.sync("n0", children=[child(own, "p"), child(other, "q")])
    leases = {lease.site: lease for lease, *_ in store.sync("n1", lease=2).leased}
    writes = WriteBuffers(latency_target=5.0)
    # the page of `own` found a link to `own`; the page of `other` was done with no links
    writes.acks += [leases[own], leases[other]]
    writes.children.append(child(own, "p2"))
    result = round_trip(writes, store)
    assert result is not None and result.added == 1
    if store.keys.shards == 1:
        assert result.acked == 2 and not writes.pending()  # one script call with them
        return
    # `other`'s ack went with nothing: were it a parent of the link, a death between two
    # shards' calls would lose that link; it goes with the next round trip
    assert result.acked == 1 and writes.acks_after == [leases[other]]
    result = round_trip(writes, store)
    assert result is not None and result.acked == 1 and not writes.pending()


def test_a_failed_round_trip_keeps_every_write_ahead_of_newer_ones(
    store: FrontierStore,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    away = FrontierStore(
        redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1),
        store.keys,
        refresh=0.0,
    )
    writes = WriteBuffers(latency_target=5.0)
    ack = Lease(0, "1.t", "s")
    writes.children.append(child("a.test", "x"))
    writes.acks.append(ack)
    writes.rejected.append('{"kind": "seed"}')
    writes.seeds_pending = True
    writes.feedback.record("a.test", 429, False, 0.1)
    with pytest.raises(redis.ConnectionError):
        round_trip(writes, away)
    writes.children.append(child("a.test", "y"))  # found while Redis was away
    assert [c.fp for c in writes.children] == ["x", "y"]
    assert writes.acks == [ack] and writes.rejected == ['{"kind": "seed"}']
    assert writes.seeds_pending
    [kept] = writes.feedback.take()
    assert kept[:4] == Feedback("a.test", 0, 1, 0)[:4]
    assert kept.newest >= 100  # sent 0.1 s before its answer, and still known as such


def test_a_rewound_shard_gets_its_writes_again_with_the_next_round_trip(
    store: FrontierStore,
) -> None:
    writes = WriteBuffers(latency_target=5.0)
    writes.children.append(child("a.test", "x"))
    first = round_trip(writes, store)
    assert first is not None and first.rewound is None and first.added == 1
    # Redis lost the node's mark in that shard (a restart from older data, a reset)
    shard = store.keys.site_keys("a.test")
    assert store.client.hdel(shard.marks, "n1") == 1
    writes.children.append(child("a.test", "y"))
    rewound = round_trip(writes, store)
    assert rewound is not None and rewound.rewound is not None and rewound.added == 0
    assert [c.fp for c in writes.children] == ["y"]  # kept for the next round trip
    store.forget_marks("n1")  # the node goes on (in the loop: with a new tag)
    again = round_trip(writes, store)
    assert again is not None and again.rewound is None and again.added == 1
    assert not writes.pending()


def test_a_probed_link_is_pushed_by_the_next_round_trip_and_its_pages_ack_waits_for_it(
    store: FrontierStore,
) -> None:
    store.sync("n0", children=[child("a.test", "p"), child("a.test", "old")])
    (page,) = [leased.lease for leased in store.sync("n1", lease=1).leased]
    store.sync("n1", lease=0)  # the node learns the shard's dupefilter (its reply tells it)
    writes = WriteBuffers(latency_target=5.0, probing=True)
    # the page found a new link and one the crawl already has
    writes.children += [child("a.test", "new"), child("a.test", "old")]
    writes.acks.append(page)
    first = round_trip(writes, store)
    assert first is not None and (first.added, first.filtered, first.acked) == (0, 1, 0)
    assert [c.fp for c in writes.confirmed] == ["new"] and writes.acks_probed == [page]
    second = round_trip(writes, store)
    assert second is not None and (second.added, second.acked) == (1, 1)
    assert not writes.pending()


@pytest.mark.parametrize("seed", range(8))
def test_with_probes_no_ack_goes_before_its_pages_links_are_in_redis(
    store: FrontierStore, seed: int
) -> None:
    """A seeded walk: pages leased, their links found (new ones, ones the crawl has, ones
    found twice), pages done, round trips that fail (Redis away) or go through, the node's
    view of the dupefilter's buckets lost now and then. Whenever a page's lease is gone from
    Redis (acked), every link it found is in the dupefilter; in the end every new link is
    queued once."""
    rng = random.Random(seed)
    sites = [f"w{i}.test" for i in range(6)]
    store.sync("n0", children=[child(s, f"old{i}") for s in sites for i in range(5)])
    store.sync("n0", children=[child(s, f"seed{i}") for s in sites for i in range(8)])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    away = FrontierStore(
        redis.Redis(
            host="127.0.0.1", port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
        ),
        store.keys,
        refresh=0.0,
    )
    writes = WriteBuffers(latency_target=5.0, probing=True)
    pages: dict[str, list[str]] = {}  # a page's rid -> the links it found
    working: list[Lease] = []
    counter = 0
    for _ in range(60):
        step = rng.random()
        if step < 0.25:
            working += [leased.lease for leased in store.sync("n1", lease=3).leased]
        elif step < 0.55 and working:
            page = working.pop(rng.randrange(len(working)))
            found = []
            for _ in range(rng.randrange(4)):
                site = page.site if rng.random() < 0.7 else rng.choice(sites)
                counter += 1
                path = f"old{rng.randrange(5)}" if rng.random() < 0.4 else f"n{counter}"
                writes.children.append(child(site, path))
                found.append((site, path))
            pages[page.rid] = found
            writes.acks.append(page)
        elif step < 0.65 and writes.pending():
            with pytest.raises(redis.ConnectionError):
                round_trip(writes, away)
        elif step < 0.7:
            for i in range(store.keys.shards):
                store.views[i].buckets = None
        else:
            round_trip(writes, store)
        held = {rid for rids in store.held_leases("n1").values() for rid in rids}
        done = [rid for rid in pages if rid not in held and rid not in {p.rid for p in working}]
        links = [child(site, path) for rid in done for site, path in pages[rid]]
        if links:
            # every link of a page acked is in the dupefilter (a probe finds none new)
            assert store.sync("check", probes=links).probed == []
    for _ in range(6):
        round_trip(writes, store)
    assert not writes.pending()
