"""``distcrawl demo``: it never deletes a crawl it was not told to, and its summary tells stored,
dead-lettered and lost products apart."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pymongo
import pytest
import redis
from crawl_nodes import wait_for

from distcrawl.cli import main
from distcrawl.demo.checks import account_dead_letters
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.servers.embedded import (
    ensure_mongo,
    ensure_redis,
    services_status,
    stop_services,
)

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


def child(url: str) -> Child:
    fingerprint = hashlib.sha1(url.encode()).digest()
    return Child(fingerprint, 0, False, 0, "shop.test", json.dumps({"u": url}))


def test_demo_on_a_home_that_holds_a_crawl_refuses_and_deletes_nothing(tmp_path, capsys) -> None:
    home = tmp_path / "home"
    try:
        r = redis.Redis.from_url(ensure_redis(home))
        mongo: pymongo.MongoClient[Any] = pymongo.MongoClient(ensure_mongo(home))
        products = mongo.get_default_database("catalog")["products"]
        products.insert_one({"_id": "http://shop.test/p/1", "url": "http://shop.test/p/1"})
        store = FrontierStore(r, KEYS)
        store.sync("old", children=[child("http://shop.test/p/2"), child("http://shop.test/p/3")])

        assert main(["demo", "--products", "5", "--home", str(home)]) == 2
        err = capsys.readouterr().err
        assert f"{home} holds a crawl" in err
        assert "1 products in catalog.products" in err and "seen URLs 2" in err
        assert "--replace" in err
        assert products.count_documents({}) == 1 and store.seen() == 2
        mongo.close()
        r.close()
    finally:
        stop_services(home)


def test_missing_products_are_told_apart_dead_lettered_behind_a_dead_letter_or_lost() -> None:
    expected = {f"http://s.test/p/{i}" for i in range(5)}
    dead = [json.dumps({"url": "http://s.test/p/1?ref=x", "reason": "http_503"})]
    missing = {"http://s.test/p/1", "http://s.test/p/2"}
    out = account_dead_letters(missing, dead, expected)
    assert out == {
        "dead_letters": 1,
        "dead_letter_reasons": {"http_503": 1},
        "dead_lettered": 1,
        "behind_dead_letters": 0,
        "lost": 1,  # p/2: no dead letter explains it
    }
    dead.append(json.dumps({"url": "http://s.test/list/2", "reason": "http_503"}))
    out = account_dead_letters(missing, dead, expected)
    assert (out["dead_lettered"], out["behind_dead_letters"], out["lost"]) == (1, 1, 0)


@pytest.mark.slow
def test_demo_with_random_errors_exits_0_and_reports_its_dead_letters_as_such(tmp_path) -> None:
    # one retry only, so that a 30 % error rate surely dead-letters some products
    done = subprocess.run(
        [
            sys.executable, "-m", "distcrawl.cli", "demo", "--products", "100",
            "--error-rate", "0.3", "--json", "--home", str(tmp_path / "home"),
            "-s", "RETRY_TIMES=1", "-s", "RETRY_BACKOFF_BASE=0.2",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")},
        timeout=600,
    )  # fmt: skip
    try:
        summary = json.loads(done.stdout)
        assert done.returncode == 0, (summary, done.stderr[-2000:])
        assert summary["dead_letters"] > 0
        assert set(summary["dead_letter_reasons"]) == {"http_503"}
        assert summary["lost"] == 0 and summary["duplicates"] == 0
        assert summary["missing"] == summary["dead_lettered"] + summary["behind_dead_letters"]
        assert summary["stored"] + summary["missing"] == summary["expected"] == 100
    finally:
        stop_services(tmp_path / "home")


def _demo(home: Any, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "demo", "--json", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "MONGO_URI", "DISTCRAWL_SHARDS")
        },
        timeout=600,
    )
    assert done.stdout, done.stderr[-2000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 0, (summary, done.stderr[-2000:])
    return summary


def _every_product_once(summary: dict[str, Any], expected: int) -> None:
    assert summary["expected"] == expected
    assert summary["stored"] == summary["documents"] == expected, summary
    assert summary["lost"] == summary["duplicates"] == summary["fields_wrong"] == 0, summary
    assert summary["nodes_failed"] == 0
    assert set(summary["frontier_left"].values()) == {0}


@pytest.mark.slow
def test_demo_with_shards_stores_every_product_once_in_those_shards(tmp_path) -> None:
    home = tmp_path / "home"
    try:
        summary = _demo(home, "--shards", "5", "--sites", "3", "--products", "120")
        _every_product_once(summary, 3 * 120)
        assert summary["shards"] == 5 and summary["sites"] == 3
        # the nodes used the demo's 5 shards: every key of the crawl is in one of them
        keys = FrontierKeys("catalog", "catalog:start_urls", shards=5)
        tags = {s.prefix for s in keys.all_shards()} | {keys.prefix}
        r = redis.Redis.from_url(ensure_redis(home))
        names = [key.decode() for key in r.scan_iter(count=1000)]
        found = {n[: n.index("}") + 1] if n.startswith("{") else n for n in names}
        r.close()
        assert found and found <= tags, found - tags
        used = [p for p in found if p != keys.prefix]
        assert len(used) == summary["shards_used"] >= 2  # three sites over five shards
    finally:
        stop_services(home)


@pytest.mark.slow
def test_demo_on_a_3_master_cluster_stores_every_product_once(tmp_path) -> None:
    home = tmp_path / "home"
    try:
        summary = _demo(home, "--redis-cluster", "3", "--sites", "4", "--products", "100")
        _every_product_once(summary, 4 * 100)
        # seeded through the documented list, as `redis-cli -c lpush` reaches it on a cluster
        assert summary["seed_list"] == "catalog:start_urls"
        assert summary["shards"] == 16
        # four sites in four shards here, on more than one master (the tags spread the
        # shards over the masters)
        assert summary["shards_used"] >= 2 and summary["masters_used"] >= 2, summary
        # the cluster is stopped with the demo; the home's MongoDB keeps running, and says so
        assert list(summary["services_running"]) == ["mongo"]
    finally:
        stop_services(home)


@pytest.mark.slow
def test_demo_without_a_home_leaves_no_folder_behind(tmp_path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")}
    done = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "demo", "--json", "--products", "40"],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(scratch)},
        timeout=600,
    )
    assert done.stdout, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert done.returncode == 0, (summary, done.stderr[-2000:])
    _every_product_once(summary, 40)
    # its embedded servers stopped, its temporary home (their data, the node logs) deleted:
    # the summary names none of it
    assert summary["home_kept"] is None and summary["node_logs"] == []
    assert summary["services_running"] == {}
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
def test_demo_with_a_home_says_which_servers_keep_running_and_how_to_stop_them(tmp_path) -> None:
    home = tmp_path / "home"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "distcrawl.cli", "demo", "--products", "20", "--home",
             str(home)],
            capture_output=True, text=True, timeout=600,
            env={k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        line = done.stdout.strip().splitlines()[-1]
        assert line.startswith("redis (redis://127.0.0.1:") and "and mongo (mongodb://" in line
        assert line.endswith(f"of {home} keep running: `distcrawl services stop --home {home}` "
                             "stops them")  # fmt: skip
        stopped = subprocess.run(
            [sys.executable, "-m", "distcrawl.cli", "services", "stop", "--home", str(home)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert stopped.returncode == 0 and "redis, mongo" in stopped.stdout, stopped
    finally:
        stop_services(home)


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_demo_interrupted_names_the_folder_it_leaves(tmp_path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")}
    err = tmp_path / "demo.err"
    with err.open("w") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "distcrawl.cli", "demo", "--products", "2000",
             "--latency", "50"],
            stdout=subprocess.DEVNULL, stderr=sink, env={**env, "TMPDIR": str(scratch)},
            # Ctrl-C reaches a program in a terminal's foreground; a test run in a script's
            # background (`pytest &`) hands SIGINT down ignored, and a program started so
            # rightly keeps ignoring it
            preexec_fn=_sigint_as_in_a_terminal,
        )  # fmt: skip
        try:
            # the nodes are crawling: their logs are in the demo's temporary folder
            assert wait_for(lambda: list(scratch.glob("distcrawl-demo-*/node-1.log")), 180)
            demo.send_signal(signal.SIGINT)  # Ctrl-C
            assert demo.wait(timeout=180) == 130
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    (folder,) = scratch.iterdir()
    text = err.read_text()
    assert f"the demo leaves its node logs and server data in {folder} (" in text, text
    assert f"`rm -r {folder}` deletes them" in text
    assert (folder / "node-1.log").exists()
    # its servers were stopped all the same
    assert not any(info["running"] for info in services_status(folder).values())
