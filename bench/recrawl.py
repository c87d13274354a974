"""Keeping a catalog fresh: a continuous crawl in revisit mode over a shop that changes.

Two ``scrapy crawl catalog`` nodes (real processes, a fresh Redis and SecantusDB) crawl the
changing demo shop with ``DISTCRAWL_REVISIT`` set to ``--interval`` for every page kind. The
shop's changes start once the first pass has stored every product: every ``--interval``
seconds, for ``--cycles`` epochs, a ``--change-rate`` share of its products change price or
stock and ``--remove`` products are removed (their pages answer 410). The shop answers
``ETag`` / ``Last-Modified`` / ``304``. After the last epoch the crawl goes on until every
change is recorded (or ``--settle`` seconds pass); then the store is compared with the shop's
ground truth (:func:`distcrawl.demo.change_checks.check_changes`).

    .venv/bin/python bench/recrawl.py --products 2000 --change-rate 0.05 --interval 10 \
        --cycles 5 --json

Keys: ``changes_made``, ``changes_detected``, ``changes_missed``, ``false_changes`` (change-log
records of no real change; ``history_false``: such ``price_history`` entries),
``freshness_lag_s`` (``p50``, ``p95``, ``max``: from a change to its record), ``gone_made``,
``gone_detected``, ``not_modified_ratio`` (304s among the revisits of product pages that had
not changed since their last fetch), ``bytes_per_cycle`` (page bytes the shop sent per
revisit interval after the first pass), ``full_crawl_bytes`` (the first pass: every page in
full) and ``bytes_saved_ratio`` (1 - bytes_per_cycle / full_crawl_bytes), ``revisit_fetches``,
``revisit_gap_s`` (``p50``, ``p95``, ``max``: seconds between two fetches of a product page).

The nodes run with the crawler's revisit defaults (fixed-rate schedule, no backoff,
``DISTCRAWL_REVISIT_EARLY`` 0.1) unless ``--backoff`` / ``--max-backoff`` / ``--early`` say
otherwise. A change counts as missed when no change-log record shows its new value, also when
the product changed again before any fetch: the shop's changes live one interval, and the
crawl's promise is a fetch at least once an interval, so such a change is one the crawl should
have seen (``revisit_gap_s`` max over the interval shows where it did not).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pymongo
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, Services
from _results import print_report

from distcrawl.base.config import SETTINGS
from distcrawl.demo.change_checks import check_changes
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop

HEADLINE = (
    "changes_made",
    "changes_detected",
    "changes_missed",
    "false_changes",
    "freshness_lag_s",
    "not_modified_ratio",
    "bytes_per_cycle",
    "bytes_saved_ratio",
    "gone_made",
    "gone_detected",
)
#: the shop's change epochs begin this far in its future, until the first pass is done
_FAR = 10**6


class ShopClock:
    """The shop's time: real time until :meth:`begin`, then its change epochs start now."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.time() + self.skew

    def begin(self, start: float) -> None:
        self.skew = start - time.time()


def node_settings(args: argparse.Namespace, services: Services) -> dict[str, str]:
    interval = f"{args.interval:g}s"
    own = {
        "DISTCRAWL_REVISIT_BACKOFF": args.backoff,
        "DISTCRAWL_REVISIT_MAX_BACKOFF": args.max_backoff,
        "DISTCRAWL_REVISIT_EARLY": args.early,
    }
    return {
        **{name: str(value) for name, value in own.items() if value is not None},
        "REDIS_URL": services.redis_url,
        "MONGO_URI": services.mongo_uri,
        "DISTCRAWL_REVISIT": f"*:{interval}",
        "DISTCRAWL_CLOSE_WHEN_DRAINED": "0",
        "DISTCRAWL_HEARTBEAT_INTERVAL": "1",
        "CONCURRENT_REQUESTS": str(args.concurrency),
        "LOG_LEVEL": "INFO",
    }


