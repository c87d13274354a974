"""Error replies of a class no node knows (the fault proxy answers them for every data
command), for longer than the heartbeat timeout: the nodes retry, and once Redis serves again
none of them takes another for dead, since everyone's heartbeats failed alike."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
import redis
from crawl_nodes import assert_each_product_once, start_nodes, stop_all, wait_for
from frontier_state import KEYS, leased

from distcrawl.demo.server import DemoShop
from distcrawl.frontier.store import FrontierStore
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


def test_a_starting_node_recovers_a_silent_member_only_after_watching_it_for_a_timeout(
    redis_url: str, mongo_uri: str, shop_factory: Callable[..., DemoShop], tmp_path: Path
) -> None:
    """A member already silent for a timeout when a node starts may be dead, or live and back
    from an outage the new node never saw (found by the fault search, seed 1266763343: a node
    that started just after a WRONGPASS outage ended recovered the live one, whose beats had
    failed through it, a moment before its retry). The new node watches it for a timeout of
    its own first; a member that stays silent is then recovered."""
    # slow until the recovery is seen, so that the node is still crawling by then
    shop = shop_factory(products=60, latency_ms=2000)
    direct = redis.Redis.from_url(redis_url)
    store = FrontierStore(direct, KEYS)
    store.heartbeat("ghost", "{}")
    beat = float(direct.zscore(KEYS.nodes, "ghost") or 0)

    def now_ms() -> float:
        seconds, micros = direct.time()
        return seconds * 1000 + micros / 1000

    # a member silent for longer than the timeout before the node starts
    assert wait_for(lambda: now_ms() - beat > TIMEOUT * 1000 * 1.2, 60)
    direct.lpush(KEYS.start_urls, shop.url)
    settings = {"DISTCRAWL_HEARTBEAT_TIMEOUT": str(TIMEOUT), "CONCURRENT_REQUESTS": "4"}
    nodes = start_nodes(
        ("late",), redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, settings=settings
    )
    try:
        assert wait_for(lambda: "from dead node(s) ghost" in nodes[0].log(), 240), nodes[0].log()[
            -3000:
        ]
        shop.set_faults(latency_ms=0)
        assert nodes[0].wait() == 0
    finally:
        stop_all(nodes)
    log = nodes[0].log()
    started = _logged_at(log, "Frontier node late on")
    recovered = _logged_at(log, "from dead node(s) ghost")
    # log times are whole seconds: a timeout of watching, less one for the rounding
    assert recovered - started >= TIMEOUT - 1, log[-3000:]
    assert direct.zscore(KEYS.nodes, "ghost") is None
    assert_each_product_once(mongo_uri, shop)
    direct.close()


def _logged_at(log: str, text: str) -> float:
    """The time (s) of the first log line holding *text*."""
    line = next(line for line in log.splitlines() if text in line)
    return datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S").timestamp()
