"""A spider on the frontier sees what it sees on Scrapy: the errback of a download that failed
its last try gets that download's error (and Scrapy logs "Error downloading"), and a redirect
is a request of its own, fetched once, its original acknowledged.

Each crawl runs in a subprocess (this file run as a script), as ``scrapy crawl`` runs: the
asyncio reactor, the ``distcrawl.Frontier`` add-on, a real Redis and a real HTTP server on
127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
from frontier_state import dead_records, leases_left, queued

from distcrawl.frontier.keys import FrontierKeys

pytestmark = pytest.mark.slow

SPIDER = "as_scrapy"
KEYS = FrontierKeys(SPIDER, f"{SPIDER}:start_urls")


class _Handler(BaseHTTPRequestHandler):
    hits: Counter[str]

    def do_GET(self) -> None:
        self.hits[self.path] += 1
        if self.path.startswith("/to/"):
            self.send_response(302)
            self.send_header("Location", "/" + self.path.removeprefix("/to/"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = f"<html><body>{self.path}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[tuple[str, Counter[str]]]:
    hits: Counter[str] = Counter()
    handler = type("Handler", (_Handler,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _crawl(tmp_path: Path, redis_url: str, urls: list[str], **settings: Any) -> dict[str, Any]:
    spec = tmp_path / "spec.json"
    out = tmp_path / "out.json"
    log = tmp_path / "crawl.log"
    spec.write_text(
        json.dumps(
            {"urls": urls, "out": str(out), "log": str(log), "redis_url": redis_url, **settings}
        )
    )
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    # the script imports the tests' helpers as this module does
    tests = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, __file__, str(spec)],
        env=env,
        cwd=tmp_path,  # no scrapy.cfg: a plain Scrapy project's spider, not distcrawl's settings
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    result["log"] = log.read_text()
    return result


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
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    import scrapy
    from scrapy.crawler import CrawlerProcess

    spec = json.loads(Path(spec_path).read_text())
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

    settings = {
        "ADDONS": {"distcrawl.Frontier": 0},
        "REDIS_URL": spec.pop("redis_url"),
        "DISTCRAWL_DRAIN_GRACE": 0.5,
        "LOG_FILE": spec.pop("log"),
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **{k: v for k, v in spec.items() if k.isupper()},
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(AsScrapySpider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    seen["stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, str))}
    Path(spec["out"]).write_text(json.dumps(seen))


if __name__ == "__main__":
    _crawl_main(sys.argv[1])
