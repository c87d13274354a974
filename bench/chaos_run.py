"""Chaos: one run of the single-fault modes and the kills: fresh servers, a shop, K nodes,
N kills or one server fault, then the checks."""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _processes import Node, Services, ShopProcess, expected_pages, page_fetches
from _settings import (
    SCRAPY_REDIS_QUEUE,
    SCRAPY_REDIS_SETTINGS,
    START_URLS_KEY,
    spider_modules_setting,
)
from chaos_checks import KEYS, Checks
from chaos_faults import ServerFaults

#: shop latency (ms, plus 0..jitter): at 16 requests in flight per node, a 400-product crawl
#: at 40 ms is over in ~1.5 s, before a replacement node has even started; at 250-350 ms it
#: lasts ~10 s, so the kills land mid-crawl, on nodes holding full prefetch batches
DEFAULT_LATENCY = 250.0
DEFAULT_JITTER = 100.0
#: a node is killed only once it has crawled this long (since its "Spider opened" log line)
DEFAULT_MIN_AGE = 0.5
#: the kill points are drawn from this part of the crawl (fraction of its pages fetched)
KILL_WINDOW = (0.1, 0.85)
#: scrapy-redis baseline: seconds without a fetch, queue empty, before the tool stops nodes
BASELINE_QUIET = 6.0
#: the most lines a node may log for a whole Redis outage (--redis-oom)
MAX_OUTAGE_LOG_LINES = 100


def node_settings(args: argparse.Namespace, baseline: bool) -> dict[str, str]:
    settings = {
        **spider_modules_setting(),
        "LOG_LEVEL": "INFO",
        "DISTCRAWL_EMBEDDED": "False",
        "TELNETCONSOLE_ENABLED": "False",
        "CONCURRENT_REQUESTS": str(args.concurrency),
        "CONCURRENT_REQUESTS_PER_DOMAIN": str(args.concurrency),
    }
    if baseline:
        settings.update(SCRAPY_REDIS_SETTINGS)
        settings["MAX_IDLE_TIME_BEFORE_CLOSE"] = str(args.idle_close)
    else:
        settings.update(
            DISTCRAWL_CLOSE_WHEN_DRAINED="1",
            DISTCRAWL_DRAIN_GRACE="2",
            DISTCRAWL_HEARTBEAT_INTERVAL="0.5",
            DISTCRAWL_HEARTBEAT_TIMEOUT=str(args.heartbeat_timeout),
        )
        if args.site_concurrency:
            settings["DISTCRAWL_SITE_CONCURRENCY"] = str(args.site_concurrency)
    return settings


