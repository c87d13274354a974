"""Hostile input during a crawl: every product stored, every hostile entry refused, no pickle run.

Crawls the demo shop with its hostile pages on (20 MB page, the same sent chunked without
Content-Length, a 9 MiB page of 400,000 links, binary file, broken JSON-LD, redirect loop,
endless pagination, calendar trap, a page robots.txt disallows) on K
``scrapy crawl`` nodes with the MongoDB pipeline on (a fresh valkey-server and SecantusDB per
run). Once the crawl is under way it injects a mix of hostile items, half of them seeds
(LPUSH to ``catalog:start_urls``), half queue entries written straight into the frontier
(``{catalog}:req`` + ``{catalog}:queue``), among them real pickles that create a marker file
if anything loads them, and requests aimed at the cluster's own Redis, loopback names and the
cloud metadata address. Then it checks:

- ``stored`` == ``expected``: every real product is in MongoDB;
- ``refused`` == ``injected``: each hostile item was refused with a reason, either moved
  aside into ``{catalog}:rejected`` (bounded at 10,000 entries) or refused by the address
  guard after DNS (counted ``safety/refused/<reason>`` in the nodes' stats: a private or
  metadata address, the crawl's own Redis in any notation, a scheme);
- ``marker_created`` is false, and Redis never saw an HTTP request;
- both oversized bodies are counted ``too_large`` (``hostile_pages.too_large`` == 2);
- ``max_loop_stall_s``, the longest stall of a node's event loop (``node/loop_stall_max_ms``),
  stays under 2 s: the dense page is parsed off the loop, its links bounded;
- ``hostile_to_plain_ratio``: the crawl's time over that of the same crawl of the shop without
  its hostile pages and injection (run first, ``plain_elapsed_s``; ``--no-plain`` skips it),
  under 2.

The nodes only may reach the shop's port (``DISTCRAWL_ALLOW_PRIVATE=127.0.0.1:<port>``).
Exit status 1 when a check fails.

    .venv/bin/python bench/hostile.py --products 300 --nodes 2 --injected 1000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pymongo
import redis

from distcrawl.base.names import reasons
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.spec import level_score

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, Services, ShopProcess, page_fetches, stats_of, wait_all
from _results import write_result
from _settings import START_URLS_KEY

from distcrawl.demo.pages import HOSTILE_LINKS

#: the frontier's key prefix (hash tag) for the catalog spider
FRONTIER = "{catalog}"
#: an entry of no site belongs to the first shard
SHARD0 = FrontierKeys("catalog", "catalog:start_urls").shard(0)
#: hostile pages of the shop, seeded so that each one is met
HOSTILE_PATHS = tuple(path for path, _ in HOSTILE_LINKS)
#: the injection starts once the shop has answered this many product pages
START_AFTER_PRODUCTS = 10
#: injected items are written in this many batches, a short pause apart
BATCHES = 20
#: the longest stall of a node's event loop allowed (seconds)
MAX_LOOP_STALL = 2.0
#: the hostile crawl may take at most this many times the plain one
MAX_RATIO = 2.0
#: the address guard's refusals of a queue entry (``safety/refused/<reason>``)
ADDRESS_GUARD_REASONS = (
    reasons.PRIVATE_ADDRESS,
    reasons.OWN_ADDRESS,
    reasons.METADATA_ADDRESS,
    reasons.BAD_SCHEME,
)


class Marker:
    """Pickled, it opens (creates) the marker file when loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


