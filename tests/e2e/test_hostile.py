"""Hostile input end to end: seeds, queue entries, redirects and names pointing inside, hostile
pages, crawler traps, and credentials. The fast tests check the refusals one by one; the slow
ones run real ``scrapy crawl catalog`` nodes against a real Redis, SecantusDB and demo shop.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pymongo
import pymongo.errors
import pytest
import redis
import scrapy
from crawl_nodes import Node, assert_clean_log, stats_of, stop_all, stored_urls
from crawl_writes import queue_raw
from frontier_state import KEYS, dead_records

from distcrawl import settings as project_settings
from distcrawl.base.processes import free_port
from distcrawl.demo.pages import HOSTILE_LINKS
from distcrawl.node.requests import codec
from distcrawl.node.requests.payload import SHORT_NAMES, BadEntry
from distcrawl.node.seeds.parse import BadSeed, parse_seed
from distcrawl.node.spiders.catalog import CatalogSpider
from distcrawl.servers.process import MongoServer, redis_server_binary

#: the project's DEPTH_LIMIT (50 if it had none), the bound the trap tests check
DEPTH_LIMIT = int(getattr(project_settings, "DEPTH_LIMIT", 0) or 50)


def safety_settings(**extra: Any) -> dict[str, str]:
    """The project's settings (its safety middlewares included), with *extra* on top."""
    return {
        "DEPTH_LIMIT": str(DEPTH_LIMIT),
        **{k: str(v) for k, v in extra.items()},
    }


