"""A spider on the frontier sees what it sees on Scrapy: the errback of a download that failed
its last try gets that download's error (and Scrapy logs "Error downloading"), and a redirect
is a request of its own, fetched once, its original acknowledged.

Each crawl runs in a subprocess (this file run as a script), as ``scrapy crawl`` runs: the
asyncio reactor, the ``distcrawl.Frontier`` add-on, a real Redis and a real HTTP server on
127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from frontier_state import dead_records, leases_left, queued
from scrapy_script import frontier_settings, run_script, serve_paths, write_report

from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow

SPIDER = "as_scrapy"
KEYS = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")


@pytest.fixture
def site() -> Iterator[tuple[str, Counter[str]]]:
    with serve_paths() as served:
        yield served


def _crawl(tmp_path: Path, redis_url: str, urls: list[str], **settings: Any) -> dict[str, Any]:
    return run_script(__file__, tmp_path, redis_url, urls=urls, **settings)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: connections to it are refused


def test_errback_gets_the_last_download_error(tmp_path: Path, redis_url: str) -> None:
    port = _closed_port()
    # /gone has an errback; /lost has none, so Scrapy reports its failure itself
    gone, lost = f"http://127.0.0.1:{port}/gone", f"http://127.0.0.1:{port}/lost"
    result = _crawl(tmp_path, redis_url, [gone, lost], RETRY_TIMES=1, RETRY_BACKOFF_BASE=0.05)
    assert result["errors"] == [[gone, "DownloadConnectionRefusedError"]]
    assert result["stats"]["retry/count"] == 2
    assert result["stats"]["frontier/dead_lettered"] == 2
    log = result["log"]
    assert f"Gave up retrying <GET {gone}>" in log
    assert f"Error downloading <GET {lost}>" in log
    assert f"Error downloading <GET {gone}>" not in log  # handled by its errback, as on Scrapy
    assert "dead-lettered after its last try" not in log
    # the dead letters are kept for the operator all the same
    r = redis.Redis.from_url(redis_url)
    assert sorted(d["url"] for d in dead_records(r, KEYS)) == [gone, lost]
    assert leases_left(r, KEYS) == []


def test_a_redirect_is_a_request_of_its_own(
    tmp_path: Path, redis_url: str, site: tuple[str, Counter[str]]
) -> None:
    base, hits = site
    urls = [f"{base}/to/a", f"{base}/to/b", f"{base}/c", f"{base}/to/c"]
    result = _crawl(tmp_path, redis_url, urls)
    # each redirect's target is fetched and parsed once; /c, met twice, once (Scrapy's rule)
    assert sorted(result["parsed"]) == [f"{base}/a", f"{base}/b", f"{base}/c"]
    assert hits == {"/to/a": 1, "/to/b": 1, "/c": 1, "/to/c": 1, "/a": 1, "/b": 1}
    redirected = {u: r for u, r in result["redirects"].items() if r}
    assert redirected == {f"{base}/a": [f"{base}/to/a"], f"{base}/b": [f"{base}/to/b"]}
    stats = result["stats"]
    assert stats["frontier/enqueued"] == 6  # 4 start requests, 2 redirects (/c's is filtered)
    assert stats["frontier/acked"] == 6
    assert stats["dupefilter/filtered"] == 1
    r = redis.Redis.from_url(redis_url)
    assert leases_left(r, KEYS) == [] and queued(r, KEYS) == 0


# -- the subprocess ----------------------------------------------------------------------------


def _crawl_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    settings = frontier_settings(spec)
    import scrapy
    from scrapy.crawler import CrawlerProcess

    seen: dict[str, Any] = {"parsed": [], "redirects": {}, "errors": []}

    class AsScrapySpider(scrapy.Spider):
        name = SPIDER

        async def start(self) -> Any:
            for url in spec["urls"]:
                yield scrapy.Request(url, errback=None if "/lost" in url else self.failed)

        def parse(self, response: Any) -> None:
            seen["parsed"].append(response.url)
            seen["redirects"][response.url] = response.meta.get("redirect_urls", [])

        def failed(self, failure: Any) -> None:
            seen["errors"].append([failure.request.url, type(failure.value).__name__])

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(AsScrapySpider)
    process.crawl(crawler)
    process.start()
    write_report(spec, seen, crawler)


if __name__ == "__main__":
    _crawl_main(sys.argv[1])
