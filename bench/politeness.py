"""Politeness across the cluster: N nodes, a rate-limited site A and a free site B.

Two demo shops are two sites (a site is a host name): A on 127.0.0.1 with a per-site limit of
``--rate`` requests/s (``DISTCRAWL_SITE_LIMITS``), B on 127.0.0.2 with no limit. ``--nodes``
real ``scrapy crawl catalog`` processes crawl both from one fresh Redis (valkey-server) into
one fresh SecantusDB, item pipeline on (``--no-pipeline`` turns it off: faster, but further
from a real crawl). The shops run in this process and log the arrival time of every request.

The budget is a token bucket of ``--burst`` tokens refilled at ``--rate`` per second, shared
by every node through Redis, so in any one-second window site A may see at most
``rate + burst`` requests. ``max_per_second`` counts every request A saw in its busiest
sliding one-second window (half-open, ``[t, t + 1)``), robots.txt included;
``max_per_second_frontier`` leaves robots.txt out (it is fetched once per cluster, shared
through Redis and charged to the same budget).
``other_site_done`` is true when every product of B was fetched (and stored) before A's last
page: the limit on A held nothing of B back.

    .venv/bin/python bench/politeness.py --nodes 3 --rate 5 --json

Exits 1 when ``max_per_second > limit + burst``, when ``other_site_done`` is false, or when
the crawl did not finish complete (a node failed, a product is missing or stored twice).
"""

from __future__ import annotations

import argparse
import bisect
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymongo
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, Services, wait_all
from _results import write_result
from _settings import START_URLS_KEY

from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop
from distcrawl.frontier.store import FrontierKeys

#: site A, rate-limited, and site B, free: two loopback addresses are two host names
SITE_A, SITE_B = "127.0.0.1", "127.0.0.2"
#: products of site A: at 5 requests/s its ~70 pages take ~14 s
DEFAULT_PRODUCTS = 60
#: products of site B: enough that B is busy while A starts, small enough to finish early
DEFAULT_OTHER_PRODUCTS = 240
#: seconds a whole run may take before its nodes are stopped and the run fails
DEFAULT_TIMEOUT = 180.0
#: the spider the nodes run, and the frontier keys it uses
SPIDER = "catalog"
KEYS = FrontierKeys(spider=SPIDER, start_urls=START_URLS_KEY)


def max_in_window(times: list[float], window: float = 1.0) -> tuple[int, float | None]:
    """Most arrivals in any half-open window ``[t, t + window)``, and where it starts."""
    ts = sorted(times)
    best, at = 0, None
    for i, t in enumerate(ts):
        n = bisect.bisect_left(ts, t + window, lo=i) - i
        if n > best:
            best, at = n, t
    return best, at


def frontier_times(log: list[dict[str, Any]]) -> list[float]:
    """Arrivals of the requests that came through the frontier (all but robots.txt)."""
    return [e["t"] for e in log if e["path"] != "/robots.txt"]


def page_times(log: list[dict[str, Any]]) -> list[float]:
    return [e["t"] for e in log if e["status"] == 200 and e["path"] != "/robots.txt"]


def fetched_products(shop: DemoShop, log: list[dict[str, Any]]) -> set[str]:
    base = shop.url.rstrip("/")
    return {base + e["path"].split("?")[0] for e in log if e["status"] == 200}


def node_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {
        "CONCURRENT_REQUESTS": "16",
        "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
        "CONCURRENT_ITEMS": "16",
        "LOG_LEVEL": "INFO",
        "DISTCRAWL_EMBEDDED": "False",
        "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
        "DISTCRAWL_DRAIN_GRACE": "1.5",
        "DISTCRAWL_HEARTBEAT_INTERVAL": "0.5",
        "DISTCRAWL_ALLOW_PRIVATE": f"{SITE_A},{SITE_B}",
        "DISTCRAWL_SITE_LIMITS": json.dumps({SITE_A: {"rate": args.rate}}),
        "DISTCRAWL_SITE_BURST": str(args.burst),
    }
    if not args.pipeline:
        settings["ITEM_PIPELINES"] = "{}"
    return settings


def stored_urls(mongo_uri: str) -> list[str]:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        products = client.get_default_database()["products"]
        return [d["url"] for d in products.find({}, {"url": 1, "_id": 0})]
    finally:
        client.close()


