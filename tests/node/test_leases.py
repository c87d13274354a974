"""Lease intake against a real Redis: leased entries become the engine's next requests; an
entry that is no request is refused with its reason, moved aside with the next round trip, and
the node keeps going."""

from __future__ import annotations

import json

import redis
import scrapy
from frontier_state import clear_frontier
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.frontier.batch import Lease, Leased
from distcrawl.frontier.store import Child, FrontierKeys, FrontierStore
from distcrawl.node.requests import codec
from distcrawl.node.scheduler.buffers import WriteBuffers
from distcrawl.node.scheduler.leases import LeaseIntake
from distcrawl.node.scheduler.ready import ReadyQueue

KEYS = FrontierKeys("l", "l:start_urls")


class Spider(scrapy.Spider):
    name = "l"


def intake_for(spider: Spider, writes: WriteBuffers) -> tuple[LeaseIntake, list[str]]:
    woken: list[str] = []
    intake = LeaseIntake(
        spider=spider,
        node_id="n1",
        ready=ReadyQueue(),
        leased={},
        writes=writes,
        revisits=None,
        stats=MemoryStatsCollector(get_crawler(Spider)),
        wake_engine=lambda: woken.append("engine"),
    )
    return intake, woken


def test_leased_entries_become_requests_and_a_bad_one_is_moved_aside(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    clear_frontier(r, KEYS)
    store = FrontierStore(r, KEYS, refresh=0.0)
    spider = Spider()
    good = codec.encode(scrapy.Request("http://l.test/a", meta={"page_kind": "product"}), spider)
    bad = "{not json"
    assert (
        store.sync(
            "n0",
            children=[
                Child("a", 100, False, 0, "l.test", good),
                Child("e", 200, False, 0, "l.test", bad),
            ],
        ).added
        == 2
    )
    store.heartbeat("n1", "{}")  # a member: its leases count
    leased = store.sync("n1", lease=2).leased
    writes = WriteBuffers(latency_target=5.0)
    intake, woken = intake_for(spider, writes)
    assert intake.accept(leased) == 2  # both entries count as taken in
    (request,) = intake.ready
    assert request.url == "http://l.test/a" and request.meta == {"page_kind": "product"}
    assert request.priority == 100  # from the entry's order score
    assert intake.leased[request].site == "l.test"
    assert woken == ["engine"]
    # the bad entry: refused with its reason, acked and kept where an operator looks
    (record,) = [json.loads(x) for x in writes.rejected]
    assert (record["kind"], record["node"], record["reason"]) == ("queue", "n1", "not_json")
    stats = intake.stats.get_stats()
    assert stats[f"frontier/refused/{record['reason']}"] == 1
    assert stats["frontier/leased"] == 1
    assert len(writes.acks) == 1
    result = store.sync("n1", acks=writes.acks, rejected=writes.rejected)
    assert result.acked == 1 and r.llen(KEYS.rejected) == 1
    assert store.drained()[:3] == [0, 0, 1]  # only the good request is still leased


def test_a_paced_lease_goes_before_what_is_already_waiting() -> None:
    spider = Spider()
    intake, woken = intake_for(spider, WriteBuffers(latency_target=5.0))

    def entry(path: str, *, paced: bool) -> Leased:
        payload = codec.encode(scrapy.Request(f"http://l.test/{path}"), spider).encode()
        return Leased(Lease(0, f"{path}.t", "l.test"), payload, 0, paced)

    intake.accept([entry("a", paced=False), entry("b", paced=False)])
    intake.accept([entry("c", paced=True)])  # its site's token was spent for it
    assert [r.url.rsplit("/", 1)[1] for r in intake.ready] == ["c", "a", "b"]
    assert woken == ["engine", "engine"]
    # held from now on, c waits after its token: it takes a new one before it is sent
    c, a, _ = intake.ready.startable
    intake.ready.popleft()
    intake.ready.popleft()
    intake.ready.hold(("robots", "l.test"), c)
    intake.ready.hold(("robots", "l.test"), a)
    assert intake.ready.stale_token(c) and not intake.ready.stale_token(a)


def test_a_request_an_operator_requeued_from_the_dead_letters_is_counted() -> None:
    spider = Spider()
    intake, _ = intake_for(spider, WriteBuffers(latency_target=5.0))
    requeued = scrapy.Request("http://l.test/d", meta={"distcrawl_dead_letter": "timeout"})
    payload = codec.encode(requeued, spider).encode()
    intake.accept([Leased(Lease(0, "d.t", "l.test"), payload, 0, False)])
    (request,) = intake.ready
    assert "distcrawl_dead_letter" not in request.meta
    assert intake.stats.get_value("frontier/requeued_dead_letters") == 1
