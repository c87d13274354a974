"""Politeness as sites ask for it, with three real nodes: a robots.txt Crawl-delay for the
whole cluster, robots.txt that cannot be read (RFC 9309), servers shared by several sites, and
sites that answer 429/503 with Retry-After. The shops log every request they answer; the
checks read those logs (orders and counts, and the gaps the delay promises)."""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from crawl_nodes import (
    Node,
    assert_clean_log,
    assert_each_product_once,
    stats_of,
    stop_all,
    stored_urls,
    wait_for,
)
from frontier_state import KEYS, dead_records, site_shard
from politeness_probe import PROBE

from distcrawl.base.names import reasons
from distcrawl.base.names.status import ROBOTS_TXT_DELAY

pytestmark = pytest.mark.slow

NODES = 3
SITE = "127.0.0.1"


def max_in_window(times: list[float], window: float) -> int:
    """Most arrivals in any half-open window ``[t, t + window)``."""
    ts = sorted(times)
    return max((bisect.bisect_left(ts, t + window, lo=i) - i for i, t in enumerate(ts)), default=0)


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def start_nodes(
    redis_url: str,
    mongo_uri: str,
    tmp_path: Path,
    settings: dict[str, Any],
    n: int = NODES,
    env: dict[str, str] | None = None,
) -> list[Node]:
    """``n`` nodes, all registered in Redis before this returns (the crawl is not seeded)."""
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"polite{i}",
            settings=settings,
            env=env,
        )
        for i in range(1, n + 1)
    ]
    client = redis.Redis.from_url(redis_url)
    try:
        # a node starts in seconds; on a loaded machine, much longer
        if not wait_for(lambda: client.zcard(KEYS.nodes) >= n, 240):
            stop_all(nodes)
            raise AssertionError("the nodes did not all start")
    finally:
        client.close()
    return nodes


def paths(log: list[dict[str, Any]]) -> list[str]:
    return [e["path"] for e in log]


def node_logs(nodes: list[Node]) -> str:
    return "".join(node.log() for node in nodes)


# -- Crawl-delay ------------------------------------------------------------------------------


@pytest.mark.parametrize("revisit", [False, True], ids=["once", "revisit"])
def test_a_crawl_delay_is_one_request_per_delay_for_the_whole_cluster(
    r, redis_url, mongo_uri, shop_factory, tmp_path, revisit: bool
) -> None:
    delay = 1.0
    shop = shop_factory(products=4, crawl_delay=delay, page_size=4)
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS": 8}
    if revisit:
        settings.update({"DISTCRAWL_REVISIT": "*:1s", "DISTCRAWL_CLOSE_WHEN_DRAINED": "0"})
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, settings)
    try:
        r.lpush("catalog:start_urls", shop.url)
        if revisit:
            # every page fetched, and fetched again: the revisits go through the delay too
            first = len(shop.expected_product_urls()) + 4
            assert wait_for(lambda: len(shop.request_log()) >= 2 * first, 120)
            for node in nodes:
                node.terminate()
        assert [n.wait() for n in nodes] == [0] * NODES
    finally:
        stop_all(nodes)
    log = shop.request_log()
    times = [e["t"] for e in log]
    # robots.txt included: one request in any window of the delay, for all nodes together
    assert max_in_window(times, delay) == 1, sorted(times)
    assert paths(log).count("/robots.txt") == 1
    assert paths(log)[0] == "/robots.txt"
    if not revisit:
        assert_each_product_once(mongo_uri, shop)
    budget = {k.decode(): v.decode() for k, v in r.hgetall(KEYS.site(SITE)).items()}
    assert budget["delay_ms"] == "1000" and budget["delay_src"] == ROBOTS_TXT_DELAY
    logs = node_logs(nodes)
    assert f"Site {SITE} asks for a Crawl-delay of 1s" in logs
    for node in nodes:
        assert_clean_log(node.log())


def test_a_crawl_delay_over_the_maximum_sets_the_site_aside(
    r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=4, crawl_delay=120, page_size=4)
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, {}, n=1)
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert [n.wait() for n in nodes] == [0]
    finally:
        stop_all(nodes)
    assert paths(shop.request_log()) == ["/robots.txt"]  # nothing else was fetched
    letters = dead_records(r)
    assert [d["reason"] for d in letters] == [reasons.CRAWL_DELAY_OVER_MAX]
    assert "over DISTCRAWL_MAX_CRAWL_DELAY (30s): set aside" in nodes[0].log()
    assert_clean_log(nodes[0].log())