def crawl(args: argparse.Namespace, work: Path, shops: list[DemoShop]) -> dict[str, Any]:
    """Run the nodes over both shops until the frontier drains; what Redis and MongoDB hold."""
    with Services(mongo=args.pipeline, home=work / "services") as services:
        admin = redis.Redis.from_url(services.redis_url, decode_responses=True)
        env = {"REDIS_URL": services.redis_url}
        if args.pipeline:
            env["MONGO_URI"] = services.mongo_uri
        settings = node_settings(args)
        nodes: list[Node] = []
        try:
            nodes = [
                Node(SPIDER, node_id=f"polite-{i + 1}", log_dir=work, settings=settings, env=env)
                for i in range(args.nodes)
            ]
            # seed once every node is up, so all of them compete for A's budget from the start
            deadline = time.monotonic() + 60
            while admin.zcard(KEYS.nodes) < args.nodes and time.monotonic() < deadline:
                if not all(node.alive for node in nodes):
                    break
                time.sleep(0.1)
            t0 = time.time()
            admin.lpush(START_URLS_KEY, *(shop.url for shop in shops))
            finished = wait_all(nodes, args.timeout)
        finally:
            for node in nodes:
                node.stop(timeout=10)
        budget = dict(admin.hgetall(KEYS.site(SITE_A)))
        admin.close()
        return {
            "t0": t0,
            "finished": finished,
            "exit_codes": [node.proc.returncode for node in nodes],
            "budget": budget,
            "stored": stored_urls(services.mongo_uri) if args.pipeline else None,
        }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    shop_a = DemoShop(ShopConfig(products=args.products, host=SITE_A)).start()
    try:
        shop_b = DemoShop(ShopConfig(products=args.other_products, host=SITE_B)).start()
        try:
            out = crawl(args, work, [shop_a, shop_b])
            log_a, log_b = shop_a.request_log(), shop_b.request_log()
        finally:
            shop_b.stop()
    finally:
        shop_a.stop()
    (work / "site_a.json").write_text(json.dumps(log_a))
    (work / "site_b.json").write_text(json.dumps(log_b))

    t0 = out["t0"]
    max_all, at = max_in_window([e["t"] for e in log_a])
    max_frontier, _ = max_in_window(frontier_times(log_a))
    pages_a, pages_b = page_times(log_a), page_times(log_b)
    a_first, a_last = min(pages_a, default=t0), max(pages_a, default=t0)
    b_first, b_last = min(pages_b, default=t0), max(pages_b, default=t0)
    expected_a, expected_b = shop_a.expected_product_urls(), shop_b.expected_product_urls()
    expected = expected_a | expected_b
    # B is done once all its products were fetched (and stored, with the pipeline on)
    b_done = expected_b <= fetched_products(shop_b, log_b)
    stored: list[str] | None = out["stored"]
    if stored is not None:
        b_done = b_done and expected_b <= set(stored)
        complete = set(stored) == expected and len(stored) == len(set(stored))
    else:
        complete = (expected_a | expected_b) <= (
            fetched_products(shop_a, log_a) | fetched_products(shop_b, log_b)
        )
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "pipeline": args.pipeline,
        "limit": args.rate,
        "burst": args.burst,
        "max_per_second": max_all,
        "max_per_second_frontier": max_frontier,
        "max_window_at_s": None if at is None else round(at - t0, 2),
        "other_site_done": b_done and b_last < a_last,
        "site_a_pages": len(pages_a),
        "site_a_robots": sum(1 for e in log_a if e["path"] == "/robots.txt"),
        "site_a_rate": round(len(pages_a) / max(1e-6, a_last - a_first), 2),
        "site_a_done_at_s": round(a_last - t0, 2),
        "site_b_pages": len(pages_b),
        "site_b_rate": round(len(pages_b) / max(1e-6, b_last - b_first), 1),
        "site_b_done_at_s": round(b_last - t0, 2),
        "seconds": round(max(a_last, b_last) - t0, 2),
        "stored": None if stored is None else len(set(stored) & expected),
        "documents": None if stored is None else len(stored),
        "expected": len(expected),
        "complete": complete,
        "finished": out["finished"],
        "exit_codes": out["exit_codes"],
        "site_a_budget": out["budget"],
    }
    result["ok"] = (
        max_all <= args.rate + args.burst
        and result["other_site_done"]
        and complete
        and out["finished"]
        and out["exit_codes"] == [0] * args.nodes
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rate", type=float, default=5.0, help="site A's limit (requests/s)")
    parser.add_argument("--burst", type=float, default=1.0, help="DISTCRAWL_SITE_BURST (tokens)")
    parser.add_argument("--products", type=int, default=DEFAULT_PRODUCTS, help="of site A")
    parser.add_argument("--other-products", type=int, default=DEFAULT_OTHER_PRODUCTS)
    parser.add_argument(
        "--no-pipeline", dest="pipeline", action="store_false", help="no MongoDB, no items"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--keep", action="store_true", help="keep the logs folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="distcrawl-politeness-"))
    try:
        result = run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.keep:
        result["logs"] = str(work)
    write_result(result)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>22}: {value}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
