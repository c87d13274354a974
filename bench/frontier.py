"""The frontier's own capacity: no HTTP, no Scrapy engine, only the real store and script code.

Simulated nodes (processes) drive the frontier exactly as a node's I/O loop does: one ``sync``
per flush that acks the pages of the last lease, pushes their links and leases the next
batch. Each leased page pushes ``--links`` links (default 20) of which ``--seen`` (default
95 %) are already in the dupefilter, so about one new URL per page as in a steady crawl, over
``--sites`` sites (default 1,000). Payloads are made by the real codec from the requests a
catalog page yields (Referer header, page kind, depth), fingerprints as Scrapy's (40 hex).

Measured against a fresh single Redis (valkey-server, append-only file on), and with
``--cluster 3`` against a local 3-master Redis Cluster, the two loads alternating in
``--rounds`` windows (default 3) so both see the same machine load; the same load also runs through
vanilla scrapy-redis 0.9.1's ``PriorityQueue`` and ``RFPDupeFilter`` as a baseline
(``scrapy_redis_*`` keys). Memory per URL is measured at ``--urls N`` (default 1,000,000)
URLs, bulk-loaded through the real push path in large batches.

    .venv/bin/python bench/frontier.py --json
    .venv/bin/python bench/frontier.py --cluster 3 --json
    .venv/bin/python bench/frontier.py --urls 4000000 --seconds 0 --json   # memory only

With ``--revisit`` the frontier runs in revisit mode (DISTCRAWL_REVISIT): the dupefilter
forgets (generations of ``--forget`` seconds), every ack schedules its page again after
``--revisit-interval`` seconds with a payload carrying an ETag, a Last-Modified date and a
content hash, and the memory run also leases every loaded URL once and schedules it again:
``revisit_bytes_per_url`` is what a scheduled page costs (its due entry and its payload).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from distcrawl.base.config import SETTINGS
from distcrawl.frontier.keys import DEFAULT_SHARDS
from distcrawl.node.scheduler.tracking import DEFAULT_KNOWN_FINGERPRINTS
from distcrawl.servers.cluster import LocalRedisCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _frontier_load import cluster_shards, node_args
from _frontier_memory import distcrawl_memory, scrapy_redis_memory
from _frontier_nodes import distcrawl_node, preload, scrapy_redis_node, scrapy_redis_preload
from _frontier_runs import run_alternating, run_load
from _processes import Services
from _results import print_report

HEADLINE = (
    "pages_per_second",
    "redis_cpu_us_per_page",
    "commands_per_page",
    "roundtrips_per_page",
    "seen_bytes_per_url",
    "queued_bytes_per_url",
    "priority_inversions",
    "revisit_bytes_per_url",
    "scrapy_redis_pages_per_second",
    "scrapy_redis_redis_cpu_us_per_page",
)


def single_target(services: Services) -> dict[str, Any]:
    import redis

    return {"url": services.redis_url, "clients": [redis.Redis.from_url(services.redis_url)]}


def cluster_target(cluster: LocalRedisCluster) -> dict[str, Any]:
    return {"url": cluster.url, "clients": [m.client() for m in cluster.masters]}


def cluster_report(
    single: dict[str, Any],
    run: dict[str, Any],
    args: argparse.Namespace,
    at_rate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cpu = run["cpu_per_master"]
    total = sum(cpu) or 1e-9
    shares = [c / total for c in cpu]
    overhead = run["redis_cpu_us_per_page"] / single["redis_cpu_us_per_page"]
    same_rate: dict[str, Any] = {}
    if at_rate is not None:
        # the masters' CPU per page over that of the single Redis serving one master's rate
        equal = run["redis_cpu_us_per_page"] / at_rate["redis_cpu_us_per_page"]
        same_rate = {
            "single_at_master_rate_pages_per_second": at_rate["pages_per_second"],
            "single_at_master_rate_redis_cpu_us_per_page": at_rate["redis_cpu_us_per_page"],
            "cluster_cpu_overhead_at_master_rate": round(equal, 3),
        }
    return {
        **same_rate,
        "cluster_masters": args.cluster,
        "rounds": args.rounds,
        "cluster_pages_per_second": run["pages_per_second"],
        "cluster_redis_cpu_us_per_page": run["redis_cpu_us_per_page"],
        "cluster_commands_per_page": run["commands_per_page"],
        "cluster_roundtrips_per_page": run["roundtrips_per_page"],
        "share_per_master": [round(s, 3) for s in shares],
        "balance_max_over_mean": round(max(shares) / (1 / len(shares)), 3),
        "cluster_cpu_overhead": round(overhead, 3),
        "projected_speedup": round(1 / (max(shares) * overhead), 2),
        # where the cluster's extra CPU goes: the masters' commands, summed, as for one Redis
        "cluster_commands_per_page_by_name": run["commands_per_page_by_name"],
        "cluster_command_us_per_page_by_name": run["command_us_per_page_by_name"],
        "cluster_commands_per_page_by_master": run["commands_per_page_by_master"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--nodes", type=int, default=2, help="simulated node processes")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each load run")
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--links", type=int, default=20, help="links pushed per page")
    parser.add_argument("--seen", type=float, default=0.95, help="share of links already seen")
    parser.add_argument(
        "--lease",
        type=int,
        default=SETTINGS.default("DISTCRAWL_PREFETCH"),
        help="leases per flush (default: a node's DISTCRAWL_PREFETCH at the default concurrency)",
    )
    parser.add_argument("--urls", type=int, default=1_000_000, help="URLs loaded for memory")
    parser.add_argument("--cluster", type=int, default=0, help="masters of a Redis Cluster run")
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"frontier shards (default {DEFAULT_SHARDS}; with --cluster M, the first multiple "
        f"of M from {DEFAULT_SHARDS}, as the docs advise for a cluster)",
    )
    parser.add_argument("--dupefilter", choices=("exact", "bloom"), default="exact")
    parser.add_argument(
        "--known",
        type=int,
        default=DEFAULT_KNOWN_FINGERPRINTS,
        help="fingerprints a node remembers having sent and drops links to, as the scheduler "
        "does (0: every link goes to Redis)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip scrapy-redis")
    parser.add_argument("--revisit", action="store_true", help="revisit mode (see above)")
    parser.add_argument(
        "--revisit-interval", type=float, default=5.0, help="seconds before a page comes back"
    )
    parser.add_argument(
        "--forget", type=float, default=2 * 6 * 3600 * 4.0, help="dupefilter generation, s"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="with --cluster: windows the single-Redis and the cluster load alternate in",
    )
    args = parser.parse_args(argv)
    args.rounds = max(1, args.rounds)
    if args.shards is None:
        args.shards = cluster_shards(args.cluster) if args.cluster else DEFAULT_SHARDS
    # a SIGTERM unwinds like Ctrl-C, so every server this run started is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    report: dict[str, Any] = {
        "nodes": args.nodes,
        "seconds": args.seconds,
        "sites": args.sites,
        "links_per_page": args.links,
        "seen_share": args.seen,
        "lease": args.lease,
        "shards": args.shards,
        "dupefilter": args.dupefilter,
        "revisit": args.revisit,
        "known": args.known,
    }
    params = node_args(args)
    cluster: LocalRedisCluster | None = None
    if args.cluster and args.seconds > 0:
        home = Path(tempfile.mkdtemp(prefix="distcrawl-bench-cluster-"))
        cluster = LocalRedisCluster(home, masters=args.cluster).start()
    try:
        with Services() as services:
            single = single_target(services)
            if args.seconds > 0:
                preload(services.redis_url, args.sites, params)
                if cluster is not None:
                    preload(cluster.url, args.sites, params)
                    run, on_cluster, at_rate = run_alternating(
                        single, cluster_target(cluster), args
                    )
                    report.update(cluster_report(run, on_cluster, args, at_rate))
                else:
                    run = run_load(single, distcrawl_node, args)
                run.pop("cpu_per_master")
                run.pop("commands_per_page_by_master")
                report.update(run)
            if args.urls > 0:
                report.update(distcrawl_memory(services.redis_url, args.urls, params))
            if not args.no_baseline:
                single["clients"][0].flushall()
                if args.seconds > 0:
                    scrapy_redis_preload(services.redis_url, args.sites)
                    base = run_load(single, scrapy_redis_node, args)
                    for key in (
                        "pages_per_second",
                        "redis_cpu_us_per_page",
                        "commands_per_page",
                        "roundtrips_per_page",
                    ):
                        report[f"scrapy_redis_{key}"] = base[key]
                if args.urls > 0:
                    sr = scrapy_redis_memory(services.redis_url, args.urls, args.sites)
                    report.update({f"scrapy_redis_{k}": v for k, v in sr.items()})
            single["clients"][0].flushall()
    finally:
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(cluster.home, ignore_errors=True)
    print_report(report, HEADLINE, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
