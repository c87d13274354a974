"""Busy sites and their shared budget, read from a real Redis."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis

from distcrawl.frontier.store import FrontierKeys, FrontierStore, SiteBudget
from distcrawl.ops.reads import arun
from distcrawl.ops.sites import site_rows, slowest
from distcrawl.ops.snapshot import read_snapshot
from distcrawl.ops.status import build_status

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)


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
    cut = status["sites"][0].pop("cut")
    # why it runs below its rate: the cut's cause, when, the factor and when it wears off
    assert cut["factor"] == 0.5 and cut["wears_off_in_s"] == pytest.approx(1800.0, abs=1)
    assert 0 <= cut["since_s"] < 60 and cut["at_ms"] <= status["server_time_ms"]
    assert cut["why"].endswith(": rate at 50%, full again within 30m00s")
    assert cut["cause"] == "throttled" and cut["why"].startswith("throttled ")
    assert status["sites"][0].pop("slower_because") == cut["why"]
    assert status["sites"] == [
        {
            "hold": None,
            "crawl_delay_s": None,
            "delay_source": None,
            "site": "slow.test",
            "limit_rate": 2.0,
            "limit_rate_from": "site",
            "limit_concurrency": None,
            "limit_concurrency_from": None,
            "factor": 0.5,
            "allowed_rate": 1.0,
            "in_flight": 1,
            "waiting": 5,
            "responses_per_min": 0.0,
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
    assert rows["busy.test"]["responses_per_min"] == 150.0  # both nodes' rates summed
    assert [row["site"] for row in status["sites"]] == ["busy.test", "quiet.test"]


def test_a_site_neither_busy_nor_cut_is_not_shown() -> None:
    # a cut as the library writes it: the factor, when it was set and how long it wears off
    cut = {"active": "0", "factor": "0.5", "fts": "1000", "cut_at": "1000", "recover_ms": "60000"}
    budgets = {"idle.test": {"active": "0"}, "cut.test": cut}
    rows = site_rows(budgets, {}, {}, now_ms=1000)
    assert [row["site"] for row in rows] == ["cut.test"]


def test_the_slowest_sites_come_longest_waiting_first_a_page_at_a_time(r, redis_url) -> None:
    for i in range(25):
        site = f"s{i:02d}.test"
        r.zadd(KEYS.wait(site), {f"w{i}": -100})
        r.zadd(KEYS.site_keys(site).waiting, {site: 1000 + i})

    async def page(n: int) -> tuple[int, list[str]]:
        client = aioredis.from_url(redis_url)
        try:
            found = await arun(client, slowest(KEYS, n, 10))
        finally:
            await client.aclose()
        return found.total, [row["site"] for row in found.rows]

    assert asyncio.run(page(0)) == (25, [f"s{i:02d}.test" for i in range(24, 14, -1)])
    assert asyncio.run(page(2)) == (25, [f"s{i:02d}.test" for i in range(4, -1, -1)])
    assert asyncio.run(page(3)) == (25, [])


def test_a_cut_names_its_cause_until_it_is_over(r) -> None:
    store = FrontierStore(r, KEYS)
    budget = SiteBudget(recovery=3600)
    store.sync("n1", feedback=[("lag.test", 0, 0, 1)], budget=budget)  # a slow answer
    (site,) = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)["sites"]
    assert (site["site"], site["cut"]["cause"]) == ("lag.test", "slow")
    assert site["cut"]["factor"] == 0.8
    # fine answers raise the factor back to 1: the cut, its cause with it, is over
    store.sync("n1", feedback=[("lag.test", 20, 0, 0)], budget=budget)
    fields = r.hgetall(KEYS.site_keys("lag.test").site("lag.test"))
    assert not {b"factor", b"cut_why"} & set(fields)
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert all(s["cut"] is None for s in status["sites"])
