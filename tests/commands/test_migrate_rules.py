"""``distcrawl migrate`` of a queue scrapy-redis itself wrote for a RedisCrawlSpider: every
rule-made request moves (its link text, lxml's string type in the pickle, comes back a str),
and no fingerprint is copied for a request that did not move."""

from __future__ import annotations

import pickle
from typing import Any

import redis
import scrapy
from fixtures_cli import run_migrate
from frontier_state import queued_values
from probe_spiders.redis_examples import MyCrawler
from scrapy.http import HtmlResponse
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import SpiderPriorityQueue

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import FrontierStore
from distcrawl.node.compat import scrapy_redis_fingerprint
from distcrawl.node.requests import callbacks, codec
from distcrawl.ops.migrate import entry_request, load_entry

SPIDER = "mycrawler_redis"
PAGE = b"""<html><body>
<a href="/c/toys/">Toys <b>and games</b></a>
<a href="/c/books/">Books</a>
<a href="/p/1.html">Product one</a>
<a href="/p/2.html"><img src="x.png"></a>
</body></html>"""


def _rule_requests(spider: Any) -> list[scrapy.Request]:
    """What the spider's rules make of a page, through CrawlSpider's own rule loop."""
    seed = scrapy.Request("http://shop.test/")
    response = HtmlResponse(seed.url, body=PAGE, encoding="utf-8", request=seed)
    return [r for r in spider._requests_to_follow(response) if isinstance(r, scrapy.Request)]


def _scrapy_redis_wrote(r: redis.Redis, requests: list[scrapy.Request], spider: Any) -> None:
    """The queue and dupefilter as scrapy-redis' own classes write them (its default pickle
    serializer, the example project's SpiderPriorityQueue)."""
    queue = SpiderPriorityQueue(r, spider, f"{SPIDER}:requests")
    seen = RFPDupeFilter(r, f"{SPIDER}:dupefilter")
    for request in requests:
        assert not seen.request_seen(request)
        queue.push(request)


def test_rule_made_requests_of_a_pickled_queue_all_move(redis_url: str) -> None:
    spider = MyCrawler()
    made = _rule_requests(spider)
    assert len(made) == 4 and all(r.callback == spider._callback for r in made)
    # lxml's string type, which a restricted unpickler loads as a plain str
    assert any(type(r.meta["link_text"]) is not str for r in made)
    r = redis.Redis.from_url(redis_url)
    _scrapy_redis_wrote(r, made, spider)

    code, summary, err = run_migrate(redis_url, SPIDER, "--trust-pickle")
    assert code == 0, err
    assert (summary["entries"], summary["migrated"], summary["refused"]) == (4, 4, 0)
    assert summary["fingerprints_copied"] == 4

    keys = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")
    values = [v for s in keys.all_shards() for v in queued_values(r, s).values()]
    back = [codec.decode(v.decode().rpartition("\n")[2], spider) for v in values]
    assert sorted(b.url for b in back) == sorted(m.url for m in made)
    for request in back:
        assert request.callback == spider._callback  # dispatched by its rule, as on Scrapy
        assert type(request.meta["link_text"]) is str
    texts = {b.url: b.meta["link_text"] for b in back}
    assert texts["http://shop.test/c/toys/"] == "Toys and games"


def test_lxml_link_text_loads_as_str_without_loading_lxml() -> None:
    spider = MyCrawler()
    request = _rule_requests(spider)[0]
    raw = pickle.dumps({**request.to_dict(spider=spider)}, protocol=-1)
    assert b"_ElementUnicodeResult" in raw
    data = load_entry(raw, trust_pickle=True)
    assert type(data["meta"]["link_text"]) is str
    _, payload = entry_request(data)
    assert codec.decode(payload, spider).callback == spider._callback
    assert callbacks.RULE_REFERENCE in payload


def test_no_fingerprint_is_copied_for_a_request_that_did_not_move(redis_url: str) -> None:
    spider = MyCrawler()
    made = _rule_requests(spider)
    # a rule's process_request could put in meta what no queue entry can carry
    made[0].meta["when"] = {1, 2}
    r = redis.Redis.from_url(redis_url)
    _scrapy_redis_wrote(r, made, spider)

    code, summary, _ = run_migrate(redis_url, SPIDER, "--trust-pickle")
    assert code == 1
    assert summary["refused_by_reason"] == {"unqueueable": 1}
    assert (summary["migrated"], summary["fingerprints"]) == (3, 4)
    assert (summary["fingerprints_copied"], summary["fingerprints_withheld"]) == (3, 1)
    keys = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")
    store = FrontierStore(r, keys)
    # the refused request's URL is still new to the frontier: a crawl that finds it fetches it
    assert store.mark_seen([scrapy_redis_fingerprint(made[0])]) == 1
    assert store.mark_seen([scrapy_redis_fingerprint(made[1])]) == 0


def test_unread_pickles_withhold_the_whole_dupefilter(redis_url: str) -> None:
    spider = MyCrawler()
    made = _rule_requests(spider)
    r = redis.Redis.from_url(redis_url)
    _scrapy_redis_wrote(r, made, spider)
    # without --trust-pickle no entry is read, so no fingerprint is known to be safe to copy
    code, summary, err = run_migrate(redis_url, SPIDER)
    assert code == 1
    assert summary["refused_by_reason"] == {"pickle_refused": 4}
    assert (summary["fingerprints_copied"], summary["fingerprints_withheld"]) == (0, 4)
    assert "--trust-pickle" in err
    keys = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")
    store = FrontierStore(r, keys)
    assert store.mark_seen([scrapy_redis_fingerprint(made[0])]) == 1