class Marker:
    """A pickle that creates a file when it is loaded: nothing in distcrawl may load it."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


# -- fast: each refusal has its reason --------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"url": "http://a.test/", "meta": {"proxy": "http://10.0.0.1:3128"}}', "reserved_meta"),
        (b'{"url": "http://a.test/", "meta": {"download_maxsize": 0}}', "reserved_meta"),
        (b'{"url": "http://a.test/", "meta": {"depth": -100000}}', "reserved_meta"),
        (b'{"url": "http://a.test/", "meta": {"dont_obey_robotstxt": true}}', "reserved_meta"),
        (b"\x00\x01\x02\x03binary\xff", "not_utf8"),
        (b"\x00\x01\x02\x03binary", "bad_characters"),
        ("http://shop.example.com\u00af".encode(), "bad_characters"),
        (b"http://2130706433/", "private_address"),
        (b"http://[::ffff:169.254.169.254]/", "private_address"),
        (b"http://shop.test:99999/", "malformed_url"),
        (b"https://" + b"a" * 4100 + b".test/", "url_too_long"),
        (b'{"url": "http://a.test/"' + b" " * 17000 + b"}", "seed_too_large"),
    ],
)
def test_hostile_seeds_are_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(BadSeed) as info:
        parse_seed(raw)
    assert info.value.reason == reason


SPIDER = CatalogSpider()


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"callback": "close"}, "unknown_callback"),  # Scrapy hooks are not callbacks
        ({"callback": "start"}, "bad_callback"),  # defined by the spider, takes no response
        ({"callback": "from_crawler"}, "unknown_callback"),
        ({"callback": "parse", "errback": "close"}, "unknown_errback"),
        ({"callback": "make_request_from_seed"}, "unknown_callback"),  # a distcrawl hook
        ({"callback": "parse", "cb_kwargs": {"response": 1}}, "bad_cb_kwargs"),
        ({"meta": {"proxy": "http://10.0.0.1:3128"}}, "unsafe_meta"),
        ({"meta": {"download_maxsize": 0}}, "unsafe_meta"),
        ({"meta": {"depth": -5}}, "bad_depth"),
        ({"meta": {"depth": "1"}}, "bad_depth"),
        ({"headers": {"X-A\r\nHost": ["evil"]}}, "bad_headers"),
        ({"headers": {"X-A": ["1\r\n\r\nGET / HTTP/1.1"]}}, "bad_headers"),
        ({"cookies": [1, 2]}, "bad_cookies"),
        ({"cookies": {"a": {"b": 1}}}, "bad_cookies"),
    ],
)
def test_hostile_queue_entries_are_refused_with_a_reason(
    entry: dict[str, Any], reason: str
) -> None:
    # the payload's field names as the codec writes them (``payload.SHORT_NAMES``)
    short = {SHORT_NAMES[k]: v for k, v in entry.items()}
    payload = json.dumps({"u": "http://shop.test/", **short})
    with pytest.raises(BadEntry) as info:
        codec.decode(payload, SPIDER, allow_private=True)
    assert info.value.reason == reason


def test_pickles_of_every_protocol_are_refused_unloaded(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(BadEntry) as info:
            codec.decode(pickle.dumps(Marker(marker), protocol=protocol), SPIDER)
        assert info.value.reason == "pickle_refused", protocol
    assert not marker.exists()


def test_refusals_cannot_forge_log_lines() -> None:
    forged = "x\n2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\x00"
    for check in (
        lambda: codec.decode(forged.encode(), SPIDER),
        lambda: parse_seed(forged),
        lambda: parse_seed("http://shop.test/" + forged),
    ):
        with pytest.raises(ValueError) as info:
            check()
        assert "\n" not in str(info.value) and "\x00" not in str(info.value)
        assert "\\n2026" in str(info.value)


def test_unsafe_meta_and_credentials_never_leave_a_node() -> None:
    request = scrapy.Request(
        "http://shop.test/",
        callback=SPIDER.parse,
        meta={"proxy": "http://p:3128", "download_maxsize": 0, "site": "shop.test"},
    )
    request.headers["Authorization"] = "Basic c2VjcmV0OnNlY3JldA=="
    request.headers["Proxy-Authorization"] = "Basic c2VjcmV0OnNlY3JldA=="
    request.headers["X-Kept"] = "1"
    payload = codec.encode(request, SPIDER)
    assert "c2VjcmV0" not in payload  # credentials stay on the node, out of Redis
    back = codec.decode(payload, SPIDER)
    assert back.meta == {"site": "shop.test"}
    assert back.headers.get("X-Kept") == b"1"
    with pytest.raises(ValueError, match="not a callback"):
        codec.encode(scrapy.Request("http://shop.test/", callback=SPIDER.close), SPIDER)


# -- helpers of the slow tests ----------------------------------------------------------------


class Canary:
    """A TCP port standing for an internal service: it records every connection it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