class Touch:
    """Pickled, it runs ``touch`` on the marker file when loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.path}",))


def hostile_seeds(n: int, rng: random.Random, redis_port: int) -> list[bytes]:
    """``n`` seeds, each one refused by the frontier's seed check with a reason."""
    makers = [
        lambda i: b"{not json %d" % i,
        lambda i: b'{"url": %d}' % i,
        lambda i: b'{"url": "http://shop.test/%d", "priority": "high"}' % i,
        lambda i: b'{"url": "http://shop.test/%d", "meta": []}' % i,
        lambda i: b'{"url": "http://shop.test/%d", "evil": 1}' % i,
        lambda i: b'["http://shop.test/%d"]' % i,
        lambda i: b"file:///etc/passwd?%d" % i,
        lambda i: b"javascript:alert(%d)" % i,
        lambda i: b"gopher://127.0.0.1:%d/_INFO" % redis_port,
        lambda i: b"http://",
        lambda i: b"https://shop.test/" + b"x" * (5000 + i),
        lambda i: b"x" * (20_000 + i),
        lambda i: bytes(rng.getrandbits(8) for _ in range(40)) + b"\xff\xfe",
        lambda i: b"http://shop.test/\x00%d" % i,
        lambda i: b"http://127.0.0.1:%d/" % redis_port,
        lambda i: b"http://localhost:%d/%d" % (redis_port, i),
        lambda i: b"http://169.254.169.254/latest/meta-data/%d" % i,
        lambda i: b"http://2130706433:%d/" % redis_port,
        lambda i: b"http://10.0.0.%d/" % (i % 250 + 1),
        lambda i: b'{"url": "http://shop.test/%d", "meta": {"proxy": "http://10.0.0.1:3128"}}' % i,
        lambda i: b'{"url": "http://shop.test/%d", "meta": {"download_maxsize": 0}}' % i,
        lambda i: b"   ",
    ]
    return [makers[i % len(makers)](i) for i in range(n)]


def hostile_entries(n: int, marker: str, redis_port: int) -> list[bytes]:
    """``n`` queue entries, each one moved aside by the codec or refused by the address guard."""
    good = json.dumps({"u": "http://shop.test/c/", "cb": "parse"})
    makers = [
        lambda i: pickle.dumps(Marker(marker), protocol=i % (pickle.HIGHEST_PROTOCOL + 1)),
        lambda i: pickle.dumps(Touch(marker), protocol=i % (pickle.HIGHEST_PROTOCOL + 1)),
        lambda i: good[: 5 + i % 30].encode(),
        lambda i: good.replace('"parse"', f'"parse_secret_{i}"').encode(),
        lambda i: good.replace('"parse"', '"close"').encode(),
        lambda i: json.dumps({"u": f"http://shop.test/{i}", "mt": {"proxy": "http://x:1"}}),
        lambda i: json.dumps({"u": f"http://shop.test/{i}", "mt": {"depth": -i - 1}}),
        lambda i: json.dumps({"u": f"http://shop.test/{i}", "h": {"X\r\nHost": ["a"]}}),
        lambda i: json.dumps({"u": f"http://shop.test/{i}", "c": [i]}),
        lambda i: json.dumps({"u": f"file:///etc/passwd?{i}"}),
        lambda i: json.dumps({"u": f"http://shop.test/{i}", "_class": "os.system"}),
        lambda i: b'{"u": "http://shop.test/' + b"a" * 300_000 + b'"}',
        lambda i: b"\xff\xfe\x00" + bytes([i % 256]),
        # accepted by the codec (queue entries may name private hosts): refused after DNS
        lambda i: json.dumps({"u": f"http://127.0.0.1:{redis_port}/{i}", "cb": "parse"}),
        lambda i: json.dumps({"u": f"http://localhost:{redis_port}/{i}"}),
        lambda i: json.dumps({"u": f"http://169.254.169.254/latest/meta-data/{i}"}),
        lambda i: json.dumps({"u": f"http://[::ffff:127.0.0.1]:{redis_port}/{i}"}),
    ]
    out = [makers[i % len(makers)](i) for i in range(n)]
    return [x.encode() if isinstance(x, str) else x for x in out]


def node_settings(args: argparse.Namespace, shop_port: int) -> dict[str, str]:
    """The project's settings (its safety middlewares included) for a short hostile crawl."""
    return {
        "LOG_LEVEL": "INFO",
        "DISTCRAWL_EMBEDDED": "False",
        "TELNETCONSOLE_ENABLED": "False",
        "CONCURRENT_REQUESTS": str(args.concurrency),
        "CONCURRENT_REQUESTS_PER_DOMAIN": str(args.concurrency),
        "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
        "DISTCRAWL_DRAIN_GRACE": "2",
        "DISTCRAWL_HEARTBEAT_INTERVAL": "0.5",
        "DISTCRAWL_HEARTBEAT_TIMEOUT": "4",
        "DISTCRAWL_ALLOW_PRIVATE": f"127.0.0.1:{shop_port}",
        "DEPTH_LIMIT": str(args.depth_limit),
    }


#: the oversized bodies of the hostile shop (one with Content-Length, one chunked)
OVERSIZED = 2


