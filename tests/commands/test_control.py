"""``control`` through the ``distcrawl`` entry point against a real Redis: pause, resume, and a
reset that needs its flag and keeps what live nodes hold."""

from __future__ import annotations

import json

from crawl_writes import queue_raw
from frontier_state import queued

from distcrawl.frontier.store import FrontierKeys, FrontierStore

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


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
    queue_raw(r, s0, 0, "9")
    r.zadd(s0.delayed, {"8": 1.0})
    r.hset(s0.requests, mapping={"9": "q", "8": "d"})
    r.sadd(s0.dupefilter, "7")
    r.hset(s0.dead, "x", "{}")
    r.lpush(KEYS.start_urls, "https://s.test/")
    r.set(s0.seq, 9)
    store.heartbeat("live", "{}")
    r.hset(s0.held("live"), "1", "1\t1\tleased-live")  # a lease keeps its value in its line
    r.zadd(KEYS.nodes, {"dead": 1000})
    r.hset(s0.held("dead"), "2", "2\t2\tleased-dead")
    r.set(KEYS.paused, "1")

    assert cli("control", "catalog", "reset")[0] == 2
    assert queued(r, KEYS) == 1

    code, out, _ = cli("control", "catalog", "reset", "--yes-really")
    assert code == 0, out
    assert "kept 1 leases of 1 live node(s)" in out and "still paused" in out
    left = sorted(k.decode() for k in r.keys("*"))
    status = s0.status  # the status registry: the live node's kept lease
    kept = {s0.held("live"), KEYS.nodes, KEYS.paused, s0.seq, status}
    assert left == sorted(kept)
    assert r.hgetall(status) == {b"leases:live": b"1"}
    assert r.hgetall(s0.held("live")) == {b"1": b"1\t1\tleased-live"}
    assert r.zrange(KEYS.nodes, 0, -1) == [b"live"]

    code, _, _ = cli("control", "catalog", "reset", "--yes-really", "--force")
    assert code == 0
    assert sorted(k.decode() for k in r.keys("*")) == sorted({KEYS.paused, s0.seq})


def test_reset_without_its_flag_lists_what_it_would_delete(cli, r) -> None:
    queue_raw(r, KEYS.shard(0), 0, "9")
    # two URLs seen, as the dupefilter records them (its bucket, and its count)
    r.sadd(KEYS.shard(0).dupefilter, "1", "2")
    r.hset(KEYS.shard(0).seen_info, mapping={"L": 0, "split": 0, "n": 2})
    r.lpush(KEYS.start_urls, "https://s.test/")
    code, _, err = cli("control", "catalog", "reset")
    assert code == 2
    assert "queued 1" in err and "seen 2" in err and "seeds 1" in err
    assert "Nothing was deleted" in err and "--yes-really" in err
    code, out, _ = cli("control", "catalog", "reset", "--json")
    assert code == 2 and json.loads(out)["would_delete"]["seen"] == 2
    assert queued(r, KEYS) == 1 and r.scard(KEYS.shard(0).dupefilter) == 2
