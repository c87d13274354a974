"""The crawl's error groups, field coverage, run, findings and notices in the control slot, on a
real Redis: counts added by several nodes in any order, the caps on groups and snapshots, the
marks a site's products pass, and one notice per event for the whole cluster."""

from __future__ import annotations

import json

import pytest

from distcrawl.base.coverage import SiteFigures
from distcrawl.base.grouping import OTHER_TEMPLATE, group_id
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.observe import GroupEntry, Limits, encode_delta
from distcrawl.frontier.store import FrontierStore

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=2)


@pytest.fixture
def store(redis_url: str):  # type: ignore[no-untyped-def]
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        yield FrontierStore(client, KEYS)
    finally:
        client.close()


def entry(site: str, kind: str, text: str, count: int = 1, *, snapshot: bool = True,
          samples: tuple[str, ...] = ()) -> GroupEntry:  # fmt: skip
    return GroupEntry(
        group_id(site, kind, text),
        group_id("", kind, OTHER_TEMPLATE),
        site,
        kind,
        text,
        count,
        samples,
        snapshot,
    )


DEFAULT_LIMITS = Limits()


def observe(store: FrontierStore, node: str, groups=(), products=None, limits=DEFAULT_LIMITS):  # type: ignore[no-untyped-def]
    delta = encode_delta(list(groups), products or {})
    _, observed = store.heartbeat_observed(node, "{}", delta, limits)
    return observed


def test_groups_add_up_over_nodes_and_one_node_is_granted_the_first_snapshot(
    store: FrontierStore,
) -> None:
    a = entry("a.test", "http", "HTTP 502 Bad Gateway", 3, samples=("http://a.test/1",))
    b = entry("b.test", "download", "TimeoutError: took <n> ms", 1)
    first = observe(store, "n1", [a, b])
    assert sorted(first.granted) == sorted([a.group, b.group])
    again = entry("a.test", "http", "HTTP 502 Bad Gateway", 2, samples=("http://a.test/2",))
    second = observe(store, "n2", [again])
    assert second.granted == []  # the first node's snapshot stands
    groups, totals = store.top_groups(10)
    assert [(g.id, g.count) for g in groups] == [(a.group, 5), (b.group, 1)]
    assert groups[0].samples == ["http://a.test/1", "http://a.test/2"]
    assert groups[0].snapshot_node == "n1" and groups[0].site == "a.test"
    assert groups[0].first_ms <= groups[0].last_ms
    assert totals.groups == 2 and totals.snapshots == 2
    assert totals.events_by_kind == {"http": 5, "download": 1}
    assert totals.groups_by_kind == {"http": 1, "download": 1}
    # a heartbeat without a delta sends no observe call and answers nothing
    assert store.heartbeat_observed("n1", "{}", "", Limits())[1] is None


def test_groups_beyond_the_cap_count_in_their_kinds_group_of_others(store: FrontierStore) -> None:
    limits = Limits(groups_max=2, snapshots_max=1)
    entries = [entry(f"s{i}.test", "http", f"HTTP 50{i}") for i in range(4)]
    observed = observe(store, "n1", entries, limits=limits)
    assert len(observed.granted) == 1  # the snapshots' cap
    groups = store.error_groups()
    assert len(groups) == 3
    other = [g for g in groups if g.template == OTHER_TEMPLATE]
    assert len(other) == 1 and other[0].count == 2 and other[0].site == ""
    assert not other[0].snapshot_node


def test_a_sites_products_pass_marks_and_the_window_reads_them(store: FrontierStore) -> None:
    limits = Limits(window=8)  # a mark every 2 products
    first = [(2, {"name": 2, "price": 2}), (1, {"name": 1, "price": 1})]
    rolled = observe(store, "n1", products={"a.test": first}, limits=limits)
    assert list(rolled.sites) == ["a.test"]
    for _ in range(4):  # 8 more, without a price
        observe(store, "n2", products={"a.test": [(2, {"name": 2})]}, limits=limits)
    figures = store.read_quality()["a.test"]
    assert figures.products == 11 and figures.fields == {"name": 11, "price": 3}
    # a mark at 2 (the first chunk), at 5, 7, 9, 11: the window starts at the mark 8 back
    (n, counts), (n0, before) = figures.split(8)
    assert n == 9 and counts["price"] == 1 and n0 == 2 and before["price"] == 2
    assert store.read_quality(["a.test", "none.test"]).keys() == {"a.test"}
    # marks older than a whole window are dropped: the figures stay small
    assert len(figures.marks) <= 8 // 2 + 1


def test_a_finding_is_recorded_once_and_read_newest_first(store: FrontierStore) -> None:
    assert store.record_finding("a\tprice", json.dumps({"site": "a"}), 1000)
    assert not store.record_finding("a\tprice", json.dumps({"site": "again"}), 2000)
    assert store.record_finding("b\tsku", json.dumps({"site": "b"}), 3000)
    found, total = store.read_findings(10)
    assert total == 2 and [f["site"] for f in found] == ["b", "a"]


def test_one_notice_per_event_for_the_cluster_within_the_rate(store: FrontierStore) -> None:
    assert store.claim_notice("crawl_finished:r1", "{}", 2) == 1
    assert store.claim_notice("crawl_finished:r1", "{}", 2) == 0  # another node saw it too
    assert store.claim_notice("node_dead:n3", "{}", 2) == 1
    assert store.claim_notice("finding:a", "{}", 2) == -1  # a third this minute
    assert store.claim_notice("finding:a", "{}", 2) == 0  # claimed: nobody sends it


def test_the_run_is_made_once_by_the_first_node(store: FrontierStore) -> None:
    assert store.read_run() is None
    run = store.claim_run("r-1", "n1")
    assert run.id == "r-1" and run.by == "n1" and run.started_ms > 0 and run.finished_ms == 0
    assert store.claim_run("r-2", "n2") == run
    finished = store.finish_run()
    assert finished >= run.started_ms and store.finish_run() == 0  # marked once
    assert store.read_run().finished_ms == finished  # type: ignore[union-attr]
    store.heartbeat("n1", "{}")
    assert store.heart_beating(30_000) == 1


def test_figures_read_from_anything_else_are_empty() -> None:
    assert SiteFigures.from_json(b"not json").products == 0
    assert SiteFigures.from_json(b"[1, 2]").fields == {}
    assert SiteFigures.from_json(None).shares() == {}
