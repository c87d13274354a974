"""One process per node id: a second live process refuses to start; a restart after a death
takes the old process's leases back at once (end to end, then ``claim_node_id`` alone)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import frontier_state
import pytest
import redis
from crawl_nodes import Node, stop_all, stored_urls, wait_for
from frontier_state import KEYS

from distcrawl.commands.crawl import EXIT_REFUSED
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.scheduler.identity import NodeIdInUse, claim_node_id

#: far longer than the test: only the restarted node itself can return the dead one's leases
SETTINGS = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "600", "CONCURRENT_REQUESTS": "4"}


def leased(r: redis.Redis, node: str) -> int:
    return frontier_state.leased(r, node)


def node(redis_url: str, mongo_uri: str, log_dir: Path, node_id: str) -> Node:
    return Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=log_dir,
        node_id=node_id,
        settings=SETTINGS,
    )


@pytest.mark.slow
def test_a_second_live_process_with_the_same_node_id_refuses_to_start(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=150, latency_ms=100)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    first = node(redis_url, mongo_uri, tmp_path, "twin")
    nodes = [first]
    try:
        assert wait_for(lambda: leased(r, "twin") > 0, 120), first.log()[-2000:]
        # paused, the first node stays alive and heart-beating however long the second one
        # takes to start on a loaded machine
        r.set("{catalog}:paused", '{"by": "test"}')
        (tmp_path / "second").mkdir()
        second = node(redis_url, mongo_uri, tmp_path / "second", "twin")
        nodes.append(second)
        assert second.wait(120) == EXIT_REFUSED
        log = second.log()
        assert f"pid {first.proc.pid} on host {socket.gethostname()}" in log, log[-3000:]
        # one clear line, and no traceback: the spider closes with the refusal as its reason
        errors = [line for line in log.splitlines() if " ERROR: " in line]
        assert len(errors) == 1 and "Node refuses to start: node id 'twin' is in use" in errors[0]
        assert "Traceback" not in log and "Spider closed (node_id_in_use)" in log, log[-3000:]
        assert "leased by an earlier run" not in log  # it took nothing
        assert first.proc.poll() is None
        r.delete("{catalog}:paused")
        assert first.wait() == 0
    finally:
        stop_all(nodes)
    # the first one's leases stayed its own: none of its acks came too late
    assert not any(r.hget(s.counters, "stale_acks") for s in KEYS.all_shards())
    assert "no longer holds" not in first.log()
    urls = stored_urls(mongo_uri)
    assert len(urls) == len(set(urls)) and set(urls) == shop.expected_product_urls()


@pytest.mark.slow
def test_a_node_restarted_under_its_id_after_a_kill_takes_its_leases_back_at_once(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shop = shop_factory(products=150, latency_ms=100)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    first = node(redis_url, mongo_uri, tmp_path, "phoenix")
    nodes = [first]
    try:
        assert wait_for(lambda: leased(r, "phoenix") > 0, 120), first.log()[-2000:]
        first.kill()  # its heartbeat is fresh, its leases are out
        (tmp_path / "again").mkdir()
        again = node(redis_url, mongo_uri, tmp_path / "again", "phoenix")
        nodes.append(again)
        assert again.wait() == 0  # with a 600 s timeout, only a reclaim at open can drain
    finally:
        stop_all(nodes)
    assert "leased by an earlier run of node phoenix" in again.log()
    urls = stored_urls(mongo_uri)
    assert len(urls) == len(set(urls)) and set(urls) == shop.expected_product_urls()


def test_of_two_processes_claiming_one_node_id_at_once_one_wins(redis_url) -> None:
    keys = FrontierKeys("c", "c:start_urls")
    owners = [json.dumps({"host": "h", "pid": pid, "run": str(pid)}) for pid in (1, 2)]
    results: dict[str, list] = {}
    barrier = threading.Barrier(2)

    def claim(owner: str) -> None:
        store = FrontierStore(redis.Redis.from_url(redis_url), keys)
        barrier.wait()
        results[owner] = store.claim("twin", owner, 30_000)

    threads = [threading.Thread(target=claim, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (winner,) = [o for o in owners if results[o][0] == 1]
    (loser,) = [o for o in owners if results[o][0] == 0]
    assert results[loser].owner == winner  # the loser learns who holds the id
    store = FrontierStore(redis.Redis.from_url(redis_url), keys)
    assert store.claim("twin", winner, 30_000)[0] == 1  # the owner may claim again
    assert store.claim("twin", loser, 30_000, force=True)[0] == 1  # the other one is dead
    store.release("twin")  # a clean stop: the id is free
    assert store.claim("twin", winner, 30_000)[0] == 1


@pytest.mark.slow
def test_a_node_stays_in_the_cluster_from_its_open_on(
    redis_url, mongo_uri, shop_factory, tmp_path
) -> None:
    """At its open a node returns what an earlier run of its id held without leaving
    C:nodes: a death between its first lease and its first heartbeat is seen by recovery and
    drain detection (it once was not, and the lease's whole site went uncrawled)."""
    shop = shop_factory(products=30, latency_ms=100)
    r = redis.Redis.from_url(redis_url)
    before = r.config_get("notify-keyspace-events")["notify-keyspace-events"]
    r.config_set("notify-keyspace-events", "Kz")  # sorted-set events, per key
    db = r.connection_pool.connection_kwargs.get("db", 0)
    events = r.pubsub(ignore_subscribe_messages=True)
    events.subscribe(f"__keyspace@{db}__:{KEYS.nodes}")
    r.lpush("catalog:start_urls", shop.url)
    steady = node(redis_url, mongo_uri, tmp_path, "steady")
    seen: list[bytes] = []

    def leased_yet() -> bool:
        while (message := events.get_message()) is not None:
            seen.append(message["data"])
        return leased(r, "steady") > 0

    try:
        assert wait_for(leased_yet, 120), steady.log()[-2000:]
        assert b"zadd" in seen  # its claim (and heartbeats) joined C:nodes
        assert b"zrem" not in seen  # and nothing took it out again
        assert steady.wait() == 0
    finally:
        stop_all([steady])
        events.close()
        r.config_set("notify-keyspace-events", before)
    urls = stored_urls(mongo_uri)
    assert len(urls) == len(set(urls)) and set(urls) == shop.expected_product_urls()


# -- claim_node_id alone, against a real Redis -------------------------------------------------

#: seconds the claim watches another owner's heartbeat (a node's default is 2.5)
WATCH = 1.0


def claim_as(redis_url: str, node_id: str, *, beating: bool = False) -> None:
    """Claim ``node_id`` as this process (run ``mine``); ``beating``: the process that owns
    it heart-beats under it until the claim is over."""

    async def main() -> None:
        client = connection.async_client(redis_url)
        store = FrontierStore(client, FrontierKeys("c", "c:start_urls"), refresh=0.0)
        over = asyncio.Event()

        async def beat() -> None:
            while not over.is_set():
                await store.heartbeat(node_id, "{}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(over.wait(), timeout=0.05)

        beats = asyncio.ensure_future(beat()) if beating else None
        try:
            await claim_node_id(
                store, node_id=node_id, run_id="mine", heartbeat_timeout=30.0, watch=WATCH
            )
        finally:
            over.set()
            if beats is not None:
                await beats
            await client.aclose()

    asyncio.run(main())


def owner_of(r: redis.Redis, node_id: str) -> dict:
    return json.loads(r.hget(FrontierKeys("c", "c:start_urls").node(node_id), "owner"))


def other_owner(r: redis.Redis, node_id: str, *, host: str, pid: int) -> None:
    store = FrontierStore(r, FrontierKeys("c", "c:start_urls"))
    owner = json.dumps({"host": host, "pid": pid, "run": "theirs"})
    assert store.claim(node_id, owner, 30_000)[0] == 1  # it claimed and heart-beat just now


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_free_node_id_is_claimed(redis_url) -> None:
    claim_as(redis_url, "free")
    assert owner_of(redis.Redis.from_url(redis_url), "free") == {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run": "mine",
    }


def test_a_node_id_whose_process_is_alive_and_beating_is_refused(redis_url) -> None:
    r = redis.Redis.from_url(redis_url)
    other_owner(r, "busy", host="elsewhere", pid=4242)
    with pytest.raises(NodeIdInUse) as refused:
        claim_as(redis_url, "busy", beating=True)
    assert "pid 4242 on host elsewhere" in str(refused.value)
    assert "DISTCRAWL_NODE_ID" in str(refused.value)
    assert owner_of(r, "busy")["run"] == "theirs"  # the id stays the other one's


def test_a_node_id_whose_process_died_on_this_host_is_taken_over(redis_url) -> None:
    r = redis.Redis.from_url(redis_url)
    other_owner(r, "ghost", host=socket.gethostname(), pid=dead_pid())
    claim_as(redis_url, "ghost")  # its heartbeat is fresh, but its pid is gone
    assert owner_of(r, "ghost")["run"] == "mine"


def test_a_node_id_whose_process_on_another_host_stopped_beating_is_taken_over(
    redis_url,
) -> None:
    r = redis.Redis.from_url(redis_url)
    other_owner(r, "silent", host="elsewhere", pid=4242)
    claim_as(redis_url, "silent")  # its heartbeat is fresh, but does not advance
    assert owner_of(r, "silent")["run"] == "mine"
