"""A crawl during which MongoDB goes away for a while: nothing may be lost or stored twice.

    .venv/bin/python bench/mongo_outage.py --json

Two nodes crawl the demo shop (with latency, so the crawl is still running when the database
goes); once a share of the products is stored, the SecantusDB server is stopped for
``--outage`` seconds (10 by default) and started again on the same port and data. The nodes
keep their items (retrying, then journaling them) and slow down instead of dropping anything.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymongo
import redis
from _processes import Node, Services, stop_process, wait_all
from _results import print_report

from distcrawl.demo.checks import check_store
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop


def stored_count(uri: str) -> int:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(uri, serverSelectionTimeoutMS=2000)
    try:
        return int(client.get_default_database()["products"].estimated_document_count())
    except pymongo.errors.PyMongoError:
        return -1
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--outage", type=float, default=10.0, help="seconds MongoDB is down")
    parser.add_argument("--at", type=float, default=0.3, help="share stored when it goes")
    parser.add_argument("--latency", type=float, default=60.0, help="shop latency, ms")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    shop = DemoShop(ShopConfig(products=args.products, latency_ms=args.latency)).start()
    log_dir = Path(tempfile.mkdtemp(prefix="distcrawl-mongo-outage-"))
    settings = {
        "DISTCRAWL_CLOSE_WHEN_DRAINED": "1",
        "DISTCRAWL_DRAIN_GRACE": "2",
        "CONCURRENT_REQUESTS": "8",
        "LOG_LEVEL": "INFO",
    }
    nodes: list[Node] = []
    expected = shop.expected_product_urls()
    try:
        with Services(mongo=True) as services:
            assert services.mongo is not None
            uri = services.mongo_uri
            env = {"REDIS_URL": services.redis_url, "MONGO_URI": uri}
            redis.Redis.from_url(services.redis_url).lpush("catalog:start_urls", shop.url)
            t0 = time.monotonic()
            nodes = [
                Node(
                    "catalog",
                    node_id=f"outage-{i + 1}",
                    log_dir=log_dir,
                    settings=settings,
                    env=env,
                )
                for i in range(args.nodes)
            ]
            threshold = int(len(expected) * args.at)
            while stored_count(uri) < threshold:
                if not any(n.alive for n in nodes) or time.monotonic() - t0 > args.timeout:
                    break
                time.sleep(0.2)
            stored_before = stored_count(uri)
            down_at = time.monotonic() - t0
            services.mongo.stop()
            time.sleep(args.outage)
            services.mongo.start()
            up_at = time.monotonic() - t0
            finished = wait_all(nodes, args.timeout)
            seconds = time.monotonic() - t0
            client: pymongo.MongoClient[Any] = pymongo.MongoClient(uri)
            report = check_store(client.get_default_database()["products"], expected)
            client.close()
            logs = "\n".join(n.log() for n in nodes)
            report.update(
                stored_before_outage=stored_before,
                outage_seconds=round(up_at - down_at, 1),
                outage_started_at=round(down_at, 1),
                finished=finished,
                exit_codes=[n.proc.returncode for n in nodes],
                seconds=round(seconds, 1),
                outage_logged="MongoDB write failed" in logs,
                recovery_logged="MongoDB writes succeed again" in logs,
                node_logs=[str(n.log_file) for n in nodes],
            )
    finally:
        for node in nodes:
            stop_process(node.proc)
        shop.stop()
    print_report(
        report,
        (
            "expected",
            "stored",
            "lost",
            "duplicates",
            "stored_before_outage",
            "outage_seconds",
            "seconds",
        ),
        as_json=args.json,
    )
    ok = report["lost"] == 0 and report["duplicates"] == 0 and report["finished"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