class Redirector:
    """An open redirect on its own port: ``/to?u=URL`` answers 302 to URL."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                target = parse_qs(urlsplit(self.path).query).get("u", [""])[0]
                self.send_response(302 if target else 404)
                if target:
                    self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def to(self, url: str) -> str:
        return f"http://127.0.0.1:{self.port}/to?u={url}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def canary() -> Iterator[Canary]:
    c = Canary()
    yield c
    c.close()


@pytest.fixture
def redirector() -> Iterator[Redirector]:
    r = Redirector()
    yield r
    r.close()


def inject(r: redis.Redis, rid: str, payload: bytes | str, priority: int = 100_000) -> None:
    """Write an entry straight into the queue, as anyone with access to Redis could."""
    shard = KEYS.shard(0)  # an entry of no site: the first shard's
    r.hset(shard.requests, rid, payload)
    queue_raw(r, shard, priority, rid)


def rejected(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(x) for x in r.lrange(KEYS.rejected, 0, -1)]


# -- slow: real nodes -------------------------------------------------------------------------

BAD_SEEDS: list[tuple[bytes, str]] = [
    (b"{not json", "bad_json"),
    (b'{"url": 5}', "missing_url"),
    (b'{"url": "http://a.test/", "priority": "high"}', "bad_priority"),
    (b'{"url": "http://a.test/", "meta": []}', "bad_meta"),
    (b'["http://a.test/"]', "not_an_object"),
    (b"file:///etc/passwd", "bad_scheme"),
    (b"javascript:alert(1)", "bad_scheme"),
    (b"http://", "missing_host"),
    (b"https://a.test/" + b"x" * 5000, "url_too_long"),
    (b"x" * 20_000, "seed_too_large"),
    (b"\x00\xff\xfe\x80garbage", "not_utf8"),
    (b"http://10.0.0.1/", "private_address"),
    (b'{"url": "http://a.test/", "meta": {"proxy": "http://10.0.0.1:3128"}}', "reserved_meta"),
]


@pytest.mark.slow
def test_bad_seeds_are_refused_and_the_next_good_seed_is_crawled(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=40)
    r = redis.Redis.from_url(redis_url)
    # the start list is a queue: the bad seeds are taken first, the good one after them
    r.lpush("catalog:start_urls", *[raw for raw, _ in BAD_SEEDS], shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="seeds",
        settings={**safety_settings(), "DISTCRAWL_SEED_BATCH": 4},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    got = rejected(r)
    assert sorted(x["reason"] for x in got) == sorted(reason for _, reason in BAD_SEEDS)
    assert {x["kind"] for x in got} == {"seed"}
    log = node.log()
    assert log.count("Refused seed") == len(BAD_SEEDS)
    stats = stats_of(log)
    for reason, n in Counter(reason for _, reason in BAD_SEEDS).items():
        assert stats[f"frontier/seeds/refused/{reason}"] == n
    assert_clean_log(log)


@pytest.mark.slow
def test_hostile_queue_entries_are_moved_aside_and_the_node_keeps_going(
    redis_url: str, mongo_uri: str, shop_factory: Any, canary: Canary, tmp_path: Path
) -> None:
    shop = shop_factory(products=40)
    marker = tmp_path / "pickle-was-loaded"
    r = redis.Redis.from_url(redis_url)
    # a payload may name its callback parse (most leave it out)
    good = json.dumps({"u": shop.url + "c/", "cb": "parse"})
    entries: dict[str, tuple[bytes | str, str]] = {
        f"evil-pickle-{p}": (pickle.dumps(Marker(marker), protocol=p), "pickle_refused")
        for p in range(pickle.HIGHEST_PROTOCOL + 1)
    }
    entries |= {
        "evil-truncated": (good[: len(good) // 2], "not_json"),
        "evil-callback": (good.replace('"parse"', '"parse_secret"'), "unknown_callback"),
        "evil-hook": (good.replace('"parse"', '"close"'), "unknown_callback"),
        "evil-proxy": (
            json.dumps({"u": shop.url, "mt": {"proxy": "http://x:1"}}),
            "unsafe_meta",
        ),
        "evil-file": (json.dumps({"u": "file:///etc/passwd"}), "bad_scheme"),
    }
    for rid, (payload, _) in entries.items():
        inject(r, rid, payload)
    # accepted by the codec (queue entries may name private hosts): the address guard refuses it
    inject(r, "evil-internal", json.dumps({"u": f"http://localhost:{canary.port}/admin"}))
    r.lpush("catalog:start_urls", shop.url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="entries",
        settings=safety_settings(DISTCRAWL_ALLOW_PRIVATE=f"127.0.0.1:{shop.port}"),
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert not marker.exists(), "a pickle from Redis was loaded"
    assert canary.connections == 0
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    moved = {x["reason"] for x in rejected(r) if x["kind"] == "queue"}
    assert moved == {reason for _, reason in entries.values()}
    assert not [k for k in r.hkeys(KEYS.shard(0).requests) if k.startswith(b"evil")], "not acked"
    log = node.log()
    assert log.count("Refused queue entry") == len(entries)
    stats = stats_of(log)
    assert stats["frontier/refused/pickle_refused"] == pickle.HIGHEST_PROTOCOL + 1
    assert stats["safety/refused/private_address"] == 1
    assert "localhost resolves to 127.0.0.1" in log
    assert_clean_log(log)


@pytest.mark.slow
def test_redirects_and_names_cannot_reach_inside(
    redis_server: Any,
    redis_url: str,
    mongo_uri: str,
    shop_factory: Any,
    canary: Canary,
    redirector: Redirector,
    tmp_path: Path,
) -> None:
    shop = shop_factory(products=30)
    product = sorted(shop.expected_product_urls())[0]
    inside = [
        f"http://127.0.0.1:{redis_server.port}/",  # the cluster's own Redis
        f"http://localhost:{canary.port}/",  # a name that resolves to loopback
        f"http://2130706433:{canary.port}/",  # 127.0.0.1 in another notation
        f"http://[::ffff:127.0.0.1]:{canary.port}/",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    ]
    r = redis.Redis.from_url(redis_url)
    r.lpush(
        "catalog:start_urls",
        shop.url,
        redirector.to(product),  # a redirect to an allowed place is followed
        *[redirector.to(u) for u in inside],
        f"http://localhost:{canary.port}/",  # a seed naming loopback: refused before DNS
        "http://nowhere.invalid/",  # no address to check: retried, then dead-lettered
    )
    allow = f"127.0.0.1:{shop.port},127.0.0.1:{redirector.port}"
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="inside",
        # nowhere.invalid's robots.txt cannot be fetched (RFC 9309: the site is held); it is
        # given up after 3 s and its page becomes a dead letter
        settings=safety_settings(
            DISTCRAWL_ALLOW_PRIVATE=allow,
            RETRY_TIMES=1,
            RETRY_BACKOFF_BASE=0.1,
            DISTCRAWL_ROBOTS_HOLD_MAX=3,
        ),
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    assert canary.connections == 0
    assert "SECURITY ATTACK" not in redis_server.log_path.read_text()
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    log = node.log()
    stats = stats_of(log)
    # the redirect to the crawl's own Redis is refused as such, the three loopback ones as private
    assert stats["safety/refused/own_address"] == 1
    assert stats["safety/refused/private_address"] == 3
    assert stats["safety/refused/metadata_address"] == 1
    assert stats["frontier/seeds/refused/private_address"] == 1
    assert stats["downloader/response_status_count/302"] == 1 + len(inside)
    # logged once per place: its robots.txt (fetched first, no rules) or the page itself
    refused = rf"Refused http://localhost:{canary.port}/(robots\.txt)?: private_address"
    assert re.search(refused, log)
    assert stats["safety/unresolved"] == 2
    dead = dead_records(r)
    assert [d["url"] for d in dead] == ["http://nowhere.invalid/"]
    # Scrapy logs the last failure of a dead-lettered download with its traceback; no other
    assert log.count("Traceback") == log.count("Error downloading <GET http://nowhere.invalid/>")
    assert_clean_log(log.replace("Traceback", "Trace back"))


@pytest.mark.slow
def test_a_node_never_fetches_its_own_servers_whatever_allow_private_says(
    redis_server: Any,
    redis_url: str,
    mongo_uri: str,
    shop_factory: Any,
    redirector: Redirector,
    tmp_path: Path,
) -> None:
    """DISTCRAWL_ALLOW_PRIVATE=127.0.0.1, as the README writes it, allows the shop and anything
    else on loopback: a site that redirects the node to its own Redis, its MongoDB or the
    crawl's dashboard (in several notations) is refused all the same."""
    from distcrawl.web.app import WebConfig
    from distcrawl.web.server import DashboardServer

    shop = shop_factory(products=20)
    dashboard = DashboardServer(
        WebConfig(
            keys=KEYS, redis_url=redis_url, heartbeat_timeout=30.0, token=None, allow_private=False
        ),
        host="127.0.0.1",
    ).start()
    mongo_port = urlsplit(mongo_uri).port
    own = [
        f"http://127.0.0.1:{redis_server.port}/",
        f"http://localhost:{redis_server.port}/x",
        f"http://2130706433:{mongo_port}/",
        f"http://[::ffff:127.0.0.1]:{mongo_port}/",
        f"http://127.1:{dashboard.port}/api/status",
        f"http://localhost:{dashboard.port}/",
    ]
    r = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + 60
        while not r.hlen(KEYS.dashboards) and time.monotonic() < deadline:
            time.sleep(0.05)  # the dashboard records where it listens as it starts
        r.lpush("catalog:start_urls", shop.url, *[redirector.to(u) for u in own])
        node = Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id="own",
            settings=safety_settings(DISTCRAWL_ALLOW_PRIVATE="127.0.0.1"),
            env={"DISTCRAWL_ALLOW_PRIVATE": "127.0.0.1"},
        )
        try:
            assert node.wait() == 0
        finally:
            node.kill()
    finally:
        dashboard.stop()
    log = node.log()
    stats = stats_of(log)
    assert stats["safety/refused/own_address"] == len(own), log[-3000:]
    assert stats["downloader/response_status_count/302"] == len(own)
    assert "SECURITY ATTACK" not in redis_server.log_path.read_text()
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    assert "is the crawl's Redis" in log and "is the crawl's dashboard" in log
    r.close()