# -- robots.txt that cannot be read -----------------------------------------------------------


@pytest.mark.parametrize("fault", ["503", "close", "hang"])
def test_a_site_whose_robots_txt_fails_is_held_then_crawled_once_it_answers(
    r, redis_url, mongo_uri, shop_factory, tmp_path, fault: str
) -> None:
    shop = shop_factory(products=6, page_size=6, robots_fault=fault)
    other = shop_factory(products=6, page_size=6, host="127.0.0.2", seed=2)
    settings = {
        "RETRY_BACKOFF_BASE": 0.5,
        "RETRY_BACKOFF_MAX": 1.0,
        "DOWNLOAD_TIMEOUT": 2,
    }
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, settings)
    try:
        r.lpush("catalog:start_urls", shop.url, other.url)
        shard = site_shard(SITE)
        # held for every node while robots.txt cannot be read; the other site goes on
        assert wait_for(lambda: r.zscore(shard.holds, SITE) is not None, 60)
        assert wait_for(lambda: len(other.request_log()) > 6, 60)
        assert wait_for(lambda: paths(shop.request_log()).count("/robots.txt") >= 3, 60)
        assert set(paths(shop.request_log())) == {"/robots.txt"}
        shop.set_faults(robots_fault="")
        assert [n.wait() for n in nodes] == [0] * NODES
    finally:
        stop_all(nodes)
    log = shop.request_log()
    first_page = next(i for i, e in enumerate(log) if e["path"] != "/robots.txt")
    assert log[first_page - 1]["path"] == "/robots.txt" and log[first_page - 1]["status"] == 200
    urls = stored_urls(mongo_uri)
    assert sorted(urls) == sorted(shop.expected_product_urls() | other.expected_product_urls())
    assert not dead_records(r)
    assert r.zscore(site_shard(SITE).holds, SITE) is None
    logs = node_logs(nodes)
    assert f"robots.txt of {SITE}:{shop.port} could not be read" in logs
    for node in nodes:
        assert_clean_log(node.log())


def test_a_robots_txt_that_fails_for_good_dead_letters_the_site_once_and_requeues(
    r, redis_url, mongo_uri, shop_factory, tmp_path, cli
) -> None:
    """The fault issue's item 4: a robots.txt failing for good used to give one traceback per
    site (a robots.txt request in the dead-letter path); now the site is held, then its
    requests are dead letters an operator re-queues."""
    shop = shop_factory(products=4, page_size=4, robots_fault="503")
    settings = {
        "RETRY_BACKOFF_BASE": 0.3,
        "RETRY_BACKOFF_MAX": 0.6,
        "DISTCRAWL_ROBOTS_HOLD_MAX": 3,
    }
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, settings)
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert [n.wait() for n in nodes] == [0] * NODES
    finally:
        stop_all(nodes)
    assert set(paths(shop.request_log())) == {"/robots.txt"}
    letters = dead_records(r)
    assert [d["reason"] for d in letters] == [reasons.ROBOTS_UNAVAILABLE]
    assert letters[0]["url"] == shop.url
    logs = node_logs(nodes)
    assert "Error caught on signal handler" not in logs
    assert "NO_CALLBACK" not in logs
    assert logs.count("given up, the site's requests become dead letters") >= 1
    for node in nodes:
        assert_clean_log(node.log())
    # the site is back: an operator re-queues its dead letters, and the crawl completes
    shop.set_faults(robots_fault="")
    code, _out, err = cli(
        "deadletters", "catalog", "requeue", "--reason", reasons.ROBOTS_UNAVAILABLE
    )
    assert code == 0, err
    again = tmp_path / "again"
    again.mkdir()
    nodes = start_nodes(redis_url, mongo_uri, again, settings, n=1)
    try:
        assert [n.wait() for n in nodes] == [0]
    finally:
        stop_all(nodes)
    assert_each_product_once(mongo_uri, shop)
    assert not dead_records(r)


