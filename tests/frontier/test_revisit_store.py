"""Revisit mode in the frontier script: due entries, promotion, the dupefilter that forgets."""

from __future__ import annotations

import json
import time

import pytest
import redis
from frontier_state import clear_frontier

from distcrawl.frontier.batch import Lease, Revisit
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore, SiteBudget

#: a dupefilter generation long enough that nothing in a test is forgotten by accident
LONG = 3_600_000


def make_store(redis_url: str, shards: int, forget_ms: int | None = LONG) -> FrontierStore:
    client = redis.Redis.from_url(redis_url)
    keys = FrontierKeys("rv", "rv:start_urls", shards=shards)
    clear_frontier(client, keys)
    return FrontierStore(client, keys, refresh=0.0, forget_ms=forget_ms)


@pytest.fixture(params=[1, 16], ids=["1-shard", "16-shards"])
def store(redis_url: str, request: pytest.FixtureRequest) -> FrontierStore:
    return make_store(redis_url, request.param)


def child(url: str, prio: int = 0, site: str = "s.test") -> Child:
    return Child(url.encode(), prio, False, 0, site, json.dumps({"u": f"http://{site}/{url}"}))


def url_of(payload: bytes | str) -> str:
    return str(json.loads(payload)["u"]).rsplit("/", 1)[1]


def revisit_of(leased: object, interval_ms: int, state: dict[str, object]) -> Revisit:
    lease, payload = leased.lease, leased.payload  # type: ignore[attr-defined]
    data = json.loads(payload)
    data["mt"] = {"~v": state}
    return Revisit(lease, interval_ms, json.dumps(data), url_of(payload).encode())