#: hostile pages of the shop, seeded so that each one is met
HOSTILE_PATHS = tuple(path for path, _ in HOSTILE_LINKS)


@pytest.mark.slow
def test_hostile_shop_crawl_ends_and_stores_every_real_product(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=120, hostile=True)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    # the hostile pages are linked from the shop too; seeding them makes sure each is met
    r.lpush("catalog:start_urls", shop.url, *[base + p for p in HOSTILE_PATHS])
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"hostile{i}",
            # the dense page is cut by its count of links, whatever the machine's speed (the
            # parse-time cut has a test of its own)
            settings=safety_settings(DISTCRAWL_MAX_PARSE_SECONDS=0),
        )
        for i in (1, 2)
    ]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
    paths = [e["path"] for e in shop.request_log()]
    assert "/private/secret" not in paths, "robots.txt was not obeyed"
    assert sum(p.startswith("/trap/") for p in paths) <= DEPTH_LIMIT + 1
    assert sum(p.startswith("/calendar/") for p in paths) <= 2 * DEPTH_LIMIT + 1
    assert sum(p.startswith("/loop/") for p in paths) <= 5
    totals: Counter[str] = Counter()
    for node in nodes:
        assert_clean_log(node.log())
        assert "Spider closed (finished)" in node.log()
        totals.update(stats_of(node.log()))
    assert totals["robotstxt/forbidden"] == 1
    # two oversized bodies: one announced by Content-Length, one chunked (Scrapy cancels that
    # one without a message)
    assert totals["safety/refused/too_large"] == 2
    # the dense page: its links read up to the limit, its new links followed up to theirs
    assert totals["safety/page_cut/too_many_links"] == 1
    assert totals["safety/links_unread"] > 0
    assert totals["safety/links_dropped/too_many_links"] > 0
    dense = [e for e in shop.request_log() if e["path"].startswith("/c/") and e["status"] == 404]
    assert 0 < len(dense) <= int(project_settings.DISTCRAWL_MAX_FOLLOW_PER_PAGE)
    assert totals["safety/refused/redirect_loop"] == 1
    assert totals["catalog/pages/not_html"] == 1
    assert totals["depth/request_ignored_count"] >= 2  # the trap and the calendar
    assert totals["log_count/ERROR"] == 0


