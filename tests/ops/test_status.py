"""The status of a crawl built from a real Redis: queued work, nodes and their states, dead
letters, errors by kind, drained and paused."""

from __future__ import annotations

import json
import time

import pytest
from crawl_writes import beat, kids, lease, queue

from distcrawl.base.rates import OwnRates
from distcrawl.frontier.store import Dupefilter, FrontierKeys, FrontierStore
from distcrawl.ops import control
from distcrawl.ops.progress import progress_line
from distcrawl.ops.rates import RateTracker
from distcrawl.ops.sites import site_rows
from distcrawl.ops.snapshot import NodeRecord, Revisits, Snapshot, read_snapshot
from distcrawl.ops.status import (
    build_status,
    crawl_state,
    error_kinds,
    products_accounted,
    site_defaults,
)

# several shards: the status reads every one of them
KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)


def test_requests_waiting_for_their_site_count_as_queued_work(r) -> None:
    store = FrontierStore(r, KEYS)
    store.set_site_limits("shop.test", rate=0.001, concurrency=None)
    store.sync("n1", children=kids("shop.test", 3))
    first = lease(store, "n1", 3)  # one token: one leased, two wait for the site
    assert len(first) == 1
    queue(r, KEYS, 300)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert status["frontier"]["queued"] == 3
    assert status["frontier"]["waiting_for_site"] == 2
    assert status["frontier"]["sites_waiting"] == 1
    assert status["frontier"]["waiting_by_site"] == {"shop.test": 2}
    assert status["frontier"]["queued_by_kind"]["product"] == 2
    assert status["frontier"]["in_flight"] == 1
    assert status["frontier"]["backlog"] == 4
    store.sync("n1", acks=[leased.lease for leased in first])
    store.set_site_limits("shop.test", rate=None, concurrency=None)
    r.zadd(KEYS.site_keys("shop.test").waiting, {"shop.test": 0})  # its wait is over now
    assert len(lease(store, "n1", 2)) == 2  # the waiting room empties: the total follows
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert status["frontier"]["waiting_for_site"] == 0
    assert status["frontier"]["in_flight"] == 2


@pytest.mark.parametrize("kind", ["exact", "bloom"])
@pytest.mark.parametrize("forget_ms", [None, 3_600_000], ids=["once", "revisit"])
def test_seen_urls_are_what_the_dupefilter_holds_in_every_mode(
    r, kind: str, forget_ms: int | None
) -> None:
    # a known crawl: 900 distinct URLs of three sites (past 200 in a shard, the exact
    # dupefilter's buckets split), half of them pushed a second time
    dupefilter = Dupefilter(kind=kind, capacity=100_000)
    store = FrontierStore(r, KEYS, dupefilter=dupefilter, forget_ms=forget_ms)
    children = kids("a.test", 300) + kids("b.test", 300, "b") + kids("c.test", 300, "c")
    assert store.sync("n1", children=children).added == 900
    assert store.sync("n1", children=children[::2]).added == 0
    # status (so the dashboard and /metrics), the reset's preview and the store agree
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    plan = control.reset_plan(r, KEYS, heartbeat_timeout=30, force=False, keep_seeds=True)
    assert status["frontier"]["seen"] == plan["would_delete"]["seen"] == store.seen() == 900
    # in revisit mode, what the dupefilter holds is its generations' (none is written else)
    generations = [r.get(shard.seen_generation) for shard in KEYS.all_shards()]
    assert any(generations) == bool(forget_ms)


def test_nodes_live_dead_recovered_and_orphaned(r) -> None:
    store = FrontierStore(r, KEYS)
    beat(r, KEYS, "gone", {})
    r.zadd(KEYS.nodes, {"gone": 1000})
    # "gone" is recovered: dead, for a day (recovery waits for the server to be up longer
    # than the timeout: 1 ms here)
    deadline = time.monotonic() + 30
    while not store.recover("alive", 1)[0]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    store.sync("loader", children=kids("a.test", 2) + kids("b.test", 2))
    beat(
        r,
        KEYS,
        "alive",
        {"item_scraped_count": 5, "catalog/pages/product": 5},
        started=2,
        prefetched=1,
    )
    assert len(lease(store, "alive", 2)) == 2
    beat(r, KEYS, "silent", {"item_scraped_count": 3})
    assert len(lease(store, "silent", 1)) == 1
    r.zadd(KEYS.nodes, {"silent": 1000})  # heartbeat in 1970: past any timeout
    # leases under a name that never heart-beat: nothing else knows it
    assert len(lease(store, "ghost", 1)) == 1
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    nodes = {n["node"]: n for n in status["nodes"]}
    assert nodes["alive"]["state"] == "live"
    assert nodes["alive"]["heartbeat_age_s"] < 5
    assert (nodes["alive"]["in_flight"], nodes["alive"]["working"]) == (2, 2)
    assert nodes["silent"]["state"] == "dead" and not nodes["silent"]["recovered"]
    assert nodes["gone"]["state"] == "dead" and nodes["gone"]["recovered"]
    assert nodes["ghost"]["state"] == "orphan"
    assert status["frontier"]["in_flight"] == 4
    assert (status["totals"]["live_nodes"], status["totals"]["dead_nodes"]) == (1, 2)
    assert status["totals"]["products"] == 8
    # a clean stop returns the leases: the node shows as stopped with none in flight
    store.release("alive")
    nodes = {
        n["node"]: n for n in build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)["nodes"]
    }
    assert (nodes["alive"]["state"], nodes["alive"]["in_flight"]) == ("stopped", 0)


