"""A crawl of a faulty shop: random 503s plus always-failing products, two nodes, then a check.

    .venv/bin/python bench/faults.py --error-rate 0.3 --products 300 --json

Every recoverable product must be stored (retries back off, wait in Redis, any node takes
them), every always-failing product must end in the dead letters with its reason, and the
shop's own log must show that the gaps between attempts at one URL grow as the backoff says.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from _processes import Node, Services, stop_process, wait_all
from _results import print_report

from distcrawl.demo.checks import attempts_by_path, check_store, retry_gap_violations
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop
from distcrawl.frontier.keys import FrontierKeys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--error-rate", type=float, default=0.3)
    parser.add_argument("--failing", type=int, default=5, help="products that always answer 500")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--retry-times", type=int, default=10)
    parser.add_argument("--backoff-base", type=float, default=0.25)
    parser.add_argument("--backoff-max", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    shop = DemoShop(
        ShopConfig(
            products=args.products,
            error_rate=args.error_rate,
            fail_products=args.failing,
            retry_after=None,  # the backoff alone paces the retries here
        )
    ).start()
    log_dir = Path(tempfile.mkdtemp(prefix="distcrawl-faults-"))
    settings = {
        "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
        "DISTCRAWL_DRAIN_GRACE": "2",
        "RETRY_TIMES": str(args.retry_times),
        "RETRY_BACKOFF_BASE": str(args.backoff_base),
        "RETRY_BACKOFF_MAX": str(args.backoff_max),
        "LOG_LEVEL": "INFO",
    }
    nodes: list[Node] = []
    try:
        with Services(mongo=True) as services:
            env = {"REDIS_URL": services.redis_url, "MONGO_URI": services.mongo_uri}
            r = redis.Redis.from_url(services.redis_url)
            t0 = time.monotonic()
            r.lpush("catalog:start_urls", shop.url)
            nodes = [
                Node(
                    "catalog",
                    node_id=f"faults-{i + 1}",
                    log_dir=log_dir,
                    settings=settings,
                    env=env,
                )
                for i in range(args.nodes)
            ]
            finished = wait_all(nodes, args.timeout)
            seconds = time.monotonic() - t0
            report = summarize(args, shop, services, r, finished, seconds)
            report["node_logs"] = [str(n.log_file) for n in nodes]
    finally:
        for node in nodes:
            stop_process(node.proc)
        shop.stop()
    print_report(
        report,
        (
            "expected",
            "recoverable",
            "stored",
            "lost",
            "duplicates",
            "dead_letters",
            "failing",
            "retry_gap_ok",
            "retried_urls",
            "max_attempts",
            "seconds",
        ),
        as_json=args.json,
    )
    ok = (
        report["lost"] == 0
        and report["duplicates"] == 0
        and report["dead_letters"] == report["failing"]
        and report["dead_letters_match"]
        and report["retry_gap_ok"]
    )
    return 0 if ok else 1


def summarize(
    args: argparse.Namespace,
    shop: DemoShop,
    services: Services,
    r: redis.Redis,
    finished: bool,
    seconds: float,
) -> dict[str, Any]:
    import pymongo

    client: pymongo.MongoClient[Any] = pymongo.MongoClient(services.mongo_uri)
    recoverable = shop.recoverable_product_urls()
    failing = shop.failing_product_urls()
    store = check_store(client.get_default_database()["products"], recoverable)
    client.close()
    shards = FrontierKeys("catalog", "catalog:start_urls").all_shards()
    dead = [json.loads(v) for shard in shards for v in r.hvals(shard.dead)]
    log = shop.request_log()
    violations = retry_gap_violations(
        log, base=args.backoff_base, cap=args.backoff_max, retry_statuses=frozenset({503, 500})
    )
    attempts = attempts_by_path(log)
    return {
        "expected": len(shop.expected_product_urls()),
        "recoverable": len(recoverable),
        "stored": store["stored"],
        "lost": store["lost"],
        "duplicates": store["duplicates"],
        "stored_failing": store["unexpected"],
        "failing": len(failing),
        "dead_letters": len(dead),
        "dead_letters_match": {d["url"] for d in dead} == failing,
        "dead_letter_reasons": sorted({d["reason"] for d in dead}),
        "retry_gap_ok": not violations,
        "retry_gap_violations": violations[:5],
        "retried_urls": sum(1 for a in attempts.values() if len(a) > 1),
        "max_attempts": max((len(a) for a in attempts.values()), default=0),
        "requests": len(log),
        "finished": finished,
        "seconds": round(seconds, 2),
    }


if __name__ == "__main__":
    sys.exit(main())
