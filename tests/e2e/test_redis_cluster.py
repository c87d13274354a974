"""distcrawl on a real 3-master Redis Cluster: the client made from ``REDIS_URL``, the frontier
script on a cluster, and end-to-end crawls of several demo shops with nodes and masters going
down."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from crawl_nodes import Node, assert_clean_log, stats_of, stop_all, stored_urls, wait_for
from redis.cluster import RedisCluster
from redis.crc import key_slot
from scrapy.settings import Settings

from distcrawl.frontier import connection
from distcrawl.frontier.protocol.spec import queued_in
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.frontier.tags import shard_tags
from distcrawl.ops.snapshot import Snapshot, aread_snapshot, read_snapshot
from distcrawl.ops.status import build_status
from distcrawl.servers.cluster import SLOTS

#: the documented seed list: on a cluster it hashes where its name puts it, not in the crawl's
#: own slots
START_KEY = "catalog:start_urls"
#: distinct loopback addresses: distinct sites, whose shards (of 16) sit on three masters
SHOP_HOSTS = ("127.0.0.2", "127.0.0.4", "127.0.0.6")
ALLOW = ",".join(("127.0.0.1", *SHOP_HOSTS))


# --------------------------------------------------------------------------- REDIS_URL forms


def test_cluster_url_forms() -> None:
    single = connection.parse_redis_url("redis://:pw@h:7000/3")
    assert single == connection.RedisTarget(url="redis://:pw@h:7000/3", cluster=False)
    one = connection.parse_redis_url("redis+cluster://:pw@h:7000")
    assert one.cluster and one.url == "redis://:pw@h:7000/0" and one.seeds == (("h", 7000),)
    many = connection.parse_redis_url("rediss+cluster://a:1,b:2/0")
    assert many.url == "rediss://a:1/0" and many.seeds == (("a", 1), ("b", 2))
    assert connection.parse_redis_url("redis://h:7000/0", cluster=True).seeds == (("h", 7000),)
    with pytest.raises(connection.RedisURLError, match="database 0 only"):
        connection.parse_redis_url("redis+cluster://h:7000/2")
    with pytest.raises(connection.RedisURLError, match="bad port"):
        connection.parse_redis_url("redis+cluster://h:x")


def test_the_cluster_setting_turns_a_plain_url_into_a_cluster_url() -> None:
    settings = Settings({"REDIS_URL": "redis://h:7000/0", "DISTCRAWL_REDIS_CLUSTER": True})
    assert connection.settings_url(settings) == "redis+cluster://h:7000/0"
    settings.set("DISTCRAWL_REDIS_CLUSTER", False)
    assert connection.settings_url(settings) == "redis://h:7000/0"
    settings.set("REDIS_URL", "unix:///tmp/r.sock")
    settings.set("DISTCRAWL_REDIS_CLUSTER", True)
    with pytest.raises(connection.RedisURLError):
        connection.settings_url(settings)


# --------------------------------------------------------------------------- the cluster


def test_fixture_cluster_has_three_masters_sharing_every_slot(redis_cluster, redis_cluster_url):
    for master in redis_cluster.masters:
        info = master.cluster_info()
        assert info["cluster_state"] == "ok"
        assert info["cluster_size"] == "3"
        assert int(info["cluster_slots_assigned"]) == SLOTS
    client = connection.client(redis_cluster_url)
    try:
        assert isinstance(client, RedisCluster)
        assert len(client.get_primaries()) == 3
        # keys of distinct hash tags land on distinct masters
        for tag in range(30):
            client.set(f"{{t{tag}}}:k", tag)
        per_master = [m.client().dbsize() for m in redis_cluster.masters]
        assert sum(per_master) == 30 and min(per_master) > 0
    finally:
        client.close()


@pytest.mark.parametrize("shards", [2, 3, 16, 64, 1024])
def test_shard_tags_spread_evenly_over_equal_slot_ranges(shards: int) -> None:
    tags = shard_tags("catalog", shards)
    assert len(set(tags)) == shards and tags == shard_tags("catalog", shards)
    slots = [key_slot(t.encode()) for t in tags]  # redis-py's CRC16, as the cluster's
    assert slots == sorted(slots)  # shard k in the k-th range
    for masters in (2, 3, 5, 7):
        per_master = Counter(slot * masters // SLOTS for slot in slots)
        counts = [per_master.get(m, 0) for m in range(masters)]
        assert max(counts) - min(counts) <= 1, (masters, counts)
    assert FrontierKeys("catalog", START_KEY, shards=1).shard(0).prefix == "{catalog}"


def test_shards_spread_evenly_over_the_fixture_masters(redis_cluster, redis_cluster_url):
    keys = FrontierKeys("catalog", START_KEY, shards=16)
    master = redis_cluster.masters[0].client()
    client = connection.client(redis_cluster_url)
    try:
        for shard in keys.all_shards():  # the server hashes the tags as the client does
            slot = master.execute_command("CLUSTER", "KEYSLOT", shard.levels)
            assert slot == key_slot(shard.prefix.encode())
        per_master = Counter(client.get_node_from_key(s.prefix).port for s in keys.all_shards())
        assert sorted(per_master.values()) == [5, 5, 6]
    finally:
        client.close()
        master.close()


def _getkeys_calls(cluster: Any) -> int:
    total = 0
    for m in cluster.masters:
        c = m.client()
        total += c.info("commandstats").get("cmdstat_command|getkeys", {}).get("calls", 0)
        c.close()
    return total


def test_pipelined_script_calls_are_routed_without_asking_the_server(
    redis_cluster, redis_cluster_url
):
    """redis-py's blocking cluster pipelines would send COMMAND GETKEYS before every EVALSHA
    (a round trip and Redis CPU per shard call); the client routes them by their key."""
    keys = FrontierKeys("catalog", START_KEY, shards=16)
    client = connection.client(redis_cluster_url)
    try:
        store = FrontierStore(client, keys)
        before = _getkeys_calls(redis_cluster)
        kids = [_child(f"g{i}", f"g{i}.test") for i in range(40)]
        assert store.sync("n1", children=kids).added == 40
        assert len(_lease_all(store, "n1", 40)) == 40
        assert _getkeys_calls(redis_cluster) == before
    finally:
        client.close()

    async def on_the_reactor() -> int:  # a node's asyncio client, likewise
        aclient = connection.async_client(redis_cluster_url)
        try:
            store = FrontierStore(aclient, keys)
            kids = [_child(f"h{i}", f"h{i}.test") for i in range(40)]
            return int((await store.sync("n2", children=kids, lease=10)).added)
        finally:
            await aclient.aclose()

    assert asyncio.run(on_the_reactor()) == 40
    assert _getkeys_calls(redis_cluster) == before


def _child(fp: str, site: str = "s.test") -> tuple[str, int, bool, int, str, str]:
    return (fp, 100, False, 0, site, json.dumps({"url": f"http://{site}/{fp}"}))


def _lease_all(store: FrontierStore, node: str, n: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(3 * store.keys.shards):
        store.views.poke()
        got += store.sync(node, lease=n - len(got)).leased
        if len(got) >= n:
            break
    return got


def _script_calls(cluster: Any) -> dict[int, int]:
    """The frontier's calls each master ran: FCALL of its function library (valkey), or
    EVALSHA where a server has no FUNCTION."""
    calls = {}
    for m in cluster.masters:
        c = m.client()
        stats = c.info("commandstats")
        calls[m.port] = sum(
            stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("fcall", "evalsha")
        )
        c.close()
    return calls


def test_frontier_shards_spread_over_the_masters_and_run_their_script_there(
    redis_cluster, redis_cluster_url
):
    keys = FrontierKeys("catalog", START_KEY, shards=16)
    client = connection.client(redis_cluster_url)
    try:
        owners = {client.get_node_from_key(s.prefix).port for s in keys.all_shards()}
        assert owners == {m.port for m in redis_cluster.masters}  # every master has shards
        before = _script_calls(redis_cluster)
        store = FrontierStore(client, keys)
        sites = [f"s{i}.test" for i in range(60)]
        kids = [_child(f"a{i}", site) for i, site in enumerate(sites)]
        result = store.sync("n1", children=[*kids, _child("a")])
        assert (result.added, result.filtered) == (61, 0)
        assert store.sync("n1", children=[_child("a0", sites[0])]).filtered == 1
        leased = _lease_all(store, "n1", 61)
        assert len(leased) == 61
        client.lpush(START_KEY, "http://s.test/")
        assert store.take_seeds("n1", 10).fresh == [b"http://s.test/"]
        store.heartbeat("n1", "{}")
        assert [int(x) for x in store.drained()] == [0, 0, 61, 1, 0]
        assert store.release("n1") == 61 + 1
        assert [int(x) for x in store.drained()] == [61, 0, 0, 1, 0]  # the seed given back
        # each shard's keys sit on the master of its slot, and each master ran scripts
        for shard in keys.all_shards():
            queued = client.zrange(shard.levels, 0, -1, withscores=True)
            node = client.get_node_from_key(shard.levels)
            owner = next(m for m in redis_cluster.masters if m.port == node.port)
            assert owner.client().zrange(shard.levels, 0, -1, withscores=True) == queued
        after = _script_calls(redis_cluster)
        assert all(after[port] > before[port] for port in after)
    finally:
        client.close()


def test_async_client_runs_the_script_and_hears_wake_ups(redis_cluster_url):
    keys = FrontierKeys("catalog", START_KEY, shards=16)

    async def scenario() -> list[Any]:
        client = connection.async_client(redis_cluster_url, socket_timeout=10)
        await client.initialize()  # the slot map: a cluster pubsub needs it to pick a node
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(keys.wake)
            busy = FrontierStore(client, keys)
            await busy.sync("busy", children=[_child("c")])  # into an empty shard: a wake-up
            shard = keys.site_keys("s.test").index
            messages = []
            for _ in range(20):  # the wake-up of that shard (others may come first: CI saw one)
                message = await pubsub.get_message(timeout=0.5)
                if message is not None:
                    messages.append(message)
                    if int(message["data"]) == shard:
                        break
            idle = FrontierStore(client, keys)
            idle.views.poke(int(messages[-1]["data"]) if messages else None)
            reply = await idle.sync("idle", lease=4)
            return [messages, reply, shard]
        finally:
            await pubsub.aclose()
            await client.aclose()

    messages, reply, shard = asyncio.run(scenario())
    assert messages and {m["channel"] for m in messages} == {keys.wake.encode()}
    assert int(messages[-1]["data"]) == shard, messages
    assert len(reply.leased) == 1


def test_status_reads_the_crawl_on_the_cluster(redis_cluster_url) -> None:
    keys = FrontierKeys("catalog", START_KEY, shards=16)
    client = connection.client(redis_cluster_url)
    try:
        store = FrontierStore(client, keys)
        store.sync("n1", children=[_child("a"), _child("b", "t.test")])
        store.set_site_limits("s.test", rate=None, concurrency=1)
        store.sync("n1", children=[_child("c")])
        assert len(_lease_all(store, "n1", 3)) == 2  # s.test: one in flight, one waiting
        store.heartbeat("n1", json.dumps({"stats": {"item_scraped_count": 1}}))
        client.lpush(START_KEY, "http://s.test/")
        status = build_status(read_snapshot(client, keys), heartbeat_timeout=30)
    finally:
        client.close()

    async def read() -> Snapshot:
        aclient = connection.async_client(redis_cluster_url)
        try:
            return await aread_snapshot(aclient, keys)
        finally:
            await aclient.aclose()

    astatus = build_status(asyncio.run(read()), heartbeat_timeout=30)
    for view in (status, astatus):
        assert view["frontier"]["queued"] == 1
        assert view["frontier"]["waiting_for_site"] == 1
        assert view["frontier"]["in_flight"] == 2
        assert view["frontier"]["start_list"] == 1
        assert [n["state"] for n in view["nodes"]] == ["live"]
        assert view["sites"][0]["site"] == "s.test"
        assert (view["sites"][0]["in_flight"], view["sites"][0]["waiting"]) == (1, 1)


def test_pause_resume_and_reset_on_the_cluster(redis_cluster_url) -> None:
    from distcrawl.ops import control

    keys = FrontierKeys("catalog", START_KEY, shards=16)
    client = connection.client(redis_cluster_url)
    try:
        store = FrontierStore(client, keys)
        kids = [_child(f"r{i}", f"s{i}.test") for i in range(40)]
        assert store.sync("n1", children=kids).added == 40
        control.pause(client, keys)
        assert _lease_all(store, "n1", 5) == []  # paused: nothing is leased in any shard
        control.resume(client, keys)
        store.heartbeat("n1", "{}")
        held = _lease_all(store, "n1", 5)
        assert len(held) == 5
        client.lpush(START_KEY, "http://s.test/")
        outcome = control.reset(client, keys, heartbeat_timeout=30)
        assert outcome["kept_leases"] == 5 and outcome["live_nodes"] == ["n1"]
        assert [int(x) for x in store.drained()] == [0, 0, 5, 0, 0]
        status = build_status(read_snapshot(client, keys), heartbeat_timeout=30)
        assert status["frontier"]["in_flight"] == 5  # the status still counts the kept leases
        assert store.sync("n1", acks=[leased.lease for leased in held]).acked == 5
        assert [int(x) for x in store.drained()] == [0, 0, 0, 0, 0]
    finally:
        client.close()


def test_seeds_given_back_after_a_death_between_push_and_drop_are_filtered_not_queued_twice(
    redis_cluster_url,
) -> None:
    keys = FrontierKeys("catalog", START_KEY, shards=16)
    client = connection.client(redis_cluster_url)
    try:
        # the seed list hashes apart from the crawl's slots; its neighbours hash with it
        seeds = keys.seeds
        assert seeds.prefix == "{catalog:start_urls}"
        assert client.keyslot(START_KEY) == client.keyslot(seeds.returned)
        assert client.keyslot(START_KEY) not in {
            client.keyslot(s.prefix) for s in [keys, *keys.all_shards()]
        }
        store = FrontierStore(client, keys)
        client.lpush(START_KEY, "http://s.test/", "http://t.test/")
        assert store.take_seeds("n1", 5).fresh == [b"http://s.test/", b"http://t.test/"]
        # n1 pushed the first seed's request into its shard (a seed's request is dont_filter,
        # its fingerprint recorded), and died before it said so
        as_seed = (*_child("s-seed")[:2], True, *_child("s-seed")[3:])
        assert store.sync("n1", children=[as_seed]).added == 1
        assert store.release("n1") == 2  # its seeds given back (no lease was taken)
        assert client.llen(seeds.returned) == 2 and not client.exists(seeds.taken("n1"))
        # taken again first, by another node; their requests go through the dupefilter: the
        # one in the crawl already is not queued twice
        taken = store.take_seeds("n2", 5)
        assert taken.again == [b"http://s.test/", b"http://t.test/"] and taken.fresh == []
        again = [_child("s-seed"), _child("t-seed", "t.test")]
        result = store.sync("n2", children=again, seeds_done=True)
        assert result.added == 1
        assert not client.exists(seeds.taken("n2"), seeds.returned, START_KEY)
        assert [int(x) for x in store.drained()] == [2, 0, 0, 0, 0]
    finally:
        client.close()


# --------------------------------------------------------------------------- crawls


def _shops(shop_factory: Any, products: int, **config: Any) -> list[Any]:
    return [shop_factory(products=products, host=host, **config) for host in SHOP_HOSTS]


def _node(url: str, mongo_uri: str, tmp_path: Any, name: str, **settings: Any) -> Node:
    return Node(
        redis_url=url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id=name,
        settings={"DISTCRAWL_ALLOW_PRIVATE": ALLOW, **settings},
    )


def _seed(url: str, shops: list[Any]) -> None:
    client = connection.client(url)
    try:
        client.lpush(START_KEY, *(shop.url for shop in shops))
    finally:
        client.close()


def _assert_stored_once(mongo_uri: str, shops: list[Any]) -> None:
    urls = stored_urls(mongo_uri)
    assert Counter(urls).most_common(1)[0][1] == 1, "a product was stored twice"
    expected = set().union(*(shop.expected_product_urls() for shop in shops))
    assert set(urls) == expected


#: the layout the nodes write (DISTCRAWL_SHARDS as they read it)
CRAWL = FrontierKeys("catalog", START_KEY)


def _frontier_left(url: str, nodes: list[Node]) -> dict[str, int]:
    client = connection.client(url)
    try:
        shards = CRAWL.all_shards()
        return {
            "queued": sum(
                queued_in(client.zrange(s.levels, 0, -1, withscores=True)) for s in shards
            ),
            "payloads": sum(client.hlen(s.requests) for s in shards),
            "delayed": sum(client.zcard(s.delayed) for s in shards),
            "leased": sum(client.hlen(s.held(n.node_id)) for s in shards for n in nodes),
        }
    finally:
        client.close()


#: what a drained crawl leaves in the frontier
NOTHING_LEFT = {"queued": 0, "payloads": 0, "delayed": 0, "leased": 0}


@pytest.mark.slow
def test_two_nodes_crawl_three_sites_on_the_cluster(
    redis_cluster, redis_cluster_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shops = _shops(shop_factory, 80)
    _seed(redis_cluster_url, shops)
    nodes = [_node(redis_cluster_url, mongo_uri, tmp_path, f"c{i}") for i in (1, 2)]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    _assert_stored_once(mongo_uri, shops)
    assert _frontier_left(redis_cluster_url, nodes) == NOTHING_LEFT
    if CRAWL.shards == 16:
        # every master holds the seen URLs of one of the sites
        assert all(m.client().keys("*:seen:*") for m in redis_cluster.masters)
    for node in nodes:
        assert_clean_log(node.log())
        assert "Spider closed (finished)" in node.log()
        assert "redis+cluster://" in node.log()


def _leased(url: str, node: str) -> int:
    client = connection.client(url)
    try:
        return sum(int(client.hlen(s.held(node))) for s in CRAWL.all_shards())
    finally:
        client.close()


@pytest.mark.slow
def test_kill_9_of_a_node_on_the_cluster_loses_nothing(
    redis_cluster_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shops = _shops(shop_factory, 60, latency_ms=150)
    _seed(redis_cluster_url, shops)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "3", "CONCURRENT_REQUESTS": "4"}
    victim = _node(redis_cluster_url, mongo_uri, tmp_path, "victim", **settings)
    survivor = _node(redis_cluster_url, mongo_uri, tmp_path, "survivor", **settings)
    nodes = [victim, survivor]
    try:
        assert wait_for(lambda: _leased(redis_cluster_url, "victim") > 0, 90), victim.log()[-2000:]
        victim.kill()
        assert survivor.wait() == 0
    finally:
        stop_all(nodes)
    _assert_stored_once(mongo_uri, shops)
    assert _frontier_left(redis_cluster_url, nodes) == NOTHING_LEFT
    assert "Recovered" in survivor.log()
    assert_clean_log(survivor.log())


#: a node's seed taking, as a node does it, in a process killed before it puts the seeds'
#: requests into the crawl
_STAGER = """
import sys
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys, FrontierStore
store = FrontierStore(connection.client(sys.argv[1]), FrontierKeys("catalog", sys.argv[2]))
taken = store.take_seeds("stager", 10)
print(len(taken.again) + len(taken.fresh), flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_seeds_from_redis_cli_and_distcrawl_seed_are_crawled_once_after_a_node_died_taking_them(
    redis_cluster, redis_cluster_url, redis_cli, mongo_uri, shop_factory, tmp_path
) -> None:
    shops = _shops(shop_factory, 40)
    # the documented ways: redis-cli -c (following the cluster to the list's master, from
    # whichever master it asks first) and `distcrawl seed`, both to catalog:start_urls
    client = connection.client(redis_cluster_url)
    try:
        holder = client.get_node_from_key(START_KEY).port
    finally:
        client.close()
    elsewhere = next(m.port for m in redis_cluster.masters if m.port != holder)
    pushed = subprocess.run(
        [str(redis_cli), "-c", "-p", str(elsewhere), "lpush", START_KEY, shops[0].url],
        capture_output=True,
        text=True,
        check=True,
    )
    assert pushed.stdout.strip() == "1", pushed
    env = {**os.environ, "REDIS_URL": redis_cluster_url, "DISTCRAWL_ALLOW_PRIVATE": ALLOW}
    seeded = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "seed", "catalog", shops[1].url, shops[2].url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert seeded.returncode == 0, seeded.stderr
    assert f"2 seed(s) to {START_KEY}" in seeded.stdout
    keys = FrontierKeys("catalog", START_KEY)
    client = connection.client(redis_cluster_url)
    try:
        assert client.llen(START_KEY) == 3
        # a node takes the three seeds and is killed -9 before it puts them into the crawl
        stager = subprocess.Popen(
            [sys.executable, "-c", _STAGER, redis_cluster_url, START_KEY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert stager.stdout is not None
            assert stager.stdout.readline().strip() == "3"
        finally:
            stager.kill()
            stager.wait()
        assert client.llen(keys.seeds.taken("stager")) == 3 and client.llen(START_KEY) == 0
        settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "3"}
        nodes = [_node(redis_cluster_url, mongo_uri, tmp_path, f"s{i}", **settings) for i in (1, 2)]
        try:
            assert [n.wait() for n in nodes] == [0, 0]
        finally:
            stop_all(nodes)
        _assert_stored_once(mongo_uri, shops)
        assert _frontier_left(redis_cluster_url, nodes) == NOTHING_LEFT
        # the dead node's seeds were given back and taken again, none left anywhere
        logs = "".join(n.log() for n in nodes)
        assert "Recovered" in logs
        assert sum(stats_of(n.log()).get("frontier/seeds/taken_again", 0) for n in nodes) == 3
        seeds = keys.seeds
        assert not client.exists(START_KEY, seeds.returned, seeds.taken("stager"))
        for node in nodes:
            assert_clean_log(node.log())
    finally:
        client.close()


@pytest.mark.slow
def test_a_master_restarted_mid_crawl_loses_nothing(
    redis_cluster, redis_cluster_url, mongo_uri, shop_factory, tmp_path
) -> None:
    shops = _shops(shop_factory, 60, latency_ms=100)
    _seed(redis_cluster_url, shops)
    client = connection.client(redis_cluster_url)
    try:
        port = client.get_node_from_key("{catalog}").port
    finally:
        client.close()
    master = next(m for m in redis_cluster.masters if m.port == port)
    # heartbeats outlast the outage: no live node may be declared dead because Redis was away
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "60", "CONCURRENT_REQUESTS": "4"}
    nodes = [_node(redis_cluster_url, mongo_uri, tmp_path, f"m{i}", **settings) for i in (1, 2)]
    # both nodes crawl when the master stops (on a loaded machine one may still be starting,
    # and a start waits for Redis with lines of its own: "Redis unavailable at start")
    crawling: set[str] = set()

    def both_crawl() -> bool:
        crawling.update(n.node_id for n in nodes if _leased(redis_cluster_url, n.node_id) > 0)
        return len(crawling) == 2 and len(stored_urls(mongo_uri)) >= 20

    try:
        assert wait_for(both_crawl, 120), crawling
        master.stop()  # SIGTERM: its append-only file is complete
        assert wait_for(lambda: all("Redis unavailable (" in n.log() for n in nodes), 60)
        master.start()
        redis_cluster.wait_ready()
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    _assert_stored_once(mongo_uri, shops)
    assert _frontier_left(redis_cluster_url, nodes) == NOTHING_LEFT
    for node in nodes:
        assert "Redis is back" in node.log()
        assert "Recovered" not in node.log()


def _role(node: Any) -> str:
    c = node.client()
    try:
        return str(c.info("replication")["role"])
    finally:
        c.close()


@pytest.mark.slow
def test_a_master_killed_mid_crawl_fails_over_to_its_replica_and_loses_nothing(
    redis_cluster_with_replicas, mongo_uri, shop_factory, tmp_path
) -> None:
    cluster = redis_cluster_with_replicas
    shops = _shops(shop_factory, 60, latency_ms=100)
    _seed(cluster.url, shops)
    client = connection.client(cluster.url)
    try:  # the master of the first site's shard (with shards, not the control slot's)
        port = client.get_node_from_key(CRAWL.site_keys(SHOP_HOSTS[0]).prefix).port
        control = client.get_node_from_key(CRAWL.prefix).port
    finally:
        client.close()
    assert port != control or CRAWL.shards == 1
    master = next(m for m in cluster.masters if m.port == port)
    replica = cluster.replica_of(master)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": "60", "CONCURRENT_REQUESTS": "4"}
    nodes = [_node(cluster.url, mongo_uri, tmp_path, f"f{i}", **settings) for i in (1, 2)]
    try:
        assert wait_for(lambda: len(stored_urls(mongo_uri)) >= 20, 120)
        master.kill()  # kill -9: whatever it had not replicated is gone
        assert len(stored_urls(mongo_uri)) < 3 * 60  # mid-crawl
        assert wait_for(lambda: _role(replica) == "master", 60), "no failover"
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    assert not master.running
    _assert_stored_once(mongo_uri, shops)
    assert _frontier_left(cluster.url, nodes) == NOTHING_LEFT
    for node in nodes:
        assert "Redis is back" in node.log()  # the nodes saw the master go, and its replica
        assert "Recovered" not in node.log()  # no live node was declared dead
