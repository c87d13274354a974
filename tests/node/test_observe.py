"""What a node observes, on real servers: failures caught where they happen (every try of an
answer of 400 or more, a failed or refused download, a callback or pipeline that raised), the
first occurrence of a group offered once and stored in MongoDB when the crawl grants it, the
products' fields counted in chunks, all of it carried by the heartbeat's round trip; findings
recorded once; one notice per event whichever nodes see it, retried against a webhook that
fails first."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pymongo
import pytest
import redis
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet.error import TimeoutError as TwistedTimeout
from twisted.python.failure import Failure as TwistedFailure

from distcrawl.base.coverage import SiteFigures
from distcrawl.base.names import observe as words
from distcrawl.base.names import stats as stat_keys
from distcrawl.demo.webhook import WebhookReceiver
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.node.observe.alerts import WebhookSender
from distcrawl.node.observe.buffer import Event, Observations
from distcrawl.node.observe.capture import FailureCapture, extraction_missed
from distcrawl.node.observe.watch import AlertSettings, Watch
from distcrawl.node.scheduler.membership import Membership
from distcrawl.storage.observe import SNAPSHOTS, SnapshotWriter

KEYS = FrontierKeys("catalog", "catalog:start_urls", shards=2)


@pytest.fixture
def capture() -> FailureCapture:
    made = get_crawler(settings_dict={"DISTCRAWL_SNAPSHOT_BYTES": 100})
    made._apply_settings()
    return FailureCapture.from_crawler(made)


def answer(url: str, status: int, body: bytes = b"<html>down</html>") -> HtmlResponse:
    return HtmlResponse(url, status=status, body=body, headers={"X-Upstream": "db-3"})


def test_every_try_of_an_error_answer_is_counted_and_its_first_occurrence_kept(
    capture: FailureCapture,
) -> None:
    obs = capture.observations
    for i in range(3):
        url = f"https://a.test/p/{i}"
        response = answer(url, 502, b"x" * 500)
        assert capture.process_response(Request(url), response) is response
    capture.process_response(Request("https://a.test/ok"), answer("https://a.test/ok", 200))
    robots = "https://a.test/robots.txt"  # a site without one: no failure
    capture.process_response(Request(robots), answer(robots, 404))
    taken = obs.take()
    assert taken is not None and obs.take() is None
    [(gid, group)] = taken.groups.items()
    assert (group.failure.site, group.failure.kind, group.failure.template) == (
        "a.test",
        "http",
        "HTTP 502 Bad Gateway",
    )
    assert group.count == 3 and group.samples == [f"https://a.test/p/{i}" for i in range(3)]
    sample = group.sample
    assert sample is not None and sample.status == 502 and sample.body_bytes == 500
    assert sample.body == b"x" * 100  # DISTCRAWL_SNAPSHOT_BYTES
    assert ("X-Upstream", "db-3") in sample.headers
    # the group was offered once: a later occurrence keeps no second snapshot
    capture.process_response(Request("https://a.test/p/9"), answer("https://a.test/p/9", 502))
    again = obs.take()
    assert again is not None and again.groups[gid].sample is None
    assert capture.crawler.stats.get_value(stat_keys.OBSERVED_ERRORS) == 4


def test_failed_and_refused_downloads_callbacks_and_pipelines_are_grouped(
    capture: FailureCapture,
) -> None:
    obs = capture.observations
    capture.process_exception(Request("https://b.test/1"), TwistedTimeout("took 30.0 s"))
    capture.process_exception(Request("https://b.test/2"), TwistedTimeout("took 12.5 s"))
    capture.process_exception(Request("https://b.test/3"), IgnoreRequest("Forbidden by robots.txt"))
    try:
        raise KeyError("price")
    except KeyError:
        failure = TwistedFailure()
    capture.spider_error(failure, answer("https://b.test/p/1", 200), None)  # type: ignore[arg-type]
    capture.item_error({}, answer("https://b.test/p/2", 200), None, failure)  # type: ignore[arg-type]
    extraction_missed(obs, answer("https://b.test/p/3", 200), "b.test", ["price"])
    taken = obs.take()
    assert taken is not None
    found = sorted((g.failure.kind, g.failure.template, g.count) for g in taken.groups.values())
    kinds = [k for k, _, _ in found]
    assert kinds == ["callback", "download", "extraction", "pipeline", "refused"]
    timeout = "TimeoutError: User timeout caused connection failure: took <n> s."
    assert ("download", timeout, 2) in found  # two messages, one template
    callback = next(t for k, t, _ in found if k == "callback")
    assert callback.startswith("KeyError: <value> at test_observe.py:") and "in test_" in callback
    assert ("extraction", "product page without price", 1) in found
    assert ("refused", "Forbidden by robots.txt", 1) in found


def test_products_are_counted_by_site_in_chunks_of_a_quarter_window() -> None:
    made = get_crawler(settings_dict={"DISTCRAWL_QUALITY_WINDOW": 8})
    made._apply_settings()
    obs = Observations.of(made)
    obs.stored("s.test", {"name": "x", "price": 1, "currency": ""})
    assert not obs.due
    for _ in range(4):
        obs.stored("s.test", {"name": "x", "price": None, "currency": ""})
    assert obs.due  # a chunk is full: the next round trip carries it
    taken = obs.take()
    assert taken is not None and not obs.due
    chunks = [[2, {"name": 2, "price": 1}], [2, {"name": 2}], [1, {"name": 1}]]
    assert taken.products == {"s.test": chunks}
    obs.stored("s.test", {"name": "y"})
    obs.restore(taken)  # the heartbeat failed: the oldest chunks go first next time
    again = obs.take()
    assert again is not None and again.products["s.test"][0] == [2, {"name": 2, "price": 1}]
    assert again.products["s.test"][-1] == [1, {"name": 1}]


def test_the_heartbeat_carries_the_delta_and_the_granted_snapshot_goes_to_mongodb(
    redis_url: str, mongo_uri: str
) -> None:
    made = get_crawler(settings_dict={"DISTCRAWL_QUALITY_WINDOW": 8})
    made._apply_settings()
    capture = FailureCapture.from_crawler(made)
    obs = capture.observations
    database = mongo_uri.rsplit("/", 1)[1].split("?")[0]
    obs.spider, obs.run, obs.node = "catalog", "r1", "n1"
    obs.writer = SnapshotWriter(mongo_uri, database)
    capture.process_response(Request("https://a.test/1"), answer("https://a.test/1", 503))
    for _ in range(3):
        obs.stored("a.test", {"name": "x", "price": 1})

    async def beat() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = FrontierStore(client, KEYS)
            membership = Membership(
                store=store,
                node_id="n1",
                stats=made.stats,
                heartbeat_interval=1.0,
                heartbeat_timeout=30.0,
                observations=obs,
            )
            await membership.heartbeat({})
        finally:
            await client.aclose()

    asyncio.run(beat())
    obs.writer.close(30)
    assert obs.writer.written == 1 and obs.writer.dropped == 0
    sync = redis.Redis.from_url(redis_url)
    try:
        store = FrontierStore(sync, KEYS)
        [group] = store.error_groups()
        assert group.count == 1 and group.snapshot_node == "n1"
        assert store.read_quality()["a.test"].products == 3
        assert obs.to_judge.keys() == {"a.test"}  # passed a mark (2): to be judged
    finally:
        sync.close()
    with pymongo.MongoClient(mongo_uri) as mongo:
        [doc] = mongo[database][SNAPSHOTS].find()
    assert (doc["group"], doc["status"], doc["url"], doc["run"]) == (
        group.id,
        503,
        "https://a.test/1",
        "r1",
    )


def _watch(client: Any, node: str, urls: list[str]) -> Watch:
    made = get_crawler(settings_dict={"DISTCRAWL_QUALITY_WINDOW": 8})
    made._apply_settings()
    obs = Observations.of(made)
    obs.spider, obs.run, obs.node = "catalog", "r1", node
    return Watch(
        store=FrontierStore(client, KEYS),
        observations=obs,
        stats=made.stats,
        spider="catalog",
        node_id=node,
        drop=0.2,
        alerts=AlertSettings(urls=tuple(urls), rate=20, tries=3, timeout=5.0),
        mongo=("", "catalog"),
    )


def test_two_nodes_that_see_one_event_send_one_notice_and_record_one_finding(
    redis_url: str,
) -> None:
    fallen = SiteFigures.from_json(
        json.dumps({"n": 16, "f": {"name": 16, "price": 4}, "m": [[4, {"name": 4, "price": 4}]]})
    )

    async def both() -> None:
        clients = [redis.asyncio.Redis.from_url(redis_url) for _ in range(2)]
        try:
            with WebhookReceiver() as receiver:
                a, b = (_watch(c, f"n{i}", [receiver.url]) for i, c in enumerate(clients))
                # both judge the same site and see the same crawl end
                await asyncio.gather(a.judge("s.test", fallen), b.judge("s.test", fallen))
                event = Event(words.CRAWL_FINISHED, "crawl_finished:r1", "done")
                await asyncio.gather(a.notify(event), b.notify(event))
                for watch in (a, b):
                    await asyncio.to_thread(watch.sender.close, 10)  # type: ignore[union-attr]
                assert receiver.by_kind() == {"crawl_finished": 1, "finding": 1}
                [finding] = [n for n in receiver.received() if n["kind"] == "finding"]
                message = "s.test: price on 0% of the last 12 products (was 100%)"
                assert finding["text"].endswith(message)
                assert finding["data"]["field"] == "price" and finding["crawl"] == "catalog"
                duplicates = sum(w.stats.get_value(stat_keys.ALERTS_DUPLICATE, 0) for w in (a, b))
                assert duplicates == 1  # the crawl's end: claimed by one, the other told
                findings = sum(w.stats.get_value(stat_keys.FINDINGS, 0) for w in (a, b))
                assert findings == 1
        finally:
            for c in clients:
                await c.aclose()

    asyncio.run(both())
    sync = redis.Redis.from_url(redis_url)
    try:
        found, total = FrontierStore(sync, KEYS).read_findings()
        assert total == 1 and found[0]["site"] == "s.test"
    finally:
        sync.close()


def test_a_notice_is_tried_again_until_the_webhook_takes_it() -> None:
    with WebhookReceiver(fail_first=2) as receiver:
        sender = WebhookSender([receiver.url], tries=4, timeout=5.0, first_wait=0.05)
        assert sender.send({"kind": "finding", "event": "e1", "text": "x"})
        sender.close(30)
        assert receiver.attempts == 3 and receiver.by_kind() == {"finding": 1}
        assert (sender.sent, sender.failed) == (1, 0)
    with WebhookReceiver(fail_first=10) as receiver:
        sender = WebhookSender([receiver.url], tries=2, timeout=5.0, first_wait=0.05)
        sender.send({"kind": "finding", "event": "e2", "text": "x"})
        sender.close(30)
        assert receiver.attempts == 2 and receiver.received() == []
        assert (sender.sent, sender.failed) == (0, 1)


def test_snapshots_for_a_mongodb_that_is_away_are_dropped_and_counted() -> None:
    """The writer's queue takes a snapshot at once, whatever MongoDB does; a batch MongoDB
    fails on every try is dropped (counted), never waited for by the crawl."""
    from distcrawl.base.processes import free_port

    port = free_port()
    writer = SnapshotWriter(f"mongodb://127.0.0.1:{port}/?directConnection=true", "c", timeout=0.2)
    assert writer.put({"_id": "a"}) and writer.put({"_id": "b"})
    writer.close(60)
    assert (writer.written, writer.dropped) == (0, 2)


def test_a_notice_without_redis_is_claimed_once_in_mongodb(mongo_uri: str) -> None:
    from distcrawl.storage.observe import ObserveStore

    database = mongo_uri.rsplit("/", 1)[1].split("?")[0]
    first, second = ObserveStore(mongo_uri, database), ObserveStore(mongo_uri, database)
    try:
        assert first.claim_once("catalog:frontier_outage", 600)
        assert not second.claim_once("catalog:frontier_outage", 600)  # another node: claimed
        assert second.claim_once("catalog:frontier_outage", 0)  # the cooldown is over
    finally:
        first.close()
        second.close()


def test_a_dead_node_a_site_cut_from_its_full_rate_and_an_outage_are_notified(
    redis_url: str, mongo_uri: str
) -> None:
    from distcrawl.frontier.batch import SiteEvent

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            with WebhookReceiver() as receiver:
                watch = _watch(client, "n1", [receiver.url])
                watch.mongo = (mongo_uri, mongo_uri.rsplit("/", 1)[1].split("?")[0])
                watch.nodes_dead(["n7"], 12)
                watch.site_events(
                    [
                        SiteEvent("cut.test", "cut", 1.0, 0.5, "throttled"),
                        SiteEvent("cut.test", "cut", 0.5, 0.25, "throttled"),  # cut deeper
                        SiteEvent("cut.test", "recovered", 0.25, 1.0, "9000"),
                    ],
                    recovery=120.0,
                )
                await watch._work()
                watch.outage("unreachable")
                watch.outage("unreachable")  # a second node of the crawl: claimed once
                await asyncio.sleep(0)
                await asyncio.to_thread(
                    wait_for_notices, receiver, {"frontier_outage", "node_dead", "site_cut"}
                )
                await asyncio.to_thread(watch.sender.close, 10)  # type: ignore[union-attr]
                assert receiver.by_kind() == {"frontier_outage": 1, "node_dead": 1, "site_cut": 1}
                by_kind = {n["kind"]: n for n in receiver.received()}
                assert by_kind["node_dead"]["data"] == {"node": "n7", "requests_returned": 12}
                assert by_kind["site_cut"]["data"]["site"] == "cut.test"
                assert "throttled" in by_kind["site_cut"]["text"]
        finally:
            await client.aclose()

    asyncio.run(run())


def wait_for_notices(receiver: WebhookReceiver, kinds: set[str], timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not kinds <= set(receiver.by_kind()):
        assert time.monotonic() < deadline, receiver.by_kind()
        time.sleep(0.05)