def test_a_robots_txt_answering_404_means_no_rules(
    r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=6, page_size=6, robots_fault="404")
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, {}, n=2)
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    assert paths(shop.request_log()).count("/robots.txt") == 1
    assert_each_product_once(mongo_uri, shop)
    assert not dead_records(r)
    assert "robotstxt/no_rules" in node_logs(nodes)


# -- servers shared by several sites ----------------------------------------------------------

LOCALHOST_RESOLVER = "distcrawl.demo.hosts.LocalhostResolver"


def test_sites_on_one_server_share_its_budget_and_another_server_keeps_its_own(
    r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    """Six host names that all resolve to 127.0.0.1 (one server, as on shared hosting) and a
    shop on 127.0.0.2 (another server): with a server limit of 2, the first server never
    answers more than 2 requests at once, whichever of its sites and nodes they come from."""
    shared = shop_factory(products=6, page_size=6, latency_ms=30)
    other = shop_factory(products=30, page_size=10, host="127.0.0.2", latency_ms=30, seed=2)
    names = [f"shop{i}.localhost" for i in range(6)]
    settings = {
        "TWISTED_DNS_RESOLVER": LOCALHOST_RESOLVER,
        "DISTCRAWL_SERVER_LIMITS": json.dumps({"concurrency": 2}),
        "CONCURRENT_REQUESTS": 8,
    }
    allow = {"DISTCRAWL_ALLOW_PRIVATE": ",".join(["127.0.0.1", "127.0.0.2", *names])}
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, settings, env=allow)
    try:
        r.lpush("catalog:start_urls", other.url, *(f"http://{n}:{shared.port}/" for n in names))
        assert [n.wait() for n in nodes] == [0] * NODES
    finally:
        stop_all(nodes)
    assert shared.peak_in_flight() <= 2
    # the other server was not held to it (its own budget, the same limit, spread over nodes)
    assert other.peak_in_flight() >= 1
    paths_shared = {urlsplit(u).path for u in shared.expected_product_urls()}
    expected = {f"http://{n}:{shared.port}{p}" for n in names for p in paths_shared}
    urls = stored_urls(mongo_uri)
    assert set(urls) == expected | other.expected_product_urls()
    assert len(urls) == len(set(urls))
    assert r.zscore(KEYS.servers, "127.0.0.1") == len(names)
    assert {m.decode() for m in r.smembers(KEYS.server_sites("127.0.0.1"))} == set(names)
    assert int(r.hget(KEYS.server("127.0.0.1"), "inuse") or 0) == 0  # every grant came back
    for node in nodes:
        assert_clean_log(node.log())


# -- 429/503 with Retry-After -----------------------------------------------------------------


def _http_date(seconds_from_now: float) -> str:
    return formatdate(time.time() + seconds_from_now, usegmt=True)


@pytest.mark.parametrize(
    ("retry_after", "hold", "settings"),
    [
        ("3", 3.0, {}),
        ("date", 2.0, {}),  # an HTTP date 3-4 s ahead (whole seconds): at least 2 s
        ("259200", 3.0, {"RETRY_AFTER_MAX": 3}),  # three days, capped
    ],
    ids=["seconds", "http-date", "days-capped"],
)
def test_retry_after_holds_every_request_of_the_site_however_it_comes(
    r,
    redis_url,
    mongo_uri,
    shop_factory,
    tmp_path,
    retry_after: str,
    hold: float,
    settings: dict[str, Any],
) -> None:
    """One request at a time (so nothing else is in flight when the 429 comes): after it, no
    request of the site reaches it before the hold is over, whether it is the retry, the next
    leased page, or a middleware's own download (the probe)."""
    shop = shop_factory(products=12, page_size=4, latency_ms=50)
    node_settings = {"CONCURRENT_REQUESTS": 1, "RETRY_BACKOFF_BASE": 0.2, **settings}
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id="held",
            settings=node_settings,
            settings_module="politeness_probe",
        )
    ]
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert wait_for(lambda: len(shop.request_log()) >= 4, 60)
        value = _http_date(4) if retry_after == "date" else retry_after
        shop.set_faults(rate_limit_429=1.0, retry_after=value)
        assert wait_for(lambda: any(e["status"] == 429 for e in shop.request_log()), 60)
        shop.set_faults(rate_limit_429=0.0)
        assert [n.wait() for n in nodes] == [0]
    finally:
        stop_all(nodes)
    log = shop.request_log()
    first = next(i for i, e in enumerate(log) if e["status"] == 429)
    after = log[first + 1 :]
    assert after, "the crawl went on after the 429"
    assert after[0]["t"] >= log[first]["t"] + hold, (log[first], after[:3])
    assert "/" + PROBE in paths(after)  # the middleware's own download came, after the hold
    assert_each_product_once(mongo_uri, shop)
    logs = nodes[0].log()
    assert "answered 429/503: its shared rate is cut for every node" in logs
    if retry_after == "259200":
        assert "asked to wait 259200s (Retry-After): capped at RETRY_AFTER_MAX" in logs
        assert stats_of(logs)["retry/retry_after_capped"] >= 1
    assert_clean_log(logs)


