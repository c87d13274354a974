"""The operator commands (status, seed, control, deadletters) through both entry points, against a
real Redis; and ``status --json`` against a real two-node crawl (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
from scrapy import Request

from distcrawl.cli import main
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.requests import codec

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def r(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def cli(redis_url, capsys):
    """``cli("status", "catalog", "--json") -> (exit status, stdout, stderr)``, in process."""

    def call(*argv: str, allow: str = "") -> tuple[int, str, str]:
        settings = ["-s", f"REDIS_URL={redis_url}", "-s", f"DISTCRAWL_ALLOW_PRIVATE={allow}"]
        code = main([*argv, *settings])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def scrapy(redis_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``scrapy`` entry point, as an operator runs it on a node."""
    env = {**os.environ, "REDIS_URL": redis_url, "SCRAPY_SETTINGS_MODULE": "distcrawl.settings"}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )


# --------------------------------------------------------------------------- seed


def test_seed_pushes_accepted_seeds_in_order_and_names_each_refusal(cli, r) -> None:
    code, out, err = cli(
        "seed", "catalog", "https://shop.test/a", "ftp://x.test/", "not a url",
        "http://127.0.0.1:8000/", "https://shop.test/b",
    )  # fmt: skip
    assert code == 1
    assert "queued 2 seed(s) to catalog:start_urls; 3 refused" in out
    assert "refused 'ftp://x.test/': bad_scheme" in err
    assert "refused 'not a url'" in err
    assert "refused 'http://127.0.0.1:8000/': private_address" in err
    # nodes take seeds from the right-hand end: the first given is the first taken
    assert r.rpop(KEYS.start_urls) == b"https://shop.test/a"
    assert r.rpop(KEYS.start_urls) == b"https://shop.test/b"


def test_seed_priority_and_meta_make_json_seeds_and_private_hosts_follow_the_setting(
    cli, r, tmp_path
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        '# campaign\nhttp://127.0.0.1:8000/\n\n{"url": "https://s.test/", "priority": 7}\n'
    )
    code, out, _ = cli(
        "seed", "catalog", "--file", str(seeds), "--priority", "5000", "--meta", '{"c": "x"}',
        "--json", allow="127.0.0.1",
    )  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["queued"] == 2
    pushed = [json.loads(x) for x in reversed(r.lrange(KEYS.start_urls, 0, -1))]
    assert pushed == [
        {"url": "http://127.0.0.1:8000/", "priority": 5000, "meta": {"c": "x"}},
        {"url": "https://s.test/", "priority": 7, "meta": {"c": "x"}},  # its own priority wins
    ]


def test_seed_usage_errors_push_nothing(cli, r) -> None:
    assert cli("seed", "catalog", "https://s.test/", "--meta", "[1]")[0] == 2
    assert cli("seed", "catalog")[0] == 2
    assert cli("seed", "catalog", "https://s.test/", "--dry-run")[0] == 0
    assert r.llen(KEYS.start_urls) == 0


def test_scrapy_seed_and_status_entry_points(redis_url, r) -> None:
    done = scrapy(redis_url, "seed", "catalog", "--priority", "9", "https://shop.test/", "x:y")
    assert done.returncode == 1, done.stderr
    assert "refused 'x:y'" in done.stderr
    assert json.loads(r.lindex(KEYS.start_urls, 0)) == {"url": "https://shop.test/", "priority": 9}
    done = scrapy(redis_url, "status", "catalog", "--json", "--sample", "0", "--no-store")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["frontier"]["start_list"] == 1
    listing = scrapy(redis_url, "-h")
    for command in ("status", "seed", "control", "deadletters"):
        assert command in listing.stdout


# --------------------------------------------------------------------------- status


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


# --------------------------------------------------------------------------- control


def test_pause_and_resume(cli, r) -> None:
    assert cli("control", "catalog", "pause")[0] == 0
    assert json.loads(r.get(KEYS.paused))["by"]
    out = cli("status", "catalog", "--json", "--sample", "0", "--no-store")[1]
    assert json.loads(out)["paused"] is True
    assert cli("control", "catalog", "resume")[0] == 0
    assert not r.exists(KEYS.paused)


