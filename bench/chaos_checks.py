"""Chaos: what a run's crawl left, against the shop's ground truth and the nodes' logs."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pymongo
import redis

from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.spec import queued_in

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import ShopProcess
from _settings import SCRAPY_REDIS_DUPEFILTER, SCRAPY_REDIS_QUEUE, START_URLS_KEY

#: the frontier's key prefix (hash tag) for the catalog spider
KEYS = FrontierKeys("catalog", START_URLS_KEY)
#: a node's log line when it took back the leases of nodes it found dead
RECOVERED_LINE = re.compile(r"Recovered (\d+) requests from dead node\(s\) (.+?) \(no heartbeat")


def product_check(mongo_uri: str, database: str, truth: dict[str, Any]) -> dict[str, Any]:
    """The products MongoDB holds against the shop's ground truth (``truth``: the shop's
    ``/_shop/truth``), by product identity."""
    skus: dict[str, str] = truth["skus"]
    expected = {skus[urlsplit(url).path] for url in truth["expected"]}
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        mongo_uri, serverSelectionTimeoutMS=10000
    )
    try:
        docs = list(client[database]["products"].find({}, {"url": 1, "sku": 1, "_id": 1}))
    finally:
        client.close()
    # a product's identity is the shop's SKU of the page a document names, whatever URL
    # reached it: two documents of one product are a duplicate, which _id cannot show
    identities = [
        skus.get(urlsplit(str(d.get("url") or d["_id"])).path) or str(d.get("sku") or d["_id"])
        for d in docs
    ]
    per_product = Counter(identities)
    stored = set(per_product)
    return {
        "expected": len(expected),
        "stored": len(stored & expected),
        "lost": len(expected - stored),
        "duplicates": sum(n - 1 for n in per_product.values()),
        "documents": len(docs),
        "unexpected": len(stored - expected),
        "lost_sample": sorted(expected - stored)[:5],
    }


def frontier_left(r: redis.Redis) -> dict[str, Any]:
    """What the catalog crawl's frontier still holds: leases, queued, seeds, dead letters."""
    shards = KEYS.all_shards()
    leases = {
        key.decode(): int(r.hlen(key))
        for sh in shards
        for key in r.scan_iter(match=sh.held("*"), count=1000)
    }
    waiting = sum(
        int(r.zcard(key)) for sh in shards for key in r.scan_iter(match=sh.wait("*"), count=1000)
    )
    seeding = int(r.llen(KEYS.seeds.returned)) + sum(
        int(r.llen(key)) for key in r.scan_iter(match=KEYS.seeds.taken("*"), count=1000)
    )
    queued = sum(queued_in(r.zrange(sh.levels, 0, -1, withscores=True)) for sh in shards)
    delayed = sum(int(r.zcard(sh.delayed)) for sh in shards)
    return {
        "inflight_left": sum(leases.values()),
        "queued_left": queued + delayed + waiting,
        "queued_breakdown": {"queue": queued, "delayed": delayed, "waiting": waiting},
        "leases_left": {k: v for k, v in leases.items() if v},
        "seeding_left": seeding,
        "dead_letters": sum(int(r.hlen(sh.dead)) for sh in shards),
    }


def recovered_names(log: str) -> tuple[set[str], int]:
    """The nodes a node's log says it recovered as dead, and how many requests it took back."""
    names: set[str] = set()
    requests = 0
    for match in RECOVERED_LINE.finditer(log):
        names |= {n.strip() for n in match[2].split(",")}
        requests += int(match[1])
    return names, requests


class Checks:
    """The checks of a :class:`chaos_run.Chaos` run."""

    def _check(self, r: redis.Redis, shop: ShopProcess, total_pages: int) -> dict[str, Any]:
        """MongoDB against the shop's ground truth, and what the frontier still holds."""
        truth = self.truth = shop.truth()
        result = product_check(self.services.mongo_uri, "catalog", truth)
        result["pages"] = total_pages
        if self.baseline:
            result.update(
                inflight_left=None,
                queued_left=int(r.zcard(SCRAPY_REDIS_QUEUE)),
                dupefilter_size=int(r.scard(SCRAPY_REDIS_DUPEFILTER)),
            )
        else:
            result.update(frontier_left(r))
        result["start_left"] = int(r.llen(START_URLS_KEY))
        return result

    def _frontier_figures(self, r: redis.Redis) -> dict[str, Any]:
        """What the nodes' logs and their last stats in Redis say about the faults."""
        killed = {k["node"] for k in self.kills} | self.frozen
        recovered_live: set[str] = set()
        recovered_any: set[str] = set()
        logged = 0
        for node in self.nodes:
            names, requests = recovered_names(node.log())
            recovered_any |= names
            recovered_live |= names - killed
            logged += requests
        stale = counted = 0
        for key in r.scan_iter(match=KEYS.node("*"), count=1000):
            raw = r.hget(key, "info")
            try:
                stats = json.loads(raw or b"{}").get("stats", {})
            except ValueError:
                continue
            stale += int(stats.get("frontier/acks/stale", 0) or 0)
            counted += int(stats.get("frontier/recovered", 0) or 0)
        active = 0
        for shard in KEYS.all_shards():
            active += sum(int(float(n)) for n in r.hvals(shard.active))
        return {
            "recovered_live_nodes": len(recovered_live),
            "recovered_live_sample": sorted(recovered_live)[:5],
            # --node-freeze: the frozen node's leases went back to the queue meanwhile
            "frozen_recovered": sorted(self.frozen & recovered_any) if self.frozen else None,
            # the nodes' own count of recovered requests (frontier/recovered in their last
            # stats), against the log lines read above: a mismatch means the log line changed
            # and recovered_live_nodes cannot be trusted
            "recovered_requests": counted,
            "recovery_log_mismatch": counted != logged,
            "stale_acks": stale,
            "site_active_left": active,
            "site_concurrency": self.args.site_concurrency or None,
        }

    def _log_errors(self) -> dict[str, int]:
        counts = {}
        for node in self.nodes:
            text = node.log()
            errors = sum(1 for line in text.splitlines() if "] ERROR:" in line)
            errors += text.count("Traceback")
            if errors:
                counts[node.node_id] = errors
        return counts