def test_retry_after_zero_keeps_the_backoff_and_the_cut(
    r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=12, page_size=4, latency_ms=50)
    base = 1.0
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id="zero",
            settings={"CONCURRENT_REQUESTS": 1, "RETRY_BACKOFF_BASE": base},
        )
    ]
    try:
        r.lpush("catalog:start_urls", shop.url)
        assert wait_for(lambda: len(shop.request_log()) >= 4, 60)
        shop.set_faults(rate_limit_429=1.0, retry_after=0)
        assert wait_for(lambda: any(e["status"] == 429 for e in shop.request_log()), 60)
        shop.set_faults(rate_limit_429=0.0)
        assert [n.wait() for n in nodes] == [0]
    finally:
        stop_all(nodes)
    log = shop.request_log()
    first = next(i for i, e in enumerate(log) if e["status"] == 429)
    again = next(e for e in log[first + 1 :] if e["path"] == log[first]["path"])
    # Retry-After: 0 asks for no wait; the backoff still waits (and the site was cut)
    assert again["t"] >= log[first]["t"] + base
    logs = nodes[0].log()
    assert "answered 429/503: its shared rate is cut for every node" in logs
    assert stats_of(logs).get("frontier/site_holds/retry_after", 0) == 0
    assert_each_product_once(mongo_uri, shop)


# -- a site that hangs ------------------------------------------------------------------------


def test_a_hanging_site_keeps_a_quarter_of_a_nodes_slots_and_its_timeouts_cut_its_rate(
    r, redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    """One node with 8 slots, a shop and four URLs of a site whose pages never answer: the
    hanging site gets 2 slots (a quarter: it never flows), the shop is crawled whole meanwhile,
    and the hanging site's timeouts cut its shared rate."""
    shop = shop_factory(products=30, page_size=10)
    stall = shop_factory(products=10, host="127.0.0.3", hang=True)
    settings = {"CONCURRENT_REQUESTS": 8, "DOWNLOAD_TIMEOUT": 20, "RETRY_TIMES": 0}
    env = {"DISTCRAWL_ALLOW_PRIVATE": "127.0.0.1,127.0.0.3"}
    nodes = start_nodes(redis_url, mongo_uri, tmp_path, settings, n=1, env=env)
    try:
        r.lpush("catalog:start_urls", shop.url, *(f"{stall.url}p/{i}.html" for i in range(4)))
        want = {urlsplit(u).path for u in shop.expected_product_urls()}

        def shop_done() -> bool:
            return want <= {e["path"] for e in shop.request_log() if e["status"] == 200}

        assert wait_for(shop_done, 120)
        hanging = [e for e in stall.request_log() if e["path"] != "/robots.txt"]
        # the shop's 30 products went while the hanging site held no more than its bound
        assert len(hanging) == 2, hanging
        site_key = site_shard("127.0.0.3").site("127.0.0.3")
        assert wait_for(lambda: float(r.hget(site_key, "factor") or 1) < 1, 120)
        assert r.hget(site_key, "cut_why") == b"slow"
        assert [n.wait() for n in nodes] == [0]
    finally:
        stop_all(nodes)
    assert {urlsplit(u).path for u in stored_urls(mongo_uri)} >= want
    assert {d["reason"] for d in dead_records(r)} == {"DownloadTimeoutError"}
    logs = nodes[0].log()
    assert "Site 127.0.0.3 answered slowly: its shared rate is cut for every node" in logs