def test_reset_needs_confirmation_and_keeps_what_live_nodes_hold(cli, r) -> None:
    store = FrontierStore(r, KEYS)
    s0 = KEYS.shard(0)  # requests of no site live in the first shard
    for key, value in ((s0.queue, {"9": -1.0}), (s0.delayed, {"8": 1.0})):
        r.zadd(key, value)
    r.hset(s0.requests, mapping={"9": "q", "8": "d", "1": "leased-live", "2": "leased-dead"})
    r.sadd(s0.dupefilter, "7")
    r.hset(s0.dead, "x", "{}")
    r.lpush(KEYS.start_urls, "https://s.test/")
    r.set(s0.seq, 9)
    store.heartbeat("live", "{}")
    r.zadd(s0.leases("live"), {"1": 1.0})
    r.zadd(KEYS.nodes, {"dead": 1000})
    r.zadd(s0.leases("dead"), {"2": 2.0})
    r.set(KEYS.paused, "1")

    assert cli("control", "catalog", "reset")[0] == 2
    assert r.zcard(s0.queue) == 1

    code, out, _ = cli("control", "catalog", "reset", "--yes-really")
    assert code == 0, out
    assert "kept 1 leases of 1 live node(s)" in out and "still paused" in out
    left = sorted(k.decode() for k in r.keys("*"))
    status = f"{s0.prefix}:status"  # the status registry: the live node's kept lease
    kept = {s0.requests, s0.leases("live"), KEYS.nodes, KEYS.paused, s0.seq, status}
    assert left == sorted(kept)
    assert r.hgetall(status) == {b"leases:live": b"1"}
    assert r.hgetall(s0.requests) == {b"1": b"leased-live"}
    assert r.zrange(KEYS.nodes, 0, -1) == [b"live"]

    code, _, _ = cli("control", "catalog", "reset", "--yes-really", "--force")
    assert code == 0
    assert sorted(k.decode() for k in r.keys("*")) == sorted({KEYS.paused, s0.seq})


# --------------------------------------------------------------------------- dead letters


def dead_letter(r: redis.Redis, dead_id: str, url: str, reason: str, priority: int = 100) -> None:
    record = {
        "request": codec.encode(Request(url, priority=priority, dont_filter=True), None),
        "url": url,
        "priority": priority,
        "reason": reason,
        "node": "n1",
        "at": time.time(),
        "attempts": 4,
        "first_attempt": time.time() - 10,
        "last_attempt": time.time(),
        "status": 503,
    }
    r.hset(KEYS.shard(0).dead, dead_id, json.dumps(record))


@pytest.fixture
def letters(r):
    dead_letter(r, "a1", "http://a.test/p/1", "http_503")
    dead_letter(r, "a2", "http://a.test/p/2", "twisted.internet.error.TimeoutError")
    dead_letter(r, "b1", "http://b.test/p/1", "http_503")
    return r


def test_deadletters_list_and_count(cli, letters) -> None:
    code, out, _ = cli("deadletters", "catalog", "count", "--json")
    assert json.loads(out) == {
        "total": 3,
        "by_reason": {"http_503": 2, "twisted.internet.error.TimeoutError": 1},
        "by_site": {"a.test": 2, "b.test": 1},
    }
    code, out, _ = cli("deadletters", "catalog", "list", "--site", "A.test", "--json")
    listed = json.loads(out)
    assert listed["total"] == 2
    assert {d["id"] for d in listed["dead_letters"]} == {"a1", "a2"}
    assert "request" not in listed["dead_letters"][0]
    code, out, _ = cli("deadletters", "catalog", "list")
    assert code == 0 and "http://b.test/p/1" in out and "3 of 3" in out


def test_deadletters_requeue_filtered_moves_them_back_to_the_queue(cli, letters) -> None:
    code, out, _ = cli(
        "deadletters", "catalog", "requeue", "--reason", "http_503", "--site", "a.test"
    )
    assert (code, out.strip()) == (0, "re-queued 1 of 1 matching dead letters")
    assert sorted(letters.hkeys(KEYS.shard(0).dead)) == [b"a2", b"b1"]
    [(rid, score)] = letters.zrange(KEYS.shard(0).queue, 0, -1, withscores=True)
    assert codec.decode(letters.hget(KEYS.shard(0).requests, rid)).url == "http://a.test/p/1"
    assert -score // 1e10 + 1 == 100  # its priority came back with it
    assert (
        cli("deadletters", "catalog", "requeue")[1].strip()
        == "re-queued 2 of 2 matching dead letters"
    )
    assert letters.hlen(KEYS.shard(0).dead) == 0 and letters.zcard(KEYS.shard(0).queue) == 3


def test_deadletters_purge_needs_confirmation(cli, letters) -> None:
    assert cli("deadletters", "catalog", "purge")[0] == 2
    code, out, _ = cli("deadletters", "catalog", "purge", "--reason", "http_503", "--yes-really")
    assert (code, out.strip()) == (0, "purged 2 of 2 matching dead letters")
    assert letters.hkeys(KEYS.shard(0).dead) == [b"a2"]


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
    # the held hashes (rid -> its line), and the leases sets older versions wrote
    leases = {k.decode(): sorted(r.hkeys(k)) for k in r.scan_iter(f"{keys.prefix}:held:*")}
    for k in r.scan_iter(f"{keys.prefix}:leases:*"):
        leases.setdefault(k.decode().replace(":leases:", ":held:"), []).extend(r.zrange(k, 0, -1))
    waiting = sum(r.zcard(k) for k in r.scan_iter(f"{keys.prefix}:wait:*"))
    queued = r.zcard(keys.queue) + waiting
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
        assert all(n["pages_per_min"] > 0 for n in live.values()), live
        assert status["totals"]["products_per_min"] > 0

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
        assert status["store"]["products"] == stored
        assert sum(per_node[n]["products"] for n in ("s1", "s2")) <= stored
        buckets = r.keys(ONE_SHARD.shard(0).prefix + ":seen:[0-9]*")  # every bucket
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
    assert final["drained"] and final["store"]["products"] == len(urls)
    assert "Cluster: " in nodes[0].log() and "products/min" in nodes[0].log()
    assert "Cluster: PAUSED" in nodes[0].log()