def product_states(db: Any, since: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The change log, and the products with the ``price_history`` entries of the changing
    shop only (the first pass saw the shop before its clock was moved to its change epochs)."""
    products = []
    for doc in db.products.find({}, {"_id": 0}):
        history = doc.get("price_history") or []
        doc["price_history"] = [e for e in history if _seconds(e["seen_at"]) >= since]
        products.append(doc)
    return list(db.changes.find({}, {"_id": 0})), products


def _seconds(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    return float(value)


def not_modified_ratio(shop: DemoShop, truth: dict[str, Any], skew: float, since: float) -> Any:
    """304s among the fetches after *since* of product pages unchanged since their last fetch."""
    fetches: dict[str, list[tuple[float, int]]] = {}
    for entry in shop.request_log():
        if entry["path"] in truth["products"]:
            fetches.setdefault(entry["path"], []).append((entry["t"], entry["status"]))
    unchanged = not_modified = 0
    for path, seen in fetches.items():
        product = truth["products"][path]
        moments = [s["at"] - skew for s in product["timeline"]]
        if product.get("removed_at") is not None:
            moments.append(product["removed_at"] - skew)
        for (before, _), (t, status) in itertools.pairwise(seen):
            if t <= since or any(before < m <= t for m in moments):
                continue
            unchanged += 1
            not_modified += status == 304
    return round(not_modified / unchanged, 3) if unchanged else None


def revisit_gaps(entries: list[dict[str, Any]], truth: dict[str, Any]) -> Any:
    """Seconds between two fetches of one product page (p50, p95, max) among *entries*: over
    ``--interval`` is where a value that lived one interval can go unseen."""
    times: dict[str, list[float]] = {}
    for entry in entries:
        if entry["path"] in truth["products"]:
            times.setdefault(entry["path"], []).append(entry["t"])
    gaps = sorted(b - a for seen in times.values() for a, b in itertools.pairwise(seen))
    if not gaps:
        return None

    def rank(share: float) -> float:
        return round(gaps[max(0, math.ceil(share * len(gaps)) - 1)], 3)

    return {"p50": rank(0.5), "p95": rank(0.95), "max": round(gaps[-1], 3)}


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def page_bytes(entries: list[dict[str, Any]]) -> int:
    return sum(e["bytes"] for e in entries if e["path"] != "/robots.txt")


def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = ShopClock()
    start = time.time() + _FAR
    config = ShopConfig(
        products=args.products,
        change_interval=args.interval,
        change_rate=args.change_rate,
        change_remove=args.remove,
        change_cycles=args.cycles,
        change_start=start,
        tracking_params=False,
        conditional=True,
    )
    report: dict[str, Any] = {
        "products": args.products,
        "change_rate": args.change_rate,
        "interval_s": args.interval,
        "cycles": args.cycles,
        "nodes": args.nodes,
        "backoff": _or(args.backoff, SETTINGS.default("DISTCRAWL_REVISIT_BACKOFF")),
        "max_backoff": _or(args.max_backoff, SETTINGS.default("DISTCRAWL_REVISIT_MAX_BACKOFF")),
        "early": _or(args.early, SETTINGS.default("DISTCRAWL_REVISIT_EARLY")),
    }
    with Services(mongo=True) as services, DemoShop(config, clock=clock) as shop:
        work = services.home / "nodes"
        work.mkdir()
        r = redis.Redis.from_url(services.redis_url)
        r.lpush("catalog:start_urls", shop.url)
        settings = node_settings(args, services)
        nodes = [
            Node("catalog", node_id=f"n{i}", log_dir=work, settings=settings)
            for i in range(args.nodes)
        ]
        mongo: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(services.mongo_uri)
        db = mongo.get_default_database()
        try:
            t0 = time.time()
            deadline = time.monotonic() + args.first_pass_timeout
            while db.products.count_documents({}) < args.products:
                if time.monotonic() > deadline or not all(n.alive for n in nodes):
                    raise RuntimeError("the first pass did not store every product")
                time.sleep(1.0)
            switch = time.time()
            report["first_pass_s"] = round(switch - t0, 1)
            full = page_bytes(shop.request_log())
            clock.begin(start)  # epoch 0 now; the first changes one interval later
            print(f"first pass done in {switch - t0:.0f}s; the shop changes now", file=sys.stderr)
            changes_end = switch + args.cycles * args.interval
            settle_until = changes_end + args.settle
            checked: dict[str, Any] = {}
            while time.time() < settle_until:
                time.sleep(min(5.0, max(0.5, args.interval / 2)))
                if time.time() < changes_end + args.interval:
                    continue
                truth = shop.changes()
                checked = check_changes(truth, *product_states(db, switch), clock_offset=clock.skew)
                gone_seen = checked["gone_detected"] >= checked["gone_made"]
                if gone_seen and not checked["changes_missed"]:
                    break
            end = time.time()
        finally:
            for node in nodes:
                node.stop()
        truth = shop.changes()
        checked = check_changes(truth, *product_states(db, switch), clock_offset=clock.skew)
        after = [e for e in shop.request_log(since=switch) if e["t"] <= end]
        cycles_seen = max(1e-9, (end - switch) / args.interval)
        per_cycle = page_bytes(after) / cycles_seen
        report.update(checked)
        report.update(
            {
                "run_s": round(end - switch, 1),
                "full_crawl_bytes": full,
                "bytes_per_cycle": int(per_cycle),
                "bytes_saved_ratio": round(1 - per_cycle / full, 3) if full else None,
                "not_modified_ratio": not_modified_ratio(shop, truth, clock.skew, switch),
                "revisit_fetches": len(after),
                "not_modified": sum(1 for e in after if e["status"] == 304),
                "revisit_gap_s": revisit_gaps(after, truth),
            }
        )
        mongo.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=2000)
    parser.add_argument("--change-rate", type=float, default=0.05, help="share per epoch")
    parser.add_argument("--interval", type=float, default=10.0, help="change epoch = revisit, s")
    parser.add_argument("--cycles", type=int, default=5, help="change epochs")
    parser.add_argument("--remove", type=int, default=2, help="products removed per epoch")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS")
    # the crawler's own defaults unless given
    parser.add_argument("--backoff", type=float, help="DISTCRAWL_REVISIT_BACKOFF")
    parser.add_argument("--max-backoff", type=float, help="DISTCRAWL_REVISIT_MAX_BACKOFF")
    parser.add_argument("--early", type=float, help="DISTCRAWL_REVISIT_EARLY")
    parser.add_argument("--settle", type=float, default=120.0, help="most s after the last epoch")
    parser.add_argument("--first-pass-timeout", type=float, default=900.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print_report(run(args), HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