def test_dead_letters_by_reason_and_by_site(r) -> None:
    for i, (reason, url) in enumerate(
        [("http_503", "http://a.test/1"), ("http_503", "http://b.test/2"), ("x", "http://a.test/3")]
    ):
        record = {"url": url, "reason": reason, "request": "{}"}
        r.hset(KEYS.shard(0).dead, f"id{i}", json.dumps(record))
    r.hset(KEYS.shard(0).dead, "junk", b"\xff not json")
    dead = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)["dead_letters"]
    assert dead["total"] == 4
    # an unreadable record says so (the name the filters match it by)
    assert dead["by_reason"] == {"http_503": 2, "x": 1, "unreadable_record": 1}
    assert dead["by_site"] == {"a.test": 2, "b.test": 1, "unknown": 1}


def test_errors_by_kind_and_pages_by_kind_are_summed_over_nodes(r) -> None:
    stats = {
        "downloader/response_status_count/200": 9,
        "downloader/response_status_count/503": 2,
        "retry/reason_count/twisted.internet.error.TimeoutError": 1,
        "log_count/ERROR": 1,
        "catalog/pages/listing": 3,
    }
    beat(r, KEYS, "a", stats)
    beat(r, KEYS, "b", stats)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    # an exception is named by its class, as the dead letters name it
    assert status["errors"] == {
        "http/503": 4,
        "log_errors": 2,
        "retry/TimeoutError": 2,
    }
    assert status["pages_by_kind"] == {"listing": 6}


def test_error_kinds_name_exceptions_by_class_and_refusals_by_reason() -> None:
    stats = {
        "downloader/exception_type_count/scrapy.exceptions.DownloadConnectionRefusedError": 3,
        "retry/reason_count/DownloadConnectionRefusedError": 2,
        "spider_exceptions/builtins.KeyError": 1,
        "frontier/refused/not_json": 4,
        "frontier/seeds/refused/bad_scheme": 5,
        "frontier/redis_errors": 6,
        "frontier/dead_lettered": 7,
        "downloader/response_status_count/404": 8,
        "downloader/response_status_count/304": 9,
        "catalog/pages/product": 10,
    }
    assert error_kinds(stats) == {
        "exception/DownloadConnectionRefusedError": 3,
        "retry/DownloadConnectionRefusedError": 2,
        "spider_exception/KeyError": 1,
        "refused/not_json": 4,
        "seed_refused/bad_scheme": 5,
        "redis_errors": 6,
        "dead_lettered": 7,
        "http/404": 8,
    }


def test_an_empty_crawl_is_drained_and_paused_shows(r) -> None:
    r.set(KEYS.paused, "1")
    status = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    assert status["drained"] and status["eta_seconds"] == 0.0 and status["paused"]
    assert progress_line(status).startswith("Cluster: PAUSED, queued 0")


def test_nodes_publish_their_own_rates_so_every_reader_sums_the_same(r) -> None:
    store = FrontierStore(r, KEYS)
    for name, pages in (("n1", 600), ("n2", 300)):
        own = OwnRates()
        own.update(0, {"response_received_count": 0, "item_scraped_count": 0})
        rates = own.update(60_000, {"response_received_count": pages, "item_scraped_count": 10})
        assert rates == {"pages": pages, "products": 10.0, "acked": 0.0}
        store.heartbeat(name, json.dumps({"stats": {}, "rates": rates}))
    # two readers with their own (empty) trackers, as two nodes' progress lines are
    first = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    second = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    assert first["totals"]["responses_per_min"] == second["totals"]["responses_per_min"] == 900
    assert [n["responses_per_min"] for n in first["nodes"]] == [600, 300]


