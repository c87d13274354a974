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

The fault search (``--search N``): N fault schedules drawn from ``--seed``, each a short crawl
(2-3 nodes, 100-200 products) through a fault-injecting Redis proxy, with a random mix of
proxy faults (error replies of every class, replies dropped, cut, delayed or stalled), node
SIGTERM / SIGKILL / SIGSTOP, Redis restarted, crashed, wiped or flushed, MongoDB stopped or
slow (:mod:`chaos_schedule`); each checked against every promise (:mod:`chaos_invariants`).
A violation prints its schedule's seed and the schedule; ``--replay SEED`` runs that schedule
again. The JSON has ``schedules``, ``violations`` (seed, invariant, what was seen, the
schedule) and ``violations_by_invariant``.

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
    .venv/bin/python bench/chaos.py --search 20 --seed 1 --json
    .venv/bin/python bench/chaos.py --replay 1234567 --json
    .venv/bin/python bench/chaos.py --search 20 --seed 1 --plant-bug misconf --until-violation

``--plant-bug misconf`` (with ``--search`` or ``--replay``) plants a known bug in the nodes (a
``MISCONF`` reply is no outage), to show that the search finds one
(``tests/e2e/test_search_finds_planted_bug.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _accounting import load_average, median
from _results import write_result
from chaos_run import (
    DEFAULT_JITTER,
    DEFAULT_LATENCY,
    DEFAULT_MIN_AGE,
    Chaos,
)
from chaos_search import DEFAULT_TIMEOUT, search

from distcrawl.base.config import PLANTED_BUG


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
    parser.add_argument(
        "--search", type=int, default=0, metavar="N",
        help="run N fault schedules drawn from --seed, checked against every promise",
    )  # fmt: skip
    parser.add_argument(
        "--replay", type=int, default=None, metavar="SEED",
        help="run the one fault schedule of this seed (as a violation printed it)",
    )  # fmt: skip
    parser.add_argument(
        "--schedule-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
        help="--search: a schedule not over after S seconds is reported hung",
    )  # fmt: skip
    parser.add_argument(
        "--plant-bug", choices=("misconf",), default=None,
        help="--search / --replay: plant a known bug in the nodes (misconf: MISCONF is no "
        "outage), to show that the search finds it",
    )  # fmt: skip
    parser.add_argument(
        "--until-violation", action="store_true",
        help="--search: stop after the first schedule with a violation",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.plant_bug and not (args.search or args.replay is not None):
        parser.error("--plant-bug goes with --search or --replay")
    if args.plant_bug:
        os.environ[PLANTED_BUG] = args.plant_bug  # the nodes inherit it
    if args.search or args.replay is not None:
        return search(args)
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