@pytest.mark.slow
def test_page_budget_is_shared_by_the_cluster(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    budget = 40
    shop = shop_factory(products=200)
    r = redis.Redis.from_url(redis_url)
    r.lpush("catalog:start_urls", shop.url)
    nodes = [
        Node(
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id=f"budget{i}",
            settings=safety_settings(DISTCRAWL_MAX_PAGES_PER_SITE=budget),
        )
        for i in (1, 2)
    ]
    try:
        assert [n.wait() for n in nodes] == [0, 0]
    finally:
        stop_all(nodes)
    pages = [e["path"] for e in shop.request_log() if e["path"] != "/robots.txt"]
    assert len(pages) == budget
    assert 0 < len(stored_urls(mongo_uri)) < len(shop.expected_product_urls())
    refused = 0
    for node in nodes:
        log = node.log()
        assert log.count("used up its page budget") <= 1
        refused += stats_of(log).get("safety/refused/page_budget", 0)
        assert_clean_log(log)
    assert refused > 0
    assert int(r.get("{catalog}:pages:127.0.0.1") or 0) >= budget


# -- credentials ------------------------------------------------------------------------------

PASSWORD = "Hunter2-never-in-logs-7f3a"


class PasswordRedis:
    """valkey-server with ``requirepass`` (from a config file, not the command line)."""

    def __init__(self, home: Path) -> None:
        self.port = free_port()
        home.mkdir(parents=True, exist_ok=True)
        self.config = home / "valkey.conf"
        self.config.write_text(
            f'bind 127.0.0.1\nport {self.port}\nrequirepass {PASSWORD}\nsave ""\n'
            f"dir {home}\nappendonly no\nprotected-mode yes\n"
        )
        self.log = home / "valkey.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(redis_server_binary()), str(self.config)], stdout=out, stderr=out
            )
        self.url = f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"
        client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                threading.Event().wait(0.05)
        client.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.mark.slow
