"""The guides' examples: extraction and site profiles on the demo shop, the shop that changes,
a politeness budget, the MongoDB store, and a scrapy-redis crawl moved into the frontier."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import redis
import scrapy
from docshell import Shell, block, free_port

pytestmark = pytest.mark.slow


def test_extraction_and_profile_examples(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work", ports={"8000": str(free_port())})
    try:
        out = sh.run_ok(block("shop-extract")).output
        product = json.loads(next(ln for ln in out.splitlines() if ln.startswith('{"input"')))
        assert product["kind"] == "product", product
        assert "DC-000001" in json.dumps(product), product

        tried = sh.run_ok(block("profile-try")).output
        assert "profile" in tried, tried
        assert "DC-000001" in tried, tried

        sh.run_ok(block("profile-draft"))
        draft = (sh.workdir / "my-shop.toml").read_text()
        assert 'name = "my-shop"' in draft, draft

        explained = sh.run_ok(block("explain")).output
        assert re.search(r"sku\s+DC-000001", explained), explained
    finally:
        sh.close()


def test_the_shop_that_changes(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work", ports={"8000": str(free_port())})
    try:
        out = sh.run_ok(block("shop-changes"), timeout=120).output
        assert '"changes"' in out or '"added"' in out, out
    finally:
        sh.close()


def test_politeness_and_mongodb_examples(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work", ports={"8000": str(free_port())})
    try:
        out = sh.run_ok(block("politeness"), timeout=400).output
        assert re.search(r"stored products\s+30\b", out), out
        stored = sh.run_ok(block("mongodb-query"), timeout=400).output
        assert re.search(r"^20 products$", stored, re.M), stored
        assert "'price_history'" in stored, stored
    finally:
        sh.close(homes=(tmp_path / "work" / ".distcrawl", tmp_path / "work" / "demo-home"))


def test_politeness_site_rules_examples(tmp_path: Path) -> None:
    """The guide's Crawl-delay, robots.txt and server examples, one after another as a
    reader runs them."""
    sh = Shell(tmp_path / "work", ports={"8000": str(free_port())})
    try:
        out = sh.run_ok(block("politeness-crawl-delay"), timeout=400).output
        assert re.search(r"stored products\s+4\b", out), out
        logs = sh.stderr(tail=10**7)
        assert "asks for a Crawl-delay of 1s: one request at a time" in logs, logs[-3000:]

        out = sh.run_ok(block("politeness-crawl-delay-cap"), timeout=400).output
        assert re.search(r"stored products\s+2\b", out), out
        logs = sh.stderr(tail=10**7)
        assert "Crawl-delay of 120s: capped at DISTCRAWL_MAX_CRAWL_DELAY" in logs, logs[-3000:]

        out = sh.run_ok(block("politeness-robots"), timeout=400).output
        assert re.search(r"robots_unavailable\s+1\b", out), out
        assert "re-queued 1 of 1 matching dead letters" in out, out
        assert re.search(r"stored products\s+10\b", out), out
        logs = sh.stderr(tail=10**7)
        assert "given up, the site's requests become dead letters" in logs, logs[-3000:]

        out = sh.run_ok(block("politeness-servers"), timeout=400).output
        assert "Servers with more than one site" in out, out
        assert re.search(r"127\.0\.0\.1\s+3\b", out), out
        assert re.search(r"stored products\s+30\b", out), out
    finally:
        work = tmp_path / "work"
        homes = ("delay-home", "cap-home", "robots-home", "servers-home")
        sh.close(homes=tuple(work / h for h in homes))


def _scrapy_redis_crawl(redis_url: str) -> int:
    """What stopped scrapy-redis nodes leave: a pickled priority queue and a dupefilter."""
    from scrapy_redis import picklecompat

    client = redis.Redis.from_url(redis_url)
    queued = 0
    for i in range(5):
        request = scrapy.Request(f"http://127.0.0.1:9/p/{i}.html", priority=100)
        data = picklecompat.dumps({**request.to_dict(), "callback": "parse"})
        client.zadd("catalog:requests", {data: -request.priority})
        client.sadd("catalog:dupefilter", f"{i:040x}")
        queued += 1
    client.close()
    return queued


def test_migrating_a_scrapy_redis_crawl(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work")
    try:
        url = sh.run_ok('eval "$(distcrawl services start)"\necho "$REDIS_URL"\n').output
        queued = _scrapy_redis_crawl(url.strip().splitlines()[-1])
        out = sh.run_ok(block("migrate")).output
        summary = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
        assert summary["migrated"] == queued and summary["refused"] == 0, summary
        assert summary["fingerprints_copied"] == queued, summary
    finally:
        sh.close()
