"""Politeness across the cluster: N nodes, a rate-limited site A and a free site B; then what
sites ask (``_site_rules``): a robots.txt Crawl-delay, a server shared by several sites, a
robots.txt answering 5xx, and a site whose pages never answer beside an ordinary shop.

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

``crawl_delay_max_requests_per_window``: a site with ``Crawl-delay: 2`` (``--crawl-delay``),
the most requests it saw in any window of that many seconds (robots.txt included), crawled
once and then in revisit mode; at most 1. ``server_max_concurrency``: ``--server-sites`` sites
whose names all resolve to 127.0.0.1, with a server limit of ``--server-limit``: the most
requests the server answered at once. ``robots_5xx_pages_fetched_before_robots``: pages of a
site fetched before its robots.txt (answering 503 ``--robots-tries`` times) was read; 0.
``hanging_site_slowdown``: a ``--hanging-products`` shop's crawl time beside a site whose
pages never answer (``--hanging-urls`` of them seeded), over the shop alone, ratio of the
medians of ``--rounds`` alternated runs; at most 1.1.

    .venv/bin/python bench/politeness.py --nodes 3 --rate 5 --json

Exits 1 when ``max_per_second > limit + burst``, when ``other_site_done`` is false, when the
crawl did not finish complete (a node failed, a product is missing or stored twice), or when
one of the site rules' figures is over its bound.
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

import _site_rules
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
#: what sites ask, each measured by ``_site_rules`` (``--site-rules``)
SITE_RULES = ("crawl_delay", "server", "robots_5xx", "hanging")
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


def site_rules(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The figures of what sites ask (see the module), and whether each holds its bound."""
    wanted = {name.strip() for name in args.site_rules.split(",") if name.strip()}
    unknown = wanted - set(SITE_RULES)
    if unknown:
        raise SystemExit(f"no site rule {', '.join(sorted(unknown))}; the rules: {SITE_RULES}")
    out: dict[str, Any] = {}
    ok = True
    if "crawl_delay" in wanted:
        out.update(
            _site_rules.crawl_delay(
                work, nodes=args.nodes, delay=args.crawl_delay, revisit_for=args.revisit_for
            )
        )
        ok = ok and out["crawl_delay_max_requests_per_window"] <= 1
    if "server" in wanted:
        out.update(
            _site_rules.server_budget(
                work, nodes=args.nodes, sites=args.server_sites, limit=args.server_limit
            )
        )
        ok = ok and out["server_max_concurrency"] <= args.server_limit
    if "robots_5xx" in wanted:
        out.update(_site_rules.robots_5xx(work, nodes=args.nodes, tries=args.robots_tries))
        ok = ok and out["robots_5xx_pages_fetched_before_robots"] == 0
        ok = ok and out["robots_5xx_complete"]
    if "hanging" in wanted:
        out.update(
            _site_rules.hanging_site(
                work / "hanging",
                nodes=args.nodes,
                products=args.hanging_products,
                hanging=args.hanging_urls,
                rounds=args.rounds,
            )
        )
        ok = ok and out["hanging_site_slowdown"] <= 1.1 and out["hanging_complete"]
    out["site_rules_ok"] = ok
    return out


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
    parser.add_argument("--crawl-delay", type=float, default=2.0, help="seconds")
    parser.add_argument(
        "--revisit-for", type=float, default=30.0, help="seconds of revisits, Crawl-delay run"
    )
    parser.add_argument("--server-sites", type=int, default=8)
    parser.add_argument("--server-limit", type=int, default=2)
    parser.add_argument("--robots-tries", type=int, default=3, help="503 answers of robots.txt")
    parser.add_argument("--hanging-products", type=int, default=300)
    parser.add_argument("--hanging-urls", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="of each hanging-site run")
    parser.add_argument(
        "--only-site-rules", action="store_true", help="skip the rate-limited site A run"
    )
    parser.add_argument(
        "--site-rules",
        default=",".join(SITE_RULES),
        help=f"which of them to run, comma-separated: {', '.join(SITE_RULES)}",
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="distcrawl-politeness-"))
    try:
        result = {"nodes": args.nodes, "ok": True} if args.only_site_rules else run(args, work)
        result.update(site_rules(args, work))
        result["ok"] = result["ok"] and result["site_rules_ok"]
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
