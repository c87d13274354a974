"""A spider on the frontier ends and idles as on Scrapy, and keeps what no queue entry can
carry in memory as Scrapy does: a crawl that never queues a request ends, ``finished``; a
``spider_idle`` handler is called once per idleness and may keep the spider open or close it
with its own reason; ``data:`` and unknown schemes reach Scrapy's downloader; a request JSON
cannot carry is crawled from memory, counted and logged once.

Each crawl runs in a subprocess (this file run as a script), as ``scrapy crawl`` runs: the
asyncio reactor, the ``distcrawl.Frontier`` add-on, a real Redis and a real HTTP server on
127.0.0.1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from frontier_state import leases_left, queued
from scrapy_script import frontier_settings, run_script, serve_paths, write_report

from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow

SPIDER = "semantics"
KEYS = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")


@pytest.fixture
def site() -> Iterator[str]:
    with serve_paths() as (base, _hits):
        yield base


def _crawl(tmp_path: Path, redis_url: str, case: str, base: str = "") -> dict[str, Any]:
    return run_script(__file__, tmp_path, redis_url, case=case, base=base)


def test_a_crawl_of_items_only_ends_finished(tmp_path: Path, redis_url: str) -> None:
    result = _crawl(tmp_path, redis_url, "items_only")
    stats = result["stats"]
    assert stats["finish_reason"] == "finished"
    assert stats["item_scraped_count"] == 2
    assert "waits for the first seed" not in result["log"]


def test_idle_handlers_keep_the_spider_open_or_close_it_with_their_reason(
    tmp_path: Path, redis_url: str, site: str
) -> None:
    result = _crawl(tmp_path, redis_url, "idle", site)
    # idle once after the first page (a handler queues a data: request and keeps it open),
    # once more after that request (a handler closes it with its own reason)
    assert result["idle_calls"] == 2
    assert result["parsed"] == [f"{site}/first", "data:,later"]
    assert result["stats"]["finish_reason"] == "custom_reason"
    r = redis.Redis.from_url(redis_url)
    assert leases_left(r, KEYS) == [] and queued(r, KEYS) == 0


def test_other_schemes_reach_scrapys_downloader_from_memory(tmp_path: Path, redis_url: str) -> None:
    result = _crawl(tmp_path, redis_url, "schemes")
    assert result["parsed"] == ["data:,hello"]
    assert result["bodies"] == ["hello"]
    assert result["errors"] == [["foo://bar", "NotSupported"]]
    stats = result["stats"]
    assert stats["frontier/in_memory/bad_scheme"] == 2
    assert stats["scheduler/enqueued/memory"] == 2
    assert stats["scheduler/dequeued/memory"] == 2
    assert stats["finish_reason"] == "finished"
    assert "frontier/refused/bad_scheme" not in stats
    r = redis.Redis.from_url(redis_url)
    assert leases_left(r, KEYS) == [] and queued(r, KEYS) == 0


def test_a_request_json_cannot_carry_is_crawled_from_memory(
    tmp_path: Path, redis_url: str, site: str
) -> None:
    result = _crawl(tmp_path, redis_url, "unserializable", site)
    assert sorted(result["parsed"]) == [f"{site}/a", f"{site}/b", f"{site}/plain"]
    stats = result["stats"]
    assert stats["scheduler/unserializable"] == 2
    assert stats["frontier/in_memory/unqueueable"] == 2
    assert stats["scheduler/enqueued/memory"] == 2
    assert stats["frontier/enqueued"] == 1  # /plain, through Redis
    assert stats["frontier/acked"] == 1
    # handed to the engine: from Redis (counted as the stats are read) and from memory
    assert stats["frontier/started"] == stats["scheduler/dequeued/redis"] == 1
    assert stats["scheduler/dequeued/memory"] == 2
    assert stats["scheduler/dequeued"] == 3
    log = result["log"]
    assert log.count("Unable to serialize request") == 1
    assert "meta key 'callable' holds a function" in log


# -- the subprocess ----------------------------------------------------------------------------


def _crawl_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    settings = frontier_settings(spec)
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.exceptions import CloseSpider, DontCloseSpider

    case, base = spec.pop("case"), spec.pop("base")
    seen: dict[str, Any] = {"parsed": [], "bodies": [], "errors": [], "idle_calls": 0}

    class SemanticsSpider(scrapy.Spider):
        name = SPIDER

        async def start(self) -> Any:
            if case == "items_only":
                yield {"n": 1}
                yield {"n": 2}
            elif case == "idle":
                yield scrapy.Request(f"{base}/first")
            elif case == "schemes":
                yield scrapy.Request("data:,hello")
                yield scrapy.Request("foo://bar", errback=self.failed)
            elif case == "unserializable":
                for path in ("a", "b"):
                    yield scrapy.Request(f"{base}/{path}", meta={"callable": lambda: None})
                yield scrapy.Request(f"{base}/plain")

        def parse(self, response: Any) -> None:
            seen["parsed"].append(response.url)
            if response.url.startswith("data:"):
                seen["bodies"].append(response.text)

        def failed(self, failure: Any) -> None:
            seen["errors"].append([failure.request.url, type(failure.value).__name__])

    def idle(spider: Any) -> None:
        seen["idle_calls"] += 1
        if case != "idle":
            return
        if seen["idle_calls"] == 1:
            crawler.engine.crawl(scrapy.Request("data:,later"))
            raise DontCloseSpider
        raise CloseSpider("custom_reason")

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SemanticsSpider)
    crawler.signals.connect(idle, signal=signals.spider_idle)
    process.crawl(crawler)
    process.start()
    write_report(spec, seen, crawler)


if __name__ == "__main__":
    _crawl_main(sys.argv[1])