def test_a_node_shows_its_failures_and_its_journal(r) -> None:
    stats = {
        "log_count/ERROR": 1,
        "downloader/exception_type_count/twisted.internet.error.TimeoutError": 2,
        "downloader/response_status_count/503": 5,  # the site's answer, not the node's failure
        "pipeline/journaled": 9,
        "pipeline/replayed": 4,
        "pipeline/journal_held": 5,
    }
    beat(r, KEYS, "n1", stats)
    beat(r, KEYS, "n2", {})
    nodes = {
        n["node"]: n for n in build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)["nodes"]
    }
    assert (nodes["n1"]["errors"], nodes["n1"]["journal_held"]) == (3, 5)
    assert (nodes["n2"]["errors"], nodes["n2"]["journal_held"]) == (0, 0)


def _snapshot(**nodes: dict) -> Snapshot:
    at = 1_800_000_000_000
    return Snapshot(
        spider="catalog",
        at_ms=at,
        queued=2,
        nodes={name: NodeRecord(heartbeat_ms=at - 100, info=info) for name, info in nodes.items()},
    )


def test_the_site_defaults_in_force_are_the_live_nodes_and_their_differences_are_named() -> None:
    agree = {"site_defaults": {"rate": 2.0, "concurrency": 4}}
    assert site_defaults(_snapshot(a=agree, b=agree)) == {
        "rate": 2.0, "concurrency": 4, "nodes": 2
    }  # fmt: skip
    other = {"site_defaults": {"rate": 5, "concurrency": 4}}
    differ = site_defaults(_snapshot(a=agree, b=other))
    assert differ["rate"] is None and differ["concurrency"] == 4
    assert differ["why"] == "the live nodes differ: DISTCRAWL_SITE_RATE 2, 5"
    nobody = site_defaults(_snapshot(a={}))
    assert nobody["rate"] is None and nobody["why"] == "no live node publishes its defaults"
    # a site without limits of its own: the default in force, and from where
    budgets = {"shop.test": {"active": "1"}, "own.test": {"active": "1", "limit_rate": "0.5"}}
    rows = {r["site"]: r for r in site_rows(budgets, {}, defaults={"rate": 2.0, "concurrency": 0})}
    assert (rows["shop.test"]["limit_rate"], rows["shop.test"]["limit_rate_from"]) == (
        2.0,
        "default",
    )
    assert rows["shop.test"]["allowed_rate"] == 2.0
    assert (rows["own.test"]["limit_rate"], rows["own.test"]["limit_rate_from"]) == (0.5, "site")
    assert rows["shop.test"]["limit_concurrency"] is None  # 0: no limit


def test_the_crawls_state_follows_its_live_nodes() -> None:
    assert crawl_state(paused=False, drained=False, live=2) == "running"
    assert crawl_state(paused=False, drained=False, live=0) == "waiting"
    assert crawl_state(paused=True, drained=False, live=1) == "paused"
    assert crawl_state(paused=True, drained=True, live=0) == "drained"
    status = build_status(_snapshot(), heartbeat_timeout=30)
    assert status["state"] == "waiting" and status["eta_seconds"] is None
    assert status["unreadable"] == {
        "rates": "no live node", "eta_seconds": "no live node takes the work"
    }  # fmt: skip


def test_a_continuous_crawl_has_no_time_to_drain_and_says_why() -> None:
    snapshot = _snapshot()
    snapshot.queued = 0
    snapshot.revisit = Revisits(scheduled=4, next_due_ms=snapshot.at_ms + 90_000)
    status = build_status(snapshot, heartbeat_timeout=30)
    assert status["eta_seconds"] is None and status["revisit"]["scheduled"] == 4
    assert status["unreadable"]["eta_seconds"] == (
        "continuous (revisit mode: it never drains): nothing due now; next revisit due in 1m30s"
    )
    assert "continuous (revisit mode)" in progress_line(status)


def test_the_nodes_products_beside_this_crawls_say_why_they_differ() -> None:
    status = build_status(_snapshot(a={"stats": {"item_scraped_count": 5}}), heartbeat_timeout=30)
    status["store"] = {"this_crawl": 8, "error": None}
    accounted = products_accounted(status, 2.0)
    assert accounted["difference"] == 3
    assert accounted["why"] == [
        "the live nodes' counts are those of their last heartbeat, up to 0.1s ago: what they "
        "stored since is not counted yet"
    ]
    status["store"] = {"this_crawl": None, "error": "MongoDB at m: down"}
    assert products_accounted(status)["why"] == ["MongoDB at m: down"]