# --------------------------------------------------------------------------- no server started


def distcrawl_in(cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``distcrawl ARGV`` run from *cwd*, with no REDIS_URL / DISTCRAWL_HOME unless given."""
    clean = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DISTCRAWL_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **env},
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("status", "catalog"),
        ("seed", "catalog", "https://shop.test/"),
        ("deadletters", "catalog", "count"),
        ("control", "catalog", "pause"),
    ],
)
def test_operator_commands_from_an_empty_directory_fail_with_the_home_they_looked_in(
    tmp_path, argv
) -> None:
    done = distcrawl_in(tmp_path, *argv)
    assert done.returncode == 1, done.stdout
    home = tmp_path / ".distcrawl"
    assert f"no embedded Redis runs under {home}" in done.stderr
    assert "REDIS_URL" in done.stderr and "Traceback" not in done.stderr
    assert not home.exists()  # nothing was started, not even a folder made


def test_operator_commands_use_the_running_embedded_redis_of_distcrawl_home(tmp_path) -> None:
    home = tmp_path / "home"
    try:
        from distcrawl.servers.embedded import ensure_redis

        url = ensure_redis(home)
        redis.Redis.from_url(url).lpush(KEYS.start_urls, "https://shop.test/")
        done = distcrawl_in(
            tmp_path, "status", "catalog", "--json", "--sample", "0", "--no-store",
            DISTCRAWL_HOME=str(home),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["frontier"]["start_list"] == 1
        assert "warning" not in done.stderr
    finally:
        from distcrawl.servers.embedded import stop_services

        stop_services(home)


def test_a_spider_name_with_no_keys_is_a_warning(cli, r) -> None:
    code, _, err = cli("status", "nosuchspider", "--json", "--sample", "0", "--no-store")
    assert code == 0
    assert "warning:" in err and "no crawl 'nosuchspider'" in err
    r.lpush(KEYS.start_urls, "https://shop.test/")
    code, _, err = cli("status", "catalog", "--json", "--sample", "0", "--no-store")
    assert code == 0 and "warning" not in err


def test_reset_without_its_flag_lists_what_it_would_delete(cli, r) -> None:
    r.zadd(KEYS.shard(0).queue, {"9": -1.0})
    r.sadd(KEYS.shard(0).dupefilter, "a", "b")
    r.lpush(KEYS.start_urls, "https://s.test/")
    code, _, err = cli("control", "catalog", "reset")
    assert code == 2
    assert "queued 1" in err and "seen 2" in err and "seeds 1" in err
    assert "Nothing was deleted" in err and "--yes-really" in err
    code, out, _ = cli("control", "catalog", "reset", "--json")
    assert code == 2 and json.loads(out)["would_delete"]["seen"] == 2
    assert r.zcard(KEYS.shard(0).queue) == 1 and r.scard(KEYS.shard(0).dupefilter) == 2


def test_deadletters_refused_lists_the_refused_entries_newest_first(cli, r) -> None:
    for n, reason in enumerate(("bad_scheme", "private_address")):
        entry = {"kind": "seed", "raw": f"seed-{n}", "reason": reason, "node": "n1", "at": n}
        r.lpush(KEYS.rejected, json.dumps(entry))
    code, out, _ = cli("deadletters", "catalog", "refused", "--json")
    assert code == 0
    listed = json.loads(out)
    assert listed["total"] == 2
    assert [e["reason"] for e in listed["refused"]] == ["private_address", "bad_scheme"]
    code, out, _ = cli("deadletters", "catalog", "refused", "--limit", "1")
    assert code == 0 and "private_address" in out and "bad_scheme" not in out
    assert "1 of 2 refused entries shown" in out


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
    from rich.console import Console

    from distcrawl.commands.status import render
    from distcrawl.ops.status import build_status, read_snapshot

    FrontierStore(r, KEYS).heartbeat("demo-node-with-a-long-name-1", "{}")
    status = build_status(read_snapshot(r, KEYS), heartbeat_timeout=30)
    for width in (60, 80, 200):
        console = Console(width=width, record=True)
        console.print(render(status, width))
        text = console.export_text()
        assert "demo-node-with-a-long-name-1" in text and "…" not in text.split("Nodes")[1]
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width