class Chaos(Checks, ServerFaults):
    """One chaos run: fresh servers, a shop, K nodes, N kills, then the checks."""

    def __init__(self, args: argparse.Namespace, seed: int, work: Path) -> None:
        self.args = args
        self.seed = seed
        self.rng = random.Random(seed)
        self.work = work
        self.baseline = args.baseline == "scrapy-redis"
        self.spider = "bench_scrapy_redis" if self.baseline else "catalog"
        self.settings = node_settings(args, self.baseline)
        self.nodes: list[Node] = []
        self.kills: list[dict[str, Any]] = []
        self.started_at = 0.0
        self.fault: threading.Thread | None = None
        self.fault_events: list[dict[str, Any]] = []
        self.frozen: set[str] = set()  # nodes frozen on purpose: their recovery is expected
        self.log_marks: dict[str, int] = {}  # node -> its log's size when the fault began
        self.log_lines: dict[str, int] = {}  # node -> lines it logged during the fault

    def say(self, text: str) -> None:
        if not self.args.quiet:
            print(f"[{time.time() - self.started_at:6.1f}s] {text}", file=sys.stderr, flush=True)

    def start_node(self) -> Node:
        node = Node(
            self.spider,
            node_id=f"chaos-{len(self.nodes) + 1}",
            log_dir=self.work,
            settings=self.settings,
            env={
                "REDIS_URL": self.services.redis_url,
                "MONGO_URI": self.services.mongo_uri,
                "DISTCRAWL_HOME": str(self.work / "home"),
            },
        )
        self.nodes.append(node)
        return node

    def run(self) -> dict[str, Any]:
        args = self.args
        self.services = Services(mongo=True, home=self.work / "services")
        try:
            with ShopProcess(
                products=args.products, latency_ms=args.latency, jitter_ms=args.jitter
            ) as shop:
                return self._run(shop)
        finally:
            for node in self.nodes:
                node.kill9()
            self.services.stop()

    def _run(self, shop: ShopProcess) -> dict[str, Any]:
        args = self.args
        r = redis.Redis.from_url(self.services.redis_url)
        total_pages = expected_pages(args.products)
        points = sorted(self.rng.uniform(*KILL_WINDOW) for _ in range(args.kills))
        fault_due = self._fault_name() is not None
        self.started_at = time.time()
        r.lpush(START_URLS_KEY, shop.url)  # what `redis-cli lpush catalog:start_urls URL` does
        for _ in range(args.nodes):
            self.start_node()
        fetched: set[str] = set()
        fetches = 0
        last_t = self.started_at
        last_progress = time.monotonic()
        deadline = time.monotonic() + args.timeout
        timed_out = False
        while True:
            new = page_fetches(shop.log(since=last_t))
            if new:
                last_t = new[-1]["t"]
                last_progress = time.monotonic()
                fetches += len(new)
                fetched.update(e["path"] for e in new)
            progress = len(fetched) / total_pages
            if fault_due and progress >= args.fault_at:
                fault_due = False
                self.fault = threading.Thread(target=self._inject, args=(progress,), daemon=True)
                self.fault.start()
            faulting = fault_due or (self.fault is not None and self.fault.is_alive())
            if points and progress >= points[0] and not faulting and self._kill(r, progress):
                points.pop(0)
            alive = [n for n in self.nodes if n.alive]
            if faulting and time.monotonic() <= deadline:
                time.sleep(0.1)  # the crawl is not over before the fault is
                continue
            if self.baseline:
                queued = r.zcard(SCRAPY_REDIS_QUEUE) + r.llen(START_URLS_KEY)
                if not alive and queued:
                    self.say(f"every node exited with {queued} requests queued: starting one")
                    self.start_node()
                elif (
                    alive
                    and not points
                    and not queued
                    and time.monotonic() - last_progress > BASELINE_QUIET
                ):
                    self.say(f"queue empty, no fetch for {BASELINE_QUIET:g}s: stopping nodes")
                    for node in alive:
                        node.stop()
                    break
            if not alive and (not points or self.baseline):
                break
            if not alive and points:
                # everything finished before the remaining kill points were reached
                self.say(f"crawl drained before {len(points)} more kill(s)")
                break
            if time.monotonic() > deadline:
                self.say(f"timeout after {args.timeout:g}s: stopping the nodes")
                timed_out = True
                break
            time.sleep(0.1)
        for node in self.nodes:
            node.stop(timeout=30)
        if self.fault is not None:
            self.fault.join()
        seconds = time.time() - self.started_at
        r.close()
        r = redis.Redis.from_url(self.services.redis_url)
        result = self._check(r, shop, total_pages)
        result.update(
            design="scrapy-redis" if self.baseline else "distcrawl",
            seed=self.seed,
            seconds=round(seconds, 1),
            timed_out=timed_out,
            kills=len(self.kills),
            kills_requested=args.kills,
            kill_events=self.kills,
            nodes=args.nodes,
            nodes_started=len(self.nodes),
            node_exit_codes={n.node_id: n.proc.returncode for n in self.nodes},
            node_log_errors=self._log_errors(),
            page_fetches=fetches + len(page_fetches(shop.log(since=last_t))),
            latency_ms=args.latency,
            jitter_ms=args.jitter,
            heartbeat_timeout=None if self.baseline else args.heartbeat_timeout,
            concurrency=args.concurrency,
            work=str(self.work),
        )
        log = page_fetches(shop.log(since=self.started_at))
        fetched_paths = Counter(e["path"] for e in log)
        result["pages_fetched_twice"] = sum(1 for c in fetched_paths.values() if c > 1)
        skus = self.truth["skus"]
        identities = Counter(skus.get(urlsplit(e["path"]).path, e["path"]) for e in log)
        result["refetched"] = sum(1 for c in identities.values() if c > 1)
        result["fetched_products"] = len(set(identities) & set(skus.values()))
        result["fault"] = self._fault_name()
        result["fault_events"] = self.fault_events
        result["fault_at"] = args.fault_at if self._fault_name() else None
        if not self.baseline:
            result.update(self._frontier_figures(r))
        if self.log_lines:
            result["log_lines_per_node"] = dict(self.log_lines)
            result["log_lines_max"] = max(self.log_lines.values())
        oom_ok = result["fault"] != "redis-oom" or (
            self.log_lines and max(self.log_lines.values()) < MAX_OUTAGE_LOG_LINES
        )
        frozen_ok = result["fault"] != "node-freeze" or bool(result.get("frozen_recovered"))
        result["ok"] = (
            result["lost"] == 0
            and result["duplicates"] == 0
            and result["queued_left"] == 0
            and result["inflight_left"] in (0, None)
            and result.get("site_active_left") in (0, None)
            and result.get("recovered_live_nodes") in (0, None)
            # an outage alone must not make anyone fetch a page twice
            and (result["refetched"] == 0 or args.kills or result["fault"] != "redis-outage")
            and bool(oom_ok)
            and frozen_ok
            and not timed_out
        )
        r.close()
        return result

    def _kill(self, r: redis.Redis, progress: float) -> bool:
        """kill -9 a random node that has been up long enough, and start a replacement."""
        candidates = [n for n in self.nodes if n.alive and n.crawling_for() >= self.args.min_age]
        if not candidates:
            return False
        victim = self.rng.choice(candidates)
        leases = (
            None
            if self.baseline
            else sum(int(r.hlen(sh.held(victim.node_id))) for sh in KEYS.all_shards())
        )
        victim.kill9()
        replacement = self.start_node()
        event = {
            "at_s": round(time.time() - self.started_at, 2),
            "progress": round(progress, 3),
            "node": victim.node_id,
            "leases_held": leases,
            "replacement": replacement.node_id,
        }
        self.kills.append(event)
        held = "" if leases is None else f" holding {leases} leases"
        self.say(
            f"kill -9 {victim.node_id} (pid {victim.pid}){held} at {progress:.0%} of the "
            f"pages; started {replacement.node_id}"
        )
        return True