def run_plain(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same crawl of the shop without its hostile pages and without injection: the time
    the hostile crawl is compared with."""
    services = Services(mongo=True, home=work / "plain-services")
    shop = ShopProcess(products=args.products, latency_ms=args.latency, jitter_ms=args.jitter)
    nodes: list[Node] = []
    try:
        r = redis.Redis.from_url(services.redis_url)
        r.lpush(START_URLS_KEY, shop.url)
        r.close()
        settings = node_settings(args, shop.port)
        env = {
            "REDIS_URL": services.redis_url,
            "MONGO_URI": services.mongo_uri,
            "DISTCRAWL_HOME": str(work / "plain-home"),
        }
        started = time.monotonic()
        nodes = [
            Node("catalog", node_id=f"plain-{i + 1}", log_dir=work, settings=settings, env=env)
            for i in range(args.nodes)
        ]
        finished = wait_all(nodes, args.timeout)
        elapsed = time.monotonic() - started
        stalls = [stats_of(node.log()).get("node/loop_stall_max_ms", 0) for node in nodes]
        return {
            "finished": finished,
            "elapsed_s": round(elapsed, 2),
            "max_loop_stall_s": max(stalls, default=0) / 1000,
            "exit_codes": [node.proc.returncode for node in nodes],
        }
    finally:
        for node in nodes:
            node.stop()
        shop.stop()
        services.stop()


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    marker = work / "pickle-was-loaded"
    services = Services(mongo=True, home=work / "services")
    shop = ShopProcess(
        products=args.products, latency_ms=args.latency, jitter_ms=args.jitter, hostile=True
    )
    nodes: list[Node] = []
    try:
        r = redis.Redis.from_url(services.redis_url)
        redis_port = services.redis.port
        base = shop.url.rstrip("/")
        r.lpush(START_URLS_KEY, shop.url, *[base + p for p in HOSTILE_PATHS])
        settings = node_settings(args, shop.port)
        env = {
            "REDIS_URL": services.redis_url,
            "MONGO_URI": services.mongo_uri,
            "DISTCRAWL_HOME": str(work / "home"),
        }
        started = time.monotonic()
        nodes = [
            Node("catalog", node_id=f"hostile-{i + 1}", log_dir=work, settings=settings, env=env)
            for i in range(args.nodes)
        ]
        # inject while the crawl runs: wait for its first product pages
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            fetched = [e for e in page_fetches(shop.log()) if e["path"].startswith("/p/")]
            if len(fetched) >= START_AFTER_PRODUCTS:
                break
            time.sleep(0.05)
        n_seeds = args.injected // 2
        seeds = hostile_seeds(n_seeds, rng, redis_port)
        entries = hostile_entries(args.injected - n_seeds, str(marker), redis_port)
        injection_started = time.time()
        for batch in range(BATCHES):
            pipe = r.pipeline(transaction=False)
            for raw in seeds[batch::BATCHES]:
                pipe.lpush(START_URLS_KEY, raw)
            for j, payload in enumerate(entries[batch::BATCHES]):
                rid = f"hostile-{batch}-{j}"
                pipe.hset(SHARD0.requests, rid, payload)
                # a bare rid at the end of priority 100's queue, counted in its level
                pipe.rpush(SHARD0.queue(100), rid)
                pipe.zadd(SHARD0.levels, {"100": level_score(100, 0)}, nx=True)
                pipe.zincrby(SHARD0.levels, 1, "100")
            pipe.execute()
            time.sleep(0.02)
        injection_ended = time.time()
        finished = wait_all(nodes, args.timeout)
        elapsed = time.monotonic() - started
        shop_log = shop.log()
        truth = shop.truth()
        product_fetches = [e for e in page_fetches(shop_log) if e["path"].startswith("/p/")]
        last_product = max((e["t"] for e in product_fetches), default=0.0)
        rejected = [json.loads(x) for x in r.lrange(f"{FRONTIER}:rejected", 0, -1)]
        stats: Counter[str] = Counter()
        stalls = []
        for node in nodes:
            node_stats = stats_of(node.log())
            stalls.append(node_stats.pop("node/loop_stall_max_ms", 0))
            stats.update(node_stats)
        guard = {
            k.removeprefix("safety/refused/"): v
            for k, v in stats.items()
            if k.startswith("safety/refused/") and k.split("/")[-1] in ADDRESS_GUARD_REASONS
        }
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(services.mongo_uri)
        try:
            stored_urls = {
                d["url"] for d in client.get_default_database()["products"].find({}, {"url": 1})
            }
        finally:
            client.close()
        expected = set(truth["expected"])
        redis_log = services.redis.log_path.read_text(errors="replace")
        reasons = Counter(x["reason"] for x in rejected)
        reasons.update({f"guard:{k}": v for k, v in guard.items()})
        result = {
            "products": args.products,
            "nodes": args.nodes,
            "stored": len(stored_urls & expected),
            "expected": len(expected),
            "extra_stored": len(stored_urls - expected),
            "injected": args.injected,
            "injected_seeds": len(seeds),
            "injected_queue_entries": len(entries),
            "refused": len(rejected) + sum(guard.values()),
            "refused_rejected_list": len(rejected),
            "refused_by_address_guard": sum(guard.values()),
            "refused_by_reason": dict(sorted(reasons.items())),
            "marker_created": marker.exists(),
            "redis_saw_http": "SECURITY ATTACK" in redis_log,
            "injected_during_crawl": injection_started < last_product,
            "injection_seconds": round(injection_ended - injection_started, 3),
            "hostile_pages": {
                "robots_forbidden": stats["robotstxt/forbidden"],
                "too_large": stats["safety/refused/too_large"],
                "redirect_loop": stats["safety/refused/redirect_loop"],
                "not_html": stats["catalog/pages/not_html"],
                "depth_limit": stats["depth/request_ignored_count"],
                "trap_pages_fetched": sum(e["path"].startswith("/trap/") for e in shop_log),
                "calendar_pages_fetched": sum(e["path"].startswith("/calendar/") for e in shop_log),
                "private_fetched": any(e["path"] == "/private/secret" for e in shop_log),
                "dense_fetched": any(e["path"] == "/dense" for e in shop_log),
                "dense_links_fetched": sum(
                    e["path"].startswith("/c/") and e["status"] == 404 for e in shop_log
                ),
                "pages_cut": {
                    k.removeprefix("safety/page_cut/"): v
                    for k, v in stats.items()
                    if k.startswith("safety/page_cut/")
                },
                "links_unread": stats["safety/links_unread"],
                "links_dropped": {
                    k.removeprefix("safety/links_dropped/"): v
                    for k, v in stats.items()
                    if k.startswith("safety/links_dropped/")
                },
                "pages_parsed_off_loop": stats["catalog/pages/off_loop"],
            },
            "max_loop_stall_s": max(stalls, default=0) / 1000,
            "loop_stalls_over_1s": stats["node/loop_stalls"],
            "errors_logged": stats["log_count/ERROR"],
            "exit_codes": [node.proc.returncode for node in nodes],
            "finished": finished,
            "elapsed_s": round(elapsed, 2),
        }
        result["ok"] = bool(
            finished
            and result["stored"] == result["expected"]
            and not result["marker_created"]
            and result["refused"] == result["injected"]
            and not result["redis_saw_http"]
            and result["exit_codes"] == [0] * args.nodes
            and result["hostile_pages"]["too_large"] == OVERSIZED
            and result["max_loop_stall_s"] < MAX_LOOP_STALL
        )
        return result
    finally:
        for node in nodes:
            node.stop()
        shop.stop()
        services.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=2, help="nodes crawling at once")
    parser.add_argument("--injected", type=int, default=1000, help="hostile seeds + entries")
    parser.add_argument("--latency", type=float, default=30.0, metavar="MS", help="shop latency")
    parser.add_argument("--jitter", type=float, default=20.0, metavar="MS", help="extra 0..MS")
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS")
    parser.add_argument("--depth-limit", type=int, default=50, help="DEPTH_LIMIT")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random garbage")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the crawl")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-plain", action="store_true", help="skip the crawl without hostile pages"
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="distcrawl-hostile-"))
    try:
        plain = None if args.no_plain else run_plain(args, work)
        result = run(args, work)
        if plain is not None:
            result["plain_elapsed_s"] = plain["elapsed_s"]
            result["plain_max_loop_stall_s"] = plain["max_loop_stall_s"]
            result["hostile_to_plain_ratio"] = round(
                result["elapsed_s"] / max(plain["elapsed_s"], 0.001), 2
            )
            result["ok"] = bool(
                result["ok"] and plain["finished"] and result["hostile_to_plain_ratio"] < MAX_RATIO
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    write_result(result)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
        if args.keep:
            print(f"{'work folder':>26}: {work}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