def test_password_protected_redis_and_no_password_anywhere(
    mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    server = PasswordRedis(tmp_path / "valkey")
    try:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port).ping()  # no password: no access
        shop = shop_factory(products=30)
        r = redis.Redis.from_url(server.url)
        r.lpush("catalog:start_urls", shop.url)
        node = Node(
            redis_url=server.url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id="auth",
            settings=safety_settings(),
        )
        try:
            assert node.wait() == 0
        finally:
            node.kill()
        assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
        log = node.log()
        assert PASSWORD not in log
        assert "redis://:***@127.0.0.1" in log
        # node stats travel in heartbeats: nothing in Redis carries the password either
        for key in r.scan_iter("*"):
            kind = r.type(key)
            if kind == b"string":
                assert PASSWORD.encode() not in (r.get(key) or b"")
            elif kind == b"hash":
                assert not any(PASSWORD.encode() in v for v in r.hgetall(key).values())
            elif kind == b"list":
                assert not any(PASSWORD.encode() in v for v in r.lrange(key, 0, -1))
        env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "distcrawl.settings"}
        env |= {"REDIS_URL": server.url, "MONGO_URI": mongo_uri}
        for args in (["--json", "--sample", "0"], ["--sample", "0"]):
            status = subprocess.run(
                [sys.executable, "-m", "scrapy", "status", "catalog", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert status.returncode == 0, status.stderr[-2000:]
            assert str(server.port) in status.stdout  # it did reach the cluster
            assert PASSWORD not in status.stdout + status.stderr
        assert_clean_log(log)
    finally:
        server.stop()


class TlsProxy:
    """TLS in front of a plaintext Redis-protocol server, with a self-signed certificate for
    127.0.0.1: the bundled valkey-server is built without TLS (``--tls-port`` fails with
    "Failed finding TLS support"), so this stands for a TLS-enabled Redis."""

    def __init__(self, home: Path, target_port: int) -> None:
        import asyncio
        import datetime
        import ipaddress
        import ssl

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        home.mkdir(parents=True, exist_ok=True)
        self.ca = home / "ca.pem"
        self.ca.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file = home / "key.pem"
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.ca, key_file)
        self.tls_connections = 0

        async def pipe(reader: Any, writer: Any) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def handle(client_r: Any, client_w: Any) -> None:
            self.tls_connections += 1
            server_r, server_w = await asyncio.open_connection("127.0.0.1", target_port)
            await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


@pytest.mark.slow
def test_rediss_url_with_a_password_reaches_redis_over_tls(
    mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    server = PasswordRedis(tmp_path / "valkey")
    proxy = TlsProxy(tmp_path / "tls", server.port)
    try:
        url = f"rediss://:{PASSWORD}@127.0.0.1:{proxy.port}/0?ssl_ca_certs={proxy.ca}"
        shop = shop_factory(products=20)
        redis.Redis.from_url(url).lpush("catalog:start_urls", shop.url)
        with pytest.raises(redis.ConnectionError):  # an unverified certificate is refused
            redis.Redis.from_url(f"rediss://:{PASSWORD}@127.0.0.1:{proxy.port}/0").ping()
        node = Node(
            redis_url=url,
            mongo_uri=mongo_uri,
            log_dir=tmp_path,
            node_id="tls",
            settings=safety_settings(DISTCRAWL_MAX_PAGES_PER_SITE=1000),
        )
        try:
            assert node.wait() == 0
        finally:
            node.kill()
        assert set(stored_urls(mongo_uri)) == shop.expected_product_urls()
        assert proxy.tls_connections >= 2  # the frontier and the page budget
        log = node.log()
        assert PASSWORD not in log and "rediss://:***@127.0.0.1" in log
        assert_clean_log(log)
    finally:
        proxy.close()
        server.stop()


class AuthMongo(MongoServer):
    """SecantusDB with ``--auth`` (SCRAM-SHA-256) once a user has been created."""

    auth = False

    def command(self) -> list[str]:
        return super().command() + (["--auth"] if self.auth else [])


@pytest.mark.slow
def test_mongodb_with_authentication_and_no_password_in_logs(
    redis_url: str, shop_factory: Any, tmp_path: Path
) -> None:
    server = AuthMongo(data_dir=tmp_path / "mongo" / "data", log_path=tmp_path / "mongo.log")
    server.start()
    try:
        admin = server.client()
        admin.admin.command(
            "createUser", "crawler", pwd=PASSWORD, roles=[{"role": "readWrite", "db": "shop"}]
        )
        admin.close()
        server.stop()
        server.auth = True
        server.start()
        with pytest.raises(pymongo.errors.OperationFailure):
            server.client().shop.products.find_one()
        uri = (
            f"mongodb://crawler:{PASSWORD}@127.0.0.1:{server.port}/shop"
            "?directConnection=true&authSource=admin"
        )
        shop = shop_factory(products=20)
        redis.Redis.from_url(redis_url).lpush("catalog:start_urls", shop.url)
        node = Node(
            redis_url=redis_url,
            mongo_uri=uri,
            log_dir=tmp_path,
            node_id="mongo-auth",
            settings=safety_settings(),
        )
        try:
            assert node.wait() == 0
        finally:
            node.kill()
        assert set(stored_urls(uri)) == shop.expected_product_urls()
        log = node.log()
        assert PASSWORD not in log
        assert_clean_log(log)
    finally:
        server.stop()


@pytest.mark.slow
def test_hostile_bench_runs_and_reports() -> None:
    bench = Path(__file__).resolve().parents[2] / "bench" / "hostile.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--products", "40", "--injected", "120", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        # a smoke run writes no result file into bench/results/
        env={**os.environ, "DISTCRAWL_BENCH_RESULTS": ""},
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the bench's timing checks (loop stall, time against a plain crawl) are the bench's: a
    # smoke run checks what it reports, not how fast the machine was
    assert (out["stored"], out["refused"], out["marker_created"]) == (40, 120, False)
    assert out["hostile_pages"]["too_large"] == 2
    assert out["exit_codes"] == [0, 0] and out["finished"]
    assert "max_loop_stall_s" in out and "hostile_to_plain_ratio" in out
