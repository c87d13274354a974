"""Chaos: kill -9 crawl nodes at random moments and check that no product is lost.

Runs a crawl of the demo shop (answering in 250-350 ms, so pages are in flight) on K
``scrapy crawl`` nodes with the MongoDB pipeline on (a fresh SecantusDB and a fresh
valkey-server per run), ``kill -9``s a random node N times at random points of the crawl,
starting a replacement each time, waits for the crawl to drain and checks MongoDB against the
shop's ground truth.

distcrawl: each replacement gets a NEW node id, so the dead node's leases come back only
through its heartbeat timeout (``--heartbeat-timeout``, default 4 s; nodes heart-beat every
0.5 s); the nodes close by themselves once the frontier is drained (CLOSE_WHEN_DRAINED).

``--baseline scrapy-redis``: the same scenario on vanilla scrapy-redis 0.9.1 (its Scheduler,
RFPDupeFilter, PriorityQueue, pickle serializer, SCHEDULER_PERSIST=True) with the same spider
logic. Its nodes close after MAX_IDLE_TIME_BEFORE_CLOSE idle seconds; the tool restarts killed
nodes, and stops the nodes once the queue is empty and no page was fetched for a while.

Faults of the servers (each once, when ``--fault-at`` of the pages are fetched; no kills
unless ``--kills`` is given too):

- ``--redis-outage S``: Redis stopped for S seconds (longer than the heartbeat timeout), then
  started again on its data; reports ``refetched`` (pages fetched more than once, products
  by identity, from the shop's own request log) and ``recovered_live_nodes`` (nodes whose
  leases another node took back although they were alive).
- ``--redis-rewind S``: Redis killed (SIGKILL) and started from a copy of its data taken S
  seconds earlier, as a failover to a lagging replica would; reports ``stale_acks`` (the
  nodes' ``frontier/acks/stale``).
- ``--redis-oom S``: Redis' ``maxmemory`` set below its use (``noeviction``) for S seconds,
  so it refuses every write (``OOM``), then lifted; reports ``log_lines_per_node`` (lines
  each node logged from the fault's start to its line saying Redis is back, or to
  :data:`LOG_SETTLE` seconds after the fault: an outage is one line when it starts and one
  when it ends).
- ``--redis-freeze S``: Redis frozen (SIGSTOP) for S seconds, then resumed (SIGCONT): it
  answers nothing, connections stay open, what the nodes sent waits in its sockets.
- ``--node-freeze S``: a node holding leases frozen (SIGSTOP) for S seconds (longer than the
  heartbeat timeout), then resumed: another node recovers its leases
  (``frozen_recovered``), and its late acks are fenced (``stale_acks``).
- ``--mongo-kill``: the MongoDB server killed with SIGKILL and started again
  (``--mongo-down`` seconds later).
- ``--site-concurrency N``: a per-site concurrency limit (``DISTCRAWL_SITE_CONCURRENCY``);
  reports ``site_active_left`` (slots still taken once the crawl drained: must be 0).

Duplicates are counted by product identity (the shop's SKU of the page a document names),
not by ``_id`` (the URL, which can never repeat).

    .venv/bin/python bench/chaos.py --products 400 --nodes 2 --kills 3 --json
    .venv/bin/python bench/chaos.py --products 400 --nodes 2 --kills 3 --baseline scrapy-redis
    .venv/bin/python bench/chaos.py --redis-outage 30 --json
    .venv/bin/python bench/chaos.py --redis-rewind 2 --site-concurrency 2 --json
    .venv/bin/python bench/chaos.py --mongo-kill --json
    .venv/bin/python bench/chaos.py --redis-oom 30 --json
    .venv/bin/python bench/chaos.py --redis-freeze 45 --json
    .venv/bin/python bench/chaos.py --node-freeze 40 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pymongo
import redis

from distcrawl.frontier.keys import FrontierKeys

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _accounting import load_average, median
from _processes import Node, Services, ShopProcess, expected_pages, page_fetches
from _results import write_result
from _settings import (
    SCRAPY_REDIS_DUPEFILTER,
    SCRAPY_REDIS_QUEUE,
    SCRAPY_REDIS_SETTINGS,
    START_URLS_KEY,
    spider_modules_setting,
)

#: the frontier's key prefix (hash tag) for the catalog spider
KEYS = FrontierKeys("catalog", START_URLS_KEY)
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
#: a node's log line when it took back the leases of nodes it found dead
RECOVERED_LINE = re.compile(r"Recovered (\d+) requests from dead node\(s\) (.+?) \(no heartbeat")
#: seconds after a fault's end whose log lines still count as the fault's (its end line)
LOG_SETTLE = 10.0
#: --redis-oom sets maxmemory to this share of the memory Redis uses: it refuses every write
#: (a limit just above the use, as a growing crawl meets it, may be met late or never by a
#: crawl that frees as much as it writes)
OOM_SHARE = 0.5
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


class Chaos:
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

    def _check(self, r: redis.Redis, shop: ShopProcess, total_pages: int) -> dict[str, Any]:
        """MongoDB against the shop's ground truth, and what the frontier still holds."""
        truth = self.truth = shop.truth()
        skus: dict[str, str] = truth["skus"]
        expected = {skus[urlsplit(url).path] for url in truth["expected"]}
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            self.services.mongo_uri, serverSelectionTimeoutMS=10000
        )
        try:
            docs = list(client["catalog"]["products"].find({}, {"url": 1, "sku": 1, "_id": 1}))
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
        result: dict[str, Any] = {
            "expected": len(expected),
            "stored": len(stored & expected),
            "lost": len(expected - stored),
            "duplicates": sum(n - 1 for n in per_product.values()),
            "documents": len(docs),
            "unexpected": len(stored - expected),
            "lost_sample": sorted(expected - stored)[:5],
            "pages": total_pages,
        }
        if self.baseline:
            result.update(
                inflight_left=None,
                queued_left=int(r.zcard(SCRAPY_REDIS_QUEUE)),
                dupefilter_size=int(r.scard(SCRAPY_REDIS_DUPEFILTER)),
            )
        else:
            shards = KEYS.all_shards()
            leases = {
                key.decode(): int(r.hlen(key))
                for sh in shards
                for key in r.scan_iter(match=sh.held("*"), count=1000)
            }
            waiting = sum(
                int(r.zcard(key))
                for sh in shards
                for key in r.scan_iter(match=sh.wait("*"), count=1000)
            )
            seeding = int(r.llen(KEYS.seeds.returned)) + sum(
                int(r.llen(key)) for key in r.scan_iter(match=KEYS.seeds.taken("*"), count=1000)
            )
            queued = sum(int(r.zcard(sh.queue)) for sh in shards)
            delayed = sum(int(r.zcard(sh.delayed)) for sh in shards)
            result.update(
                inflight_left=sum(leases.values()),
                queued_left=queued + delayed + waiting,
                queued_breakdown={"queue": queued, "delayed": delayed, "waiting": waiting},
                leases_left={k: v for k, v in leases.items() if v},
                seeding_left=seeding,
                dead_letters=sum(int(r.hlen(sh.dead)) for sh in shards),
            )
        result["start_left"] = int(r.llen(START_URLS_KEY))
        return result

    def _fault_name(self) -> str | None:
        args = self.args
        for name in ("redis_outage", "redis_rewind", "redis_oom", "redis_freeze", "node_freeze"):
            if getattr(args, name):
                return name.replace("_", "-")
        if args.mongo_kill:
            return "mongo-kill"
        return None

    def _mark_logs(self) -> None:
        """Where each node's log is now: the fault's lines are those written after this."""
        for node in self.nodes:
            self.log_marks[node.node_id] = _size(node.log_file)

    def _count_log_lines(self) -> None:
        """Lines each node logged since :meth:`_mark_logs` (a node started since: all), up to
        its line saying Redis is back where it wrote one (what follows is the crawl's)."""
        for node in self.nodes:
            try:
                with open(node.log_file, "rb") as log:
                    log.seek(self.log_marks.get(node.node_id, 0))
                    text = log.read()
            except OSError:
                text = b""
            back = text.find(b"Redis is back")
            if back >= 0:
                text = text[: text.find(b"\n", back) + 1 or len(text)]
            self.log_lines[node.node_id] = text.count(b"\n")

    def _inject(self, progress: float) -> None:
        """The server fault, in a thread of its own while the crawl goes on."""
        args, fault = self.args, self._fault_name()
        event: dict[str, Any] = {
            "fault": fault,
            "at_s": round(time.time() - self.started_at, 2),
            "progress": round(progress, 3),
        }
        if fault == "redis-outage":
            self.say(f"Redis stopped for {args.redis_outage:g}s at {progress:.0%} of the pages")
            self.services.redis.stop()
            time.sleep(args.redis_outage)
            self.services.redis.start()
            self.say("Redis started again")
        elif fault == "redis-rewind":
            # the copy is taken S seconds before the crash: what a lagging replica holds
            redis_dir = self.services.redis.data_dir
            copy = self.work / "redis-copy"
            shutil.copytree(redis_dir, copy)
            event["copied_at_s"] = round(time.time() - self.started_at, 2)
            time.sleep(args.redis_rewind)
            self.services.redis.kill()
            shutil.rmtree(redis_dir)
            shutil.copytree(copy, redis_dir)
            self.services.redis.start()
            self.say(
                f"Redis killed and restarted from its data of {args.redis_rewind:g}s earlier "
                f"at {progress:.0%} of the pages"
            )
        elif fault == "redis-oom":
            client = redis.Redis.from_url(self.services.redis_url)
            used = int(client.info("memory")["used_memory"])
            limit = int(used * OOM_SHARE)
            self._mark_logs()
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", limit)
            event["maxmemory"] = limit
            self.say(
                f"Redis maxmemory {limit} (used {used}, noeviction) for {args.redis_oom:g}s "
                f"at {progress:.0%} of the pages"
            )
            time.sleep(args.redis_oom)
            event["oom_errors"] = _oom_errors(client)
            client.config_set("maxmemory", 0)
            client.close()
            self.say("Redis maxmemory lifted")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "redis-freeze":
            pid = self.services.redis.pid
            assert pid is not None
            self._mark_logs()
            self.say(f"Redis frozen (SIGSTOP) for {args.redis_freeze:g}s at {progress:.0%}")
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(args.redis_freeze)
            finally:
                os.kill(pid, signal.SIGCONT)
            self.say("Redis resumed (SIGCONT)")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "node-freeze":
            r = redis.Redis.from_url(self.services.redis_url)
            holding = [
                (sum(int(r.hlen(sh.held(n.node_id))) for sh in KEYS.all_shards()), n)
                for n in self.nodes
                if n.alive
            ]
            r.close()
            leases, victim = max(holding, key=lambda t: t[0])
            self.frozen.add(victim.node_id)
            event.update(node=victim.node_id, leases_held=leases)
            self._mark_logs()
            self.say(
                f"{victim.node_id} frozen (SIGSTOP) for {args.node_freeze:g}s holding {leases} "
                f"leases at {progress:.0%}"
            )
            os.kill(victim.pid, signal.SIGSTOP)
            try:
                time.sleep(args.node_freeze)
            finally:
                os.kill(victim.pid, signal.SIGCONT)
            self.say(f"{victim.node_id} resumed (SIGCONT)")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "mongo-kill":
            assert self.services.mongo is not None
            self.say(f"kill -9 MongoDB at {progress:.0%} of the pages")
            self.services.mongo.kill()
            time.sleep(args.mongo_down)
            self.services.mongo.start()
            self.say("MongoDB started again")
        event["done_s"] = round(time.time() - self.started_at, 2)
        self.fault_events.append(event)

    def _frontier_figures(self, r: redis.Redis) -> dict[str, Any]:
        """What the nodes' logs and their last stats in Redis say about the faults."""
        killed = {k["node"] for k in self.kills} | self.frozen
        recovered_live: set[str] = set()
        recovered_any: set[str] = set()
        logged = 0
        for node in self.nodes:
            for match in RECOVERED_LINE.finditer(node.log()):
                names = {n.strip() for n in match[2].split(",")}
                recovered_any |= names
                recovered_live |= names - killed
                logged += int(match[1])
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


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _oom_errors(client: redis.Redis) -> int | None:
    """Commands Redis refused for memory so far (``errorstat_OOM``), where it counts them."""
    try:
        stats = client.info("errorstats")
    except redis.RedisError:
        return None
    oom = stats.get("errorstat_OOM")
    return int(oom["count"]) if isinstance(oom, dict) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=2, help="nodes crawling at once")
    parser.add_argument(
        "--kills", type=int, default=None,
        help="kill -9 this many times (default 3, or 0 with a server fault)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, help="seed of the kill schedule (default: random)")
    parser.add_argument("--runs", type=int, default=1, help="repeat with seeds seed, seed+1, ...")
    parser.add_argument("--baseline", choices=("scrapy-redis",), help="run vanilla scrapy-redis")
    parser.add_argument(
        "--latency", type=float, default=DEFAULT_LATENCY, metavar="MS", help="shop latency"
    )
    parser.add_argument(
        "--jitter", type=float, default=DEFAULT_JITTER, metavar="MS", help="plus 0..MS at random"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="CONCURRENT_REQUESTS")
    parser.add_argument(
        "--heartbeat-timeout", type=float, default=4.0, metavar="S",
        help="DISTCRAWL_HEARTBEAT_TIMEOUT: a killed node's leases return after this",
    )  # fmt: skip
    parser.add_argument(
        "--idle-close", type=int, default=5, metavar="S",
        help="scrapy-redis MAX_IDLE_TIME_BEFORE_CLOSE",
    )  # fmt: skip
    parser.add_argument("--min-age", type=float, default=DEFAULT_MIN_AGE, metavar="S")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep node logs even when ok")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--redis-outage", type=float, default=0.0, metavar="S", help="stop Redis for S seconds"
    )
    parser.add_argument(
        "--redis-rewind", type=float, default=0.0, metavar="S",
        help="kill Redis and restart it from a copy of its data taken S seconds earlier",
    )  # fmt: skip
    parser.add_argument(
        "--redis-oom", type=float, default=0.0, metavar="S",
        help="Redis out of memory (maxmemory just above its use, noeviction) for S seconds",
    )  # fmt: skip
    parser.add_argument(
        "--redis-freeze", type=float, default=0.0, metavar="S",
        help="freeze Redis (SIGSTOP) for S seconds",
    )  # fmt: skip
    parser.add_argument(
        "--node-freeze", type=float, default=0.0, metavar="S",
        help="freeze the node holding most leases (SIGSTOP) for S seconds",
    )  # fmt: skip
    parser.add_argument("--mongo-kill", action="store_true", help="kill -9 MongoDB, restart it")
    parser.add_argument(
        "--mongo-down", type=float, default=3.0, metavar="S",
        help="with --mongo-kill: seconds before MongoDB starts again",
    )  # fmt: skip
    parser.add_argument(
        "--site-concurrency", type=int, default=0, metavar="N",
        help="DISTCRAWL_SITE_CONCURRENCY: at most N requests of the shop in flight",
    )  # fmt: skip
    parser.add_argument(
        "--fault-at", type=float, default=0.3, metavar="F",
        help="inject the server fault once this fraction of the pages is fetched",
    )  # fmt: skip
    args = parser.parse_args(argv)
    faults = [
        bool(args.redis_outage),
        bool(args.redis_rewind),
        bool(args.redis_oom),
        bool(args.redis_freeze),
        bool(args.node_freeze),
        args.mongo_kill,
    ]
    if sum(faults) > 1:
        parser.error(
            "give one of --redis-outage, --redis-rewind, --redis-oom, --redis-freeze, "
            "--node-freeze, --mongo-kill"
        )
    if args.baseline and any(faults):
        parser.error("server faults are measured on distcrawl only")
    if args.kills is None:
        args.kills = 0 if any(faults) else 3
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)

    load_before = load_average()
    results = []
    for i in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="distcrawl-chaos-"))
        result = Chaos(args, seed + i, work).run()
        # node logs are kept when distcrawl lost something: they are the evidence
        if not args.keep and (result["ok"] or args.baseline):
            shutil.rmtree(work, ignore_errors=True)
            result.pop("work")
        results.append(result)
        if not args.json:
            print_result(result)
    machine = {"load_before": load_before, "load_after": load_average()}
    if args.runs == 1:
        output: dict[str, Any] = {**results[0], "machine": machine}
    else:
        lost = [r["lost"] for r in results]
        output = {
            "design": results[0]["design"],
            "runs": results,
            "lost_median": median(lost),
            "lost_min": min(lost),
            "lost_max": max(lost),
            "lost_per_run": lost,
            "duplicates_max": max(r["duplicates"] for r in results),
            "refetched_max": max(r["refetched"] for r in results),
            "inflight_left_max": max((r["inflight_left"] or 0) for r in results),
            "queued_left_max": max(r["queued_left"] for r in results),
            "ok_runs": sum(1 for r in results if r["ok"]),
            "machine": machine,
        }
    write_result(output)
    if args.json:
        print(json.dumps(output))
    elif args.runs > 1:
        print(f"lost per run {output['lost_per_run']} (median {output['lost_median']})")
    return 0 if all(r["ok"] for r in results) or args.baseline else 1


def print_result(result: dict[str, Any]) -> None:
    print(
        f"{result['design']}: expected {result['expected']}  stored {result['stored']}  "
        f"lost {result['lost']}  duplicates {result['duplicates']}  kills {result['kills']}  "
        f"inflight_left {result['inflight_left']}  queued_left {result['queued_left']}  "
        f"refetched {result['refetched']}  "
        + (
            f"recovered_live_nodes {result['recovered_live_nodes']}  "
            f"stale_acks {result['stale_acks']}  site_active_left {result['site_active_left']}  "
            if "recovered_live_nodes" in result
            else ""
        )
        + f"fault {result['fault']}  "
        f"{result['seconds']:.1f}s" + ("" if result["ok"] else f"  (logs: {result.get('work')})")
    )


if __name__ == "__main__":
    sys.exit(main())
