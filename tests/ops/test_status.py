"""The cluster view read from a real Redis: bands, nodes, dead letters, rates, the progress line."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from distcrawl.base.rates import OwnRates
from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.ops.progress import progress_line
from distcrawl.ops.status import (
    SCORE_SCALE,
    RateTracker,
    aread_snapshot,
    build_status,
    priority_bands,
    read_snapshot,
    score_range,
)

# several shards: the status reads every one of them
KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)
PRIORITIES = {"seed": 1000, "category": 300, "listing": 200, "product": 100}


@pytest.fixture
def r(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def queue(r: redis.Redis, *priorities: int, key: str = KEYS.shard(0).queue) -> None:
    """Queue entries exactly as the frontier scores them: -priority * SCORE_SCALE + seq."""
    for prio in priorities:
        seq = r.incr(KEYS.shard(0).seq)
        r.zadd(key, {str(seq): -prio * SCORE_SCALE + seq})


def beat(r: redis.Redis, node: str, stats: dict, **info) -> None:
    FrontierStore(r, KEYS).heartbeat(
        node, json.dumps({"pid": 1, "host": "h", **info, "stats": stats})
    )


def test_bands_reach_halfway_to_the_neighbours() -> None:
    assert priority_bands(PRIORITIES) == [
        ("seed", 650, None),
        ("category", 250, 650),
        ("listing", 150, 250),
        ("product", None, 150),
    ]
    assert score_range(None, None) == ("-inf", "+inf")


def test_queue_split_by_page_kind_counts_retries_and_custom_seeds_with_the_nearest_kind(r) -> None:
    # a retried product (99), a retried listing (199), a JSON seed at 5000, one at priority 0
    queue(r, 1000, 5000, 300, 299, 200, 199, 100, 99, 98, 0, -50)
    snap = read_snapshot(r, KEYS, page_priorities=PRIORITIES)
    assert snap["queued"] == 11
    assert snap["queued_by_kind"] == {"seed": 2, "category": 2, "listing": 2, "product": 5}


def _kids(site: str, n: int, tag: str = "fp") -> list[tuple[str, int, bool, int, str, str]]:
    return [
        (f"{tag}{i}", 100, False, 0, site, json.dumps({"url": f"http://{site}/{tag}{i}"}))
        for i in range(n)
    ]


def lease(store: FrontierStore, node: str, n: int, **options: Any) -> list[Any]:
    """Lease from every shard until *n* are leased or no shard gives more (a node's first
    leases spread over shards it does not know yet)."""
    got: list[Any] = []
    for _ in range(3 * store.keys.shards):
        store.views.poke()
        got += store.sync(node, lease=n - len(got), **options).leased
        if len(got) >= n:
            break
    return got


def test_requests_waiting_for_their_site_count_as_queued_work(r) -> None:
    store = FrontierStore(r, KEYS)
    store.set_site_limits("shop.test", rate=0.001, concurrency=None)
    store.sync("n1", children=_kids("shop.test", 3))
    first = lease(store, "n1", 3)  # one token: one leased, two wait for the site
    assert len(first) == 1
    queue(r, 300)
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


def test_nodes_live_dead_recovered_and_orphaned(r) -> None:
    store = FrontierStore(r, KEYS)
    beat(r, "gone", {})
    r.zadd(KEYS.nodes, {"gone": 1000})
    # "gone" is recovered: dead, for a day (recovery waits for the server to be up longer
    # than the timeout: 1 ms here)
    deadline = time.monotonic() + 30
    while not store.recover("alive", 1)[0]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    store.sync("loader", children=_kids("a.test", 2) + _kids("b.test", 2))
    beat(r, "alive", {"item_scraped_count": 5, "catalog/pages/product": 5}, started=2, prefetched=1)
    assert len(lease(store, "alive", 2)) == 2
    beat(r, "silent", {"item_scraped_count": 3})
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
    assert dead["by_reason"] == {"http_503": 2, "x": 1, "unknown": 1}
    assert dead["by_site"] == {"a.test": 2, "b.test": 1, "unknown": 1}


def test_errors_by_kind_and_pages_by_kind_are_summed_over_nodes(r) -> None:
    stats = {
        "downloader/response_status_count/200": 9,
        "downloader/response_status_count/503": 2,
        "retry/reason_count/twisted.internet.error.TimeoutError": 1,
        "log_count/ERROR": 1,
        "catalog/pages/listing": 3,
    }
    beat(r, "a", stats)
    beat(r, "b", stats)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert status["errors"] == {
        "http/503": 4,
        "log_errors": 2,
        "retry/twisted.internet.error.TimeoutError": 2,
    }
    assert status["pages_by_kind"] == {"listing": 6}


def snapshot(at: int, beats: dict[str, tuple[int, int, int]], queued: int = 0) -> dict:
    """A synthetic snapshot: node -> (heartbeat ms, pages, acked)."""
    return {
        "spider": "catalog",
        "at_ms": at,
        "queued": queued,
        "queued_by_kind": {},
        "waiting": {},
        "parked": 0,
        "requests": 0,
        "seen": 0,
        "start_list": 0,
        "rejected": 0,
        "paused": False,
        "dead_letters": {"total": 0, "by_reason": {}, "by_site": {}, "counted": 0},
        "nodes": {
            name: {
                "heartbeat_ms": hb,
                "info_heartbeat_ms": hb,
                "dead_since_ms": None,
                "leases": 0,
                "seeding": 0,
                "info": {
                    "stats": {
                        "catalog/pages/product": pages,
                        "item_scraped_count": pages,
                        "frontier/acked": acked,
                    }
                },
            }
            for name, (hb, pages, acked) in beats.items()
        },
    }


def test_rates_come_from_heartbeats_and_give_the_time_to_drain() -> None:
    tracker = RateTracker(window=60)
    tracker.update(snapshot(10_000, {"a": (10_000, 0, 0), "b": (10_000, 0, 0)}, queued=1000))
    # a sample without a new heartbeat changes nothing
    tracker.update(snapshot(10_500, {"a": (10_000, 0, 0), "b": (10_000, 0, 0)}, queued=1000))
    assert tracker.node_rates("a") is None
    last = snapshot(40_000, {"a": (40_000, 100, 100), "b": (40_000, 50, 50)}, queued=700)
    tracker.update(last)
    status = build_status(last, tracker, heartbeat_timeout=1e9)
    assert status["totals"]["pages_per_min"] == 300.0  # (100 + 50) pages in 30 s
    assert status["totals"]["products_per_min"] == 300.0
    assert status["nodes"][0]["pages_per_min"] == 200.0
    assert status["eta_seconds"] == 140.0  # 700 left at 300 acks/min
    assert status["backlog_per_min"] == -600.0
    line = progress_line(status)
    assert "queued 700" in line and "300 products/min" in line and "nodes 2 live" in line


def test_a_node_restarted_under_the_same_id_starts_its_rates_again() -> None:
    tracker = RateTracker()
    tracker.update(snapshot(1_000, {"a": (1_000, 500, 500)}))
    tracker.update(snapshot(2_000, {"a": (2_000, 10, 10)}))
    assert tracker.node_rates("a") is None
    tracker.update(snapshot(3_000, {"a": (3_000, 20, 20)}))
    assert tracker.node_rates("a") == {"pages": 600.0, "products": 600.0, "acked": 600.0}


def test_an_empty_crawl_is_drained_and_paused_shows(r) -> None:
    r.set(KEYS.paused, "1")
    status = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    assert status["drained"] and status["eta_seconds"] == 0.0 and status["paused"]
    assert progress_line(status).startswith("Cluster: PAUSED, queued 0")


def test_the_async_reader_sees_what_the_blocking_one_sees(r, redis_url) -> None:
    queue(r, 1000, 300, 100)
    beat(r, "a", {"item_scraped_count": 1})
    r.hset(KEYS.shard(0).dead, "d", json.dumps({"url": "http://a.test/", "reason": "http_500"}))

    async def read() -> dict:
        client = aioredis.from_url(redis_url)
        try:
            return await aread_snapshot(client, KEYS, dead_sample=10)
        finally:
            await client.aclose()

    sync = read_snapshot(r, KEYS)
    async_ = asyncio.run(read())
    for snap in (sync, async_):
        snap.pop("at_ms")
        snap["nodes"]["a"].pop("heartbeat_ms")
    assert sync == async_


def test_reading_a_large_queue_is_a_few_round_trips(r) -> None:
    pipe = r.pipeline(transaction=False)
    for seq in range(1, 20_001):
        pipe.zadd(KEYS.shard(0).queue, {str(seq): -100 * SCORE_SCALE + seq})
    pipe.execute()
    before = int(r.info("stats")["total_commands_processed"])
    snap = read_snapshot(r, KEYS)
    after = int(r.info("stats")["total_commands_processed"])
    assert snap["queued_by_kind"]["product"] == 20_000
    # a bounded number of commands (ZCOUNTs per band, per shard), never one per queued entry
    assert after - before - 1 < 10 + KEYS.shards * 17  # - 1: the first INFO (3: revisits)


def test_busy_sites_show_their_limit_allowed_rate_in_flight_and_waiting(r) -> None:
    store = FrontierStore(r, KEYS)
    kids = [
        (f"fp{i}", 100, False, 0, "slow.test", json.dumps({"url": f"http://slow.test/{i}"}))
        for i in range(6)
    ]
    store.sync("n1", children=kids)
    store.set_site_limits("slow.test", rate=2, concurrency=None)
    store.sync("n1", lease=6)  # one token: one leased, five wait for their site
    # a 429: the shared rate is halved (worn off so slowly that it reads 0.5 here)
    store.sync("n1", feedback=[("slow.test", 0, 1, 0)], budget=SiteBudget(recovery=3600))
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert status["sites"] == [
        {
            "site": "slow.test",
            "limit_rate": 2.0,
            "limit_concurrency": None,
            "factor": 0.5,
            "allowed_rate": 1.0,
            "in_flight": 1,
            "waiting": 5,
            "pages_per_min": 0.0,
        }
    ]
    assert status["frontier"]["waiting_for_site"] == 5


def test_a_busy_site_with_nothing_waiting_shows_from_what_the_nodes_publish(r) -> None:
    store = FrontierStore(r, KEYS)
    kids = [
        (f"fp{i}", 100, False, 0, "busy.test", json.dumps({"url": f"http://busy.test/{i}"}))
        for i in range(3)
    ]
    store.sync("n1", children=kids)
    store.sync("n1", lease=3)  # no limit: all three leased, nothing waits
    sites = [["busy.test", 120.0], ["quiet.test", 6.0], ["bad"], [3, 4], ["neg.test", -1]]
    store.heartbeat("n1", json.dumps({"pid": 1, "host": "h", "sites": sites}))
    store.heartbeat("n2", json.dumps({"pid": 2, "host": "h", "sites": [["busy.test", 30]]}))
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    rows = {row["site"]: row for row in status["sites"]}
    assert set(rows) == {"busy.test", "quiet.test"}
    # a crawl without limits keeps no in-flight counts per site (nothing to enforce)
    assert rows["busy.test"]["in_flight"] == 0 and rows["busy.test"]["waiting"] == 0
    assert rows["busy.test"]["pages_per_min"] == 150.0  # both nodes' rates summed
    assert [row["site"] for row in status["sites"]] == ["busy.test", "quiet.test"]


def test_site_activity_counts_recent_pages_per_minute_and_forgets_old_ones() -> None:
    from distcrawl.node.scheduler.tracking import SiteActivity

    now = [0.0]
    activity = SiteActivity(window=30.0, clock=lambda: now[0])
    for _ in range(30):
        activity.record("a.test")
    activity.record("b.test")
    now[0] = 15.0
    assert activity.top(1) == [["a.test", 120.0]]  # 30 pages in 15 s
    now[0] = 45.0
    activity.record("b.test")
    # the previous window (30 s) and 15 s of the current one: 31 and 2 pages in 45 s
    assert activity.top(5) == [["a.test", 40.0], ["b.test", 2.67]]
    now[0] = 200.0
    assert activity.top(5) == []


def test_status_screen_shows_the_busy_sites(r) -> None:
    from rich.console import Console

    from distcrawl.commands.status import render

    store = FrontierStore(r, KEYS)
    kids = [
        (f"fp{i}", 100, False, 0, "slow.test", json.dumps({"url": f"http://slow.test/{i}"}))
        for i in (1, 2)
    ]
    store.sync("n1", children=kids)
    store.set_site_limits("slow.test", rate=3, concurrency=None)
    store.sync("n1", lease=5)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    status.update(
        drained=False,
        redis="redis://***",
        errors={},
        pages_by_kind={},
        backlog_per_min=None,
        eta_seconds=None,
    )
    console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render(status))
    screen = console.export_text()
    assert "Sites (shared budget)" in screen
    assert "slow.test" in screen
    assert status["sites"][0]["waiting"] == 1 and status["sites"][0]["in_flight"] == 1


def _commands(r: redis.Redis) -> dict[str, int]:
    return {k: v["calls"] for k, v in r.info("commandstats").items()}


def _crawl_over_sites(r: redis.Redis, sites: int) -> None:
    """*sites* sites that were crawled (each has its budget hash), a tenth of them with a
    request in flight and one waiting for its site, on two nodes."""
    store = FrontierStore(r, KEYS)
    one_each = SiteBudget(concurrency=1)
    kids = [
        (f"a{i}", 100, False, 0, f"s{i}.test", json.dumps({"url": f"http://s{i}.test/"}))
        for i in range(sites)
    ]
    for at in range(0, sites, 2000):
        store.sync("n1", children=kids[at : at + 2000])
    while True:
        store.views.poke()
        reply = store.sync("n1", lease=500)
        if not reply.leased:
            break
        store.sync("n1", acks=[leased.lease for leased in reply.leased])
    busy = max(1, sites // 10)
    more = [
        (f"{k}{i}", 100, False, 0, f"s{i}.test", json.dumps({"url": f"http://s{i}.test/{k}"}))
        for i in range(busy)
        for k in "bc"
    ]
    store.sync("n2", children=more)
    for _ in range(2 * busy // 500 + 4):
        store.views.poke()
        store.sync("n2", lease=500, budget=one_each)
    beat(r, "n1", {})
    beat(r, "n2", {})


@pytest.mark.parametrize("sites", [10, 10_000])
def test_one_status_read_costs_the_same_bounded_commands_for_10_or_10000_sites(r, sites) -> None:
    _crawl_over_sites(r, sites)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    busy = max(1, sites // 10)
    assert status["frontier"]["waiting_for_site"] == busy
    assert status["frontier"]["sites_waiting"] == busy
    assert status["frontier"]["in_flight"] == busy
    before = _commands(r)
    read_snapshot(r, KEYS, page_priorities=PRIORITIES)
    after = _commands(r)
    calls = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    calls["cmdstat_info"] -= 1  # the INFO that read the figures
    total = sum(calls.values())
    bands, shards, nodes, top = len(PRIORITIES), KEYS.shards, 2, 20
    # control slot, each shard, each node, the first due sites of each shard, the top sites
    # (and as many of the latest cut sites), their requests in flight (one read per shard)
    bound = 5 + shards * (11 + bands) + 3 * nodes + shards * top + top * (2 + bands) + 1
    print(f"status read: {sites} sites, {total} commands (bound {bound})")
    assert total <= bound, calls
    assert not any("scan" in name or name == "cmdstat_keys" for name in calls), calls


def test_nodes_publish_their_own_rates_so_every_reader_sums_the_same(r) -> None:
    store = FrontierStore(r, KEYS)
    for name, pages in (("n1", 600), ("n2", 300)):
        own = OwnRates()
        own.update(0, {"catalog/pages/product": 0, "item_scraped_count": 0})
        rates = own.update(60_000, {"catalog/pages/product": pages, "item_scraped_count": 10})
        assert rates == {"pages": pages, "products": 10.0, "acked": 0.0}
        store.heartbeat(name, json.dumps({"stats": {}, "rates": rates}))
    # two readers with their own (empty) trackers, as two nodes' progress lines are
    first = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    second = build_status(read_snapshot(r, KEYS), RateTracker(), heartbeat_timeout=30)
    assert first["totals"]["pages_per_min"] == second["totals"]["pages_per_min"] == 900
    assert [n["pages_per_min"] for n in first["nodes"]] == [600, 300]


def test_a_node_that_left_products_in_its_journal_shows_them_after_it_stopped(r) -> None:
    from rich.console import Console

    from distcrawl.commands.status import render

    beat(r, "full", {"item_scraped_count": 9, "pipeline/journal_held": 42})
    beat(r, "clean", {"item_scraped_count": 3, "pipeline/journal_held": 0})
    FrontierStore(r, KEYS).release("full")  # a clean stop: the last stats stay readable
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    nodes = {n["node"]: n for n in status["nodes"]}
    assert nodes["full"]["state"] == "stopped"
    assert (nodes["full"]["journal_held"], nodes["clean"]["journal_held"]) == (42, 0)
    assert status["totals"]["journal_held"] == 42
    status.update(drained=False, redis="redis://***", backlog_per_min=None, eta_seconds=None)
    console = Console(width=140, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render(status))
    screen = console.export_text()
    assert "journal" in screen
    assert any("full" in line and "42" in line for line in screen.splitlines())