def wait_until(predicate, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_acked_page_comes_back_when_due_with_its_new_payload(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a"), child("b")])
    leased = store.sync("n1", lease=10).leased
    assert sorted(url_of(x.payload) for x in leased) == ["a", "b"]
    a = next(x for x in leased if url_of(x.payload) == "a")
    b = next(x for x in leased if url_of(x.payload) == "b")
    result = store.sync("n1", acks=[b.lease], revisits=[revisit_of(a, 300, {"e": '"v1"'})])
    assert (result.acked, result.revisited) == (2, 1)
    status = store.revisit_status()
    assert status["scheduled"] == 1
    assert store.drained()[:3] == [0, 0, 0]  # b is done for good, a waits for its due time
    got: list[object] = []
    assert wait_until(lambda: bool(got.extend(store.sync("n1", lease=10).leased) or got))
    [again] = got
    assert url_of(again.payload) == "a"  # type: ignore[attr-defined]
    assert json.loads(again.payload)["mt"]["~v"] == {"e": '"v1"'}  # type: ignore[attr-defined]
    assert store.revisit_status()["scheduled"] == 0


def test_due_revisits_leave_in_priority_order(store: FrontierStore) -> None:
    store.sync("n1", children=[child("low", 100), child("high", 300), child("mid", 200)])
    leased = store.sync("n1", lease=10).leased
    store.sync("n1", revisits=[revisit_of(x, 50, {}) for x in leased])
    assert wait_until(lambda: store.revisit_status()["next_due_s"] is not None)
    assert wait_until(lambda: float(store.revisit_status()["next_due_s"] or 0) < 0)
    got: list[object] = []
    # (a node knows a due shard's queue only after one call: it may take one at first)
    assert wait_until(lambda: len(got.extend(store.sync("n1", lease=10).leased) or got) >= 3)
    assert [url_of(x.payload) for x in got] == ["high", "mid", "low"]  # type: ignore[attr-defined]
    assert [x.priority for x in got] == [300, 200, 100]  # type: ignore[attr-defined]


def test_a_revisit_ack_for_a_lease_not_held_changes_nothing(store: FrontierStore) -> None:
    store.sync("n1", children=[child("a")])
    [a] = store.sync("n1", lease=1).leased
    result = store.sync("n2", revisits=[revisit_of(a, 10, {})])
    assert (result.revisited, result.stale_acks) == (0, 1)
    assert store.revisit_status()["scheduled"] == 0
    assert sum(len(r) for r in store.held_leases("n1").values()) == 1


def test_revisits_need_revisit_mode(redis_url: str) -> None:
    plain = make_store(redis_url, 1, forget_ms=None)
    plain.sync("n1", children=[child("a")])
    [a] = plain.sync("n1", lease=1).leased
    with pytest.raises(ValueError, match="revisit mode"):
        plain.sync("n1", revisits=[revisit_of(a, 10, {})])


def test_each_page_lives_once_through_many_revisits(store: FrontierStore) -> None:
    urls = [f"p{i}" for i in range(20)]
    store.sync("n1", children=[child(u) for u in urls])
    fetched: list[str] = []
    for _ in range(3):
        batch: list[object] = []

        def lease_all(batch: list[object] = batch) -> bool:
            batch.extend(store.sync("n1", lease=50).leased)
            return len(batch) >= len(urls)

        assert wait_until(lease_all)
        assert len(batch) == len(urls)
        fetched += [url_of(x.payload) for x in batch]  # type: ignore[attr-defined]
        # the same links found again on the pages are filtered: their revisits stand for them
        again = store.sync("n1", children=[child(u) for u in urls])
        assert again.added == 0
        store.sync("n1", revisits=[revisit_of(x, 20, {}) for x in batch])
    assert sorted(fetched) == sorted(urls * 3)
    assert store.revisit_status()["scheduled"] == len(urls)


def test_the_dupefilter_forgets_a_url_after_its_generation(redis_url: str) -> None:
    store = make_store(redis_url, 1, forget_ms=1500)
    assert store.sync("n1", children=[child("a")]).added == 1
    assert store.sync("n1", children=[child("a")]).filtered == 1
    # new again between one and two generations after it was recorded
    assert wait_until(lambda: store.sync("n1", children=[child("a")]).added == 1, 30)
    keys = store.keys.shard(0)
    gen = int(store.client.get(keys.seen_generation))
    # generations before the previous one are dropped: memory stays bounded
    assert not store.client.exists(keys.seen_gen_info(gen - 2))


def test_a_revisit_keeps_its_url_known(redis_url: str) -> None:
    store = make_store(redis_url, 1, forget_ms=1500)
    store.sync("n1", children=[child("a")])
    deadline = time.monotonic() + 6  # several generations
    while time.monotonic() < deadline:
        leased: list[object] = []

        def take(leased: list[object] = leased) -> bool:
            leased.extend(store.sync("n1", lease=1).leased)
            return bool(leased)

        assert wait_until(take)
        # every visit records the URL again: a link to it is filtered, never a second entry
        assert store.sync("n1", children=[child("a")]).added == 0
        store.sync("n1", revisits=[revisit_of(leased[0], 100, {})])
    assert store.revisit_status()["scheduled"] == 1


def test_revisits_and_new_links_share_the_site_budget(redis_url: str) -> None:
    # the site allows 2 requests in flight on all nodes: old pages coming back and new links
    # found meanwhile all go through that budget
    budget = SiteBudget(concurrency=2)
    store = make_store(redis_url, 1)
    store.sync("n1", children=[child(f"old{i}") for i in range(6)], budget=budget)
    in_flight: list[object] = []
    done: list[object] = []
    pushed_new = False
    seen_max = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = store.sync("n1", lease=10, budget=budget).leased
        in_flight += got
        seen_max = max(seen_max, len(in_flight))
        assert len(in_flight) <= 2
        if not in_flight:
            if len(done) >= 18:
                break
            time.sleep(0.02)
            continue
        first = in_flight.pop(0)
        name = url_of(first.payload)  # type: ignore[attr-defined]
        if name.startswith("old") and name not in {url_of(d.payload) for d in done}:  # type: ignore[attr-defined]
            store.sync("n1", revisits=[revisit_of(first, 10, {})], budget=budget)
        else:
            store.sync("n1", acks=[first.lease], budget=budget)  # type: ignore[attr-defined]
        done.append(first)
        if not pushed_new:
            store.sync("n1", children=[child(f"new{i}") for i in range(6)], budget=budget)
            pushed_new = True
    names = [url_of(d.payload) for d in done]  # type: ignore[attr-defined]
    assert sorted(n for n in names if n.startswith("new")) == [f"new{i}" for i in range(6)]
    assert sum(1 for n in names if n.startswith("old")) == 12  # each old page twice
    assert seen_max == 2
    assert int(store.client.hget(store.keys.site_keys("s.test").active, "s.test") or 0) == 0


def test_a_busy_sites_new_links_take_their_turn_before_revisits_that_came_after_them(
    redis_url: str,
) -> None:
    # the site allows 1 request in flight and its old pages come back at once, for ever: the
    # site's waiting room always holds some, and links found meanwhile join it behind them. They
    # are served in the order they joined (a revisit keeps its old rid: by the rid's age it
    # would pass them every time, and the new links would wait for good)
    budget = SiteBudget(concurrency=1)
    store = make_store(redis_url, 1)
    store.sync("n1", children=[child(f"old{i}") for i in range(4)], budget=budget)
    names: list[str] = []
    for _ in range(5000):  # leases, and rounds waiting for a revisit's millisecond
        got = store.sync("n1", lease=10, budget=budget).leased
        if not got:
            time.sleep(0.002)
            continue
        (first,) = got  # the budget: one at a time
        name = url_of(first.payload)
        names.append(name)
        if name.startswith("old"):
            store.sync("n1", revisits=[revisit_of(first, 1, {})], budget=budget)
        else:
            store.sync("n1", acks=[first.lease], budget=budget)
        if len(names) == 2:
            store.sync("n1", children=[child(f"new{i}") for i in range(4)], budget=budget)
        if sum(n.startswith("new") for n in names) == 4 or len(names) >= 60:
            break
    new = [i for i, n in enumerate(names) if n.startswith("new")]
    # each waits behind what was waiting when it came: the old pages, once each
    assert len(new) == 4 and new[-1] < 2 + 4 + 4 + 4, names


def test_status_tells_what_is_due_next_and_how_far_behind(redis_url: str) -> None:
    store = make_store(redis_url, 4)
    store.sync("n1", children=[child("a"), child("b")])
    leased = store.sync("n1", lease=10).leased
    store.sync("n1", revisits=[revisit_of(leased[0], 60_000, {}), revisit_of(leased[1], 1, {})])
    # b is due at once; while nobody leases it, the crawl falls behind schedule
    assert wait_until(lambda: store.revisit_status()["behind_s"] > 0.2)
    status = store.revisit_status(grace_s=5)
    assert status["scheduled"] == 2 and status["due_within_grace"] == 1
    assert status["next_due_s"] is not None and status["next_due_s"] < 0
    # leased: nothing is behind any more
    got: list[object] = []
    assert wait_until(lambda: bool(got.extend(store.sync("n1", lease=1).leased) or got))
    later = store.revisit_status(grace_s=5)
    assert later["scheduled"] == 1 and later["due_queued"] == 0 and later["behind_s"] == 0
    assert 0 < later["next_due_s"] <= 60


def test_leased_entry_uses_the_lease_lost_by_a_dead_node(redis_url: str) -> None:
    store = make_store(redis_url, 1)
    store.sync("n1", children=[child("a")])
    [a] = store.sync("n1", lease=1).leased
    store.release("n1")  # n1 died: its lease is back in the queue
    [again] = store.sync("n2", lease=1).leased
    assert again.lease.rid == a.lease.rid
    assert store.sync("n1", revisits=[revisit_of(a, 10, {})]).stale_acks == 1
    assert store.sync("n2", revisits=[revisit_of(again, 10, {})]).revisited == 1
    assert store.revisit_status()["scheduled"] == 1


def test_revisit_entry_is_compact(redis_url: str) -> None:
    store = make_store(redis_url, 1)
    store.sync("n1", children=[child("a")])
    [a] = store.sync("n1", lease=1).leased
    store.sync("n1", revisits=[revisit_of(a, 60_000, {"e": '"x"'})])
    keys = store.keys.shard(0)
    [member] = store.client.zrange(keys.revisit, 0, -1)
    assert member == f"0:{a.lease.rid}".encode()
    assert Lease(0, a.lease.rid, "s.test") == a.lease


def test_without_revisit_mode_no_revisit_key_is_written(redis_url: str) -> None:
    store = make_store(redis_url, 1, forget_ms=None)
    store.sync("n1", children=[child("a"), child("b")])
    leased = store.sync("n1", lease=10).leased
    store.sync("n1", acks=[x.lease for x in leased], children=[child("a"), child("c")])
    keys = store.keys.shard(0)
    names = {k.decode() for k in store.client.scan_iter(match=f"{keys.prefix}:*")}
    assert not {n for n in names if ":revisit" in n or ":seen:g" in n}
    assert keys.dupefilter in names and store.seen() == 3
    assert store.revisit_status()["scheduled"] == 0


def test_due_times_are_on_the_servers_clock_whatever_the_nodes_clock_says(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose clock runs an hour ahead still computes revisit due times on Redis' clock
    (the offset its heartbeat measured): another node reading them agrees."""
    from distcrawl.frontier import store as store_module

    ahead = 3600.0
    real = time.time
    store = make_store(redis_url, 1)
    server = redis.Redis.from_url(redis_url)
    seconds, micros = server.time()
    assert abs(store.server_time() - (seconds + micros / 1e6)) < 5  # one host: no offset yet
    monkeypatch.setattr(store_module.time, "time", lambda: real() + ahead)
    assert store.server_time() - real() > ahead - 5  # before a heartbeat: the node's own clock
    store.heartbeat("skewed", "{}")
    assert store.clock_offset == pytest.approx(-ahead, abs=5)
    seconds, micros = server.time()
    assert abs(store.server_time() - (seconds + micros / 1e6)) < 5
