"""Error replies of a class no node knows (the fault proxy answers them for every data
command), for longer than the heartbeat timeout: the nodes retry, and once Redis serves again
none of them takes another for dead, since everyone's heartbeats failed alike."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from crawl_nodes import assert_each_product_once, start_nodes, stop_all, wait_for
from frontier_state import KEYS, leased

from distcrawl.demo.server import DemoShop
from distcrawl.servers.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.slow

#: DISTCRAWL_HEARTBEAT_TIMEOUT of the nodes (s): room for a loaded machine, and the fault
#: outlasts it
TIMEOUT = 8.0


def test_unknown_error_replies_longer_than_the_heartbeat_timeout_recover_no_live_node(
    redis_url: str, mongo_uri: str, shop_factory: Callable[..., DemoShop], tmp_path: Path
) -> None:
    shop = shop_factory(products=200, latency_ms=100)
    direct = redis.Redis.from_url(redis_url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": str(TIMEOUT), "CONCURRENT_REQUESTS": "4"}
    with FaultProxy(redis_url) as proxy:
        nodes = start_nodes(
            ("e1", "e2"),
            redis_url=proxy.url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            settings=settings,
        )
        try:
            direct.lpush(KEYS.start_urls, shop.url)
            assert wait_for(lambda: leased(direct, "e1") > 0 and leased(direct, "e2") > 0, 120)
            fault = proxy.add(Fault("error", error="UNKNOWN"))
            time.sleep(TIMEOUT * 1.5)  # the fault: every heartbeat fails meanwhile
            proxy.remove(fault)
            assert [n.wait() for n in nodes] == [0, 0]
        finally:
            stop_all(nodes)
    assert fault.hits > 0
    logs = "".join(n.log() for n in nodes)
    assert "Frontier loop error" in logs and "works again" in logs
    assert "Recovered" not in logs
    assert direct.hget(KEYS.counters, "recovered_nodes") is None
    fetched = Counter(
        e["path"] for e in shop.request_log() if e["status"] == 200 and "robots" not in e["path"]
    )
    assert fetched and max(fetched.values()) == 1, fetched.most_common(3)
    assert_each_product_once(mongo_uri, shop)
    direct.close()


def test_a_node_that_starts_during_an_outage_recovers_no_live_node(
    redis_url: str, mongo_uri: str, shop_factory: Callable[..., DemoShop], tmp_path: Path
) -> None:
    """A node that waited out an outage at its start recovers nobody for a timeout once Redis
    serves it, as a running node does after one (found by the fault search, seed 933451904:
    a node started during 5 s of LOADING took the live node for dead as Redis came back, a
    moment before the live node's next retry). Each node has a proxy of its own, so that the
    starting node is served first, while the running one's beats still fail."""
    # slow enough that most of the crawl is left when the second node starts
    shop = shop_factory(products=200, latency_ms=400)
    direct = redis.Redis.from_url(redis_url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": str(TIMEOUT), "CONCURRENT_REQUESTS": "2"}
    with FaultProxy(redis_url) as first, FaultProxy(redis_url) as second:
        nodes = start_nodes(
            ("s1",), redis_url=first.url, mongo_uri=mongo_uri, log_dir=tmp_path, settings=settings
        )
        try:
            direct.lpush(KEYS.start_urls, shop.url)
            assert wait_for(lambda: leased(direct, "s1") > 0, 120), nodes[0].log()[-3000:]
            faults = [proxy.add(Fault("error", error="LOADING")) for proxy in (first, second)]
            began = time.monotonic()
            nodes += start_nodes(
                ("s2",), redis_url=second.url, mongo_uri=mongo_uri, log_dir=tmp_path,
                settings=settings,
            )  # fmt: skip
            assert wait_for(lambda: "Redis unavailable at start" in nodes[1].log(), 120)
            # the outage outlasts the timeout: every heartbeat fails meanwhile
            time.sleep(max(0.0, TIMEOUT * 1.5 - (time.monotonic() - began)))
            second.remove(faults[1])
            # the starting node is served (its start goes on at its next try); the running
            # one 2 s after the starting one's last steps began: whatever the moment its loop
            # starts, the running one beats well within a timeout of it
            assert wait_for(lambda: "Frontier node s2 on" in nodes[1].log(), 120)
            time.sleep(2.0)
            first.remove(faults[0])
            assert [n.wait() for n in nodes] == [0, 0]
        finally:
            stop_all(nodes)
    logs = "".join(n.log() for n in nodes)
    assert "Recovered" not in logs, logs[-3000:]
    assert direct.hget(KEYS.counters, "recovered_nodes") is None
    assert_each_product_once(mongo_uri, shop)
    direct.close()
