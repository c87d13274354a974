"""``status`` through both entry points against a real Redis: the screen and JSON, the password
never shown, ``--watch`` into a pipe, narrow screens; and ``status --json`` following a real
three-node crawl through a dead node, a pause and a resume (slow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
import redis
from crawl_nodes import (
    HEARTBEAT_TIMEOUT,
    Node,
    assert_each_product_once,
    stop_all,
    stored_urls,
    wait_for,
)
from crawl_writes import beat
from rich.console import Console

from distcrawl.cli import main
from distcrawl.commands.status import render
from distcrawl.frontier.protocol.spec import queued_in
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.ops.snapshot import read_snapshot
from distcrawl.ops.status import build_status

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_status_screen_and_json_mask_the_password(cli, r, redis_url) -> None:
    FrontierStore(r, KEYS).heartbeat("n1", json.dumps({"stats": {"item_scraped_count": 3}}))
    code, out, _ = cli("status", "catalog", "--sample", "0", "--no-store")
    assert code == 0
    assert "n1" in out and "live" in out and "Frontier" in out
    url = redis_url.replace("redis://", "redis://user:s3cret@")
    code = main(
        ["status", "catalog", "--json", "--sample", "0", "--no-store", "-s", f"REDIS_URL={url}"]
    )
    assert code == 1  # the server has no such user; the error names the server, masked


def test_status_error_never_shows_the_password(capsys) -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0"
    assert main(["status", "catalog", "--sample", "0", "--no-store", "-s", f"REDIS_URL={url}"]) == 1
    _, err = capsys.readouterr()
    assert "s3cret" not in err and "user:***@127.0.0.1:1" in err


def test_status_without_a_spider_is_the_projects_only_spider(cli, r) -> None:
    FrontierStore(r, KEYS).heartbeat("n1", json.dumps({"stats": {}}))
    code, out, err = cli("status", "--json", "--sample", "0", "--no-store")
    assert code == 0, err
    assert json.loads(out)["crawl"] == "catalog" and "warning" not in err


def test_status_without_a_spider_in_a_project_of_several_names_them(redis_url) -> None:
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SCRAPY_SETTINGS_MODULE="redis_example_settings",
        PYTHONPATH=os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])),
    )
    done = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "status", "--json", "--no-store"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout
    named = re.fullmatch(r"error: name the spider: the project has (\d+) \((.+)\)\n", done.stderr)
    assert named, done.stderr
    spiders = named[2].split(", ")
    assert int(named[1]) == len(spiders) > 1 and "myspider_redis" in spiders


# --------------------------------------------------------------------------- a real crawl

#: the progress line every second, and a node that exposes nothing (as settings.py has it)
PROGRESS = {
    "EXTENSIONS": json.dumps(
        {
            "scrapy.extensions.remote_control.RemoteControl": None,
            "distcrawl.ops.progress.ClusterProgress": 500,
        }
    ),
    "DISTCRAWL_PROGRESS_INTERVAL": "1",
}
#: slow enough that the crawl is still running while the test looks at it
SLOW_NODE = {"CONCURRENT_REQUESTS": 2, "DISTCRAWL_HEARTBEAT_TIMEOUT": HEARTBEAT_TIMEOUT, **PROGRESS}


def status_of(redis_url: str, mongo_uri: str, capsys, *, sample: str = "0") -> dict:
    code = main(
        [
            *("status", "catalog", "--json", "--sample", sample),
            *("-s", f"REDIS_URL={redis_url}", "-s", f"MONGO_URI={mongo_uri}"),
            *("-s", f"DISTCRAWL_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT}", "-s", "DISTCRAWL_SHARDS=1"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


#: the status reads a one-slot layout until it reads every shard
ONE_SHARD = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=1)
ONE_SHARD_ARGS = ("-s", "DISTCRAWL_SHARDS=1")


def frontier_state(r: redis.Redis) -> dict:
    keys = ONE_SHARD
    # the held hashes (rid -> its line)
    leases = {k.decode(): sorted(r.hkeys(k)) for k in r.scan_iter(keys.held("*"))}
    waiting = sum(r.zcard(k) for k in r.scan_iter(keys.shard(0).wait("*")))
    queued = queued_in(r.zrange(keys.levels, 0, -1, withscores=True)) + waiting
    return {"queue": queued, "leases": leases, "parked": r.zcard(keys.delayed)}


@pytest.mark.slow
def test_status_follows_a_real_crawl_through_a_dead_node_a_pause_and_a_resume(
    redis_url, mongo_uri, shop_factory, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("DISTCRAWL_SHARDS", "1")  # nodes and status: see ONE_SHARD
    # long enough that work is still queued once the killed node has been recovered (the
    # heartbeat timeout and a recovery sweep later): at most ~10 pages/s on two live nodes
    shop = shop_factory(products=600, latency_ms=400)
    r = redis.Redis.from_url(redis_url)
    r.lpush(KEYS.start_urls, shop.url)
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"s{i}",
            settings=SLOW_NODE,
        )
        for i in (1, 2, 3)
    ]
    try:
        assert wait_for(lambda: len(stored_urls(mongo_uri)) >= 15, 60)
        # rates: the one-shot status waits for a second heartbeat of every node
        status = status_of(redis_url, mongo_uri, capsys, sample="5")
        live = {n["node"]: n for n in status["nodes"] if n["state"] == "live"}
        assert set(live) == {"s1", "s2", "s3"}
        assert all(n["responses_per_min"] > 0 for n in live.values()), live
        assert status["totals"]["products_per_min"] > 0
        # one site: its pages/min is the nodes' pages/min, both over the nodes' same window
        # (each figure rounded to 0.1 by the node that publishes it)
        (site,) = [s for s in status["sites"] if s["site"] == urlsplit(shop.url).hostname]
        total = status["totals"]["responses_per_min"]
        assert abs(site["responses_per_min"] - total) <= 0.1 * len(live)

        nodes[2].kill()  # kill -9: no goodbye, its leases wait for the heartbeat timeout

        def s3_recovered() -> bool:
            nodes_now = {n["node"]: n for n in status_of(redis_url, mongo_uri, capsys)["nodes"]}
            s3 = nodes_now.get("s3", {})
            return s3.get("state") == "dead" and bool(s3.get("recovered"))

        # a live node declares it dead and takes its leases back: wait for that, however
        # long a loaded machine takes
        assert wait_for(s3_recovered, 6 * HEARTBEAT_TIMEOUT, 0.5)

        # the shard count the nodes run with (the crawl refuses a command that computes
        # another): the environment was read when this process imported the settings
        assert (
            main(["control", "catalog", "pause", *ONE_SHARD_ARGS, "-s", f"REDIS_URL={redis_url}"])
            == 0
        )
        capsys.readouterr()

        # the nodes finish what they started; then nothing moves
        def settled() -> bool:
            before = (len(shop.request_log()), frontier_state(r))
            time.sleep(1.5)
            return before == (len(shop.request_log()), frontier_state(r))

        assert wait_for(settled, 30)
        held = frontier_state(r)
        status = status_of(redis_url, mongo_uri, capsys)
        stored = len(stored_urls(mongo_uri))
        assert status["paused"] is True
        assert status["frontier"]["queued"] == held["queue"] > 0
        assert status["frontier"]["parked"] == held["parked"]
        assert status["frontier"]["in_flight"] == sum(len(v) for v in held["leases"].values())
        per_node = {n["node"]: n for n in status["nodes"]}
        for node, rids in held["leases"].items():
            assert per_node[node.rsplit(":", 1)[1]]["in_flight"] == len(rids)
        assert {n for n, v in per_node.items() if v["state"] == "live"} == {"s1", "s2"}
        assert per_node["s3"]["state"] == "dead" and per_node["s3"]["recovered"]
        assert status["store"]["in_collection"] == status["store"]["this_crawl"] == stored
        assert sum(per_node[n]["products"] for n in ("s1", "s2")) <= stored
        buckets = r.keys(ONE_SHARD.shard(0).seen_bucket("[0-9]*"))  # every bucket
        assert status["frontier"]["seen"] == sum(r.scard(b) for b in buckets)

        requests_seen = len(shop.request_log())
        time.sleep(3)  # paused: no new leases, none lost, nothing fetched
        assert frontier_state(r) == held
        assert len(shop.request_log()) == requests_seen
        assert len(stored_urls(mongo_uri)) == stored

        assert (
            main(["control", "catalog", "resume", *ONE_SHARD_ARGS, "-s", f"REDIS_URL={redis_url}"])
            == 0
        )
        capsys.readouterr()
        assert [n.wait() for n in nodes[:2]] == [0, 0]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert_each_product_once(mongo_uri, shop)  # by SKU: _id (the URL) cannot show it
    assert set(urls) == shop.expected_product_urls()
    final = status_of(redis_url, mongo_uri, capsys)
    assert final["drained"] and final["store"]["this_crawl"] == len(urls)
    assert "Cluster: " in nodes[0].log() and "products/min" in nodes[0].log()
    assert "Cluster: PAUSED" in nodes[0].log()


def test_status_watch_into_a_pipe_prints_one_line_per_interval(redis_url, r) -> None:
    FrontierStore(r, KEYS).heartbeat("n1", "{}")
    r.lpush(KEYS.start_urls, "https://shop.test/")
    proc = subprocess.Popen(
        [sys.executable, "-m", "distcrawl.cli", "status", "catalog", "--watch", "--no-store",
         "--interval", "0.2", "-s", f"REDIS_URL={redis_url}"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for line in lines:
        assert "catalog: queued 0" in line and "nodes 1 live" in line, lines


def test_status_tables_fit_a_narrow_screen_without_cutting_names(r) -> None:
    FrontierStore(r, KEYS).heartbeat("demo-node-with-a-long-name-1", "{}")
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    for width in (60, 80, 200):
        console = Console(width=width, record=True)
        console.print(render(status, width))
        text = console.export_text()
        assert "demo-node-with-a-long-name-1" in text and "…" not in text.split("Nodes")[1]
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width


#: the status reads every shard of a crawl of several
SHARDED = FrontierKeys(spider="catalog", start_urls="catalog:start_urls", shards=4)


def test_status_screen_shows_the_busy_sites(r) -> None:
    store = FrontierStore(r, SHARDED)
    kids = [
        (f"fp{i}", 100, False, 0, "slow.test", json.dumps({"url": f"http://slow.test/{i}"}))
        for i in (1, 2)
    ]
    store.sync("n1", children=kids)
    store.set_site_limits("slow.test", rate=3, concurrency=None)
    store.sync("n1", lease=5)
    status = build_status(read_snapshot(r, SHARDED), heartbeat_timeout=30)
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


def test_a_node_that_left_products_in_its_journal_shows_them_after_it_stopped(r) -> None:
    beat(r, SHARDED, "full", {"item_scraped_count": 9, "pipeline/journal_held": 42})
    beat(r, SHARDED, "clean", {"item_scraped_count": 3, "pipeline/journal_held": 0})
    FrontierStore(r, SHARDED).release("full")  # a clean stop: the last stats stay readable
    status = build_status(read_snapshot(r, SHARDED), heartbeat_timeout=30)
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


def test_the_screen_shows_reasons_and_errors_by_the_names_of_the_json(r) -> None:
    record = {"url": "http://a.test/", "reason": "DownloadConnectionRefusedError"}
    r.hset(KEYS.shard(0).dead, "d1", json.dumps(record))
    stats = {"downloader/exception_type_count/twisted.internet.error.TimeoutError": 2}
    FrontierStore(r, KEYS).heartbeat("n1", json.dumps({"stats": stats}))
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    assert status["dead_letters"]["by_reason"] == {"DownloadConnectionRefusedError": 1}
    assert status["errors"] == {"exception/TimeoutError": 2}
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render(status))
    screen = console.export_text()
    assert "DownloadConnectionRefusedError" in screen and "exception/TimeoutError" in screen


def test_status_shows_crawl_delays_holds_servers_and_politeness_by_the_json_names(r) -> None:
    """A site with a Crawl-delay, a held site, a server of three sites and what the nodes
    counted: the screen says them with the labels of the JSON."""
    store = FrontierStore(r, SHARDED)
    kids = [
        (f"fp{site}{i}", 100, False, 0, site, json.dumps({"url": f"http://{site}/{i}"}))
        for site in ("delayed.test", "held.test")
        for i in (1, 2, 3)
    ]
    store.sync("n1", children=kids)
    store.set_site_robots("delayed.test", delay_ms=2000, source="robots_txt")
    store.set_site_robots("held.test", hold_ms=60_000, why="robots_unavailable")
    store.sync("n1", lease=6)
    store.note_servers([("a.test", "10.0.0.1"), ("b.test", "10.0.0.1"), ("c.test", "10.0.0.1")])
    beat(
        r,
        SHARDED,
        "n1",
        {
            "robotstxt/unavailable": 2,
            "frontier/site_holds/robots_unavailable": 1,
            "robotstxt/set_aside/crawl_delay_over_max": 3,
        },
    )
    status = build_status(read_snapshot(r, SHARDED), heartbeat_timeout=30)
    rows = {row["site"]: row for row in status["sites"]}
    assert rows["delayed.test"]["crawl_delay_s"] == 2.0
    assert rows["delayed.test"]["delay_source"] == "robots_txt"
    assert rows["held.test"]["hold"]["cause"] == "robots_unavailable"
    assert 0 < rows["held.test"]["hold"]["ends_in_s"] <= 60
    assert status["frontier"]["sites_with_crawl_delay"] == 1
    assert status["frontier"]["sites_held"] == 1
    assert status["servers"] == [
        {
            "server": "10.0.0.1",
            "sites": 3,
            "in_flight": 0,
            "some_sites": ["a.test", "b.test", "c.test"],
        }
    ]
    politeness = status["politeness"]
    assert politeness["robots_unavailable"] == 2
    assert politeness["site_holds"] == {"robots_unavailable": 1}
    assert politeness["set_aside"] == {"crawl_delay_over_max": 3}
    status.update(drained=False, redis="redis://***", backlog_per_min=None, eta_seconds=None)
    console = Console(width=160, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render(status))
    screen = console.export_text()
    assert "delay/s" in screen and "Crawl-delay 2s (robots_txt)" in screen
    assert "held (robots_unavailable)" in screen
    assert "sites held" in screen and "sites with a Crawl-delay" in screen
    assert "Servers with more than one site" in screen and "10.0.0.1" in screen
    assert "robots.txt unavailable 2" in screen and "set aside crawl_delay_over_max 3" in screen
