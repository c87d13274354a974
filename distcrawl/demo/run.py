"""Run a demo crawl: embedded Redis and MongoDB, the demo shop, K ``scrapy crawl catalog`` nodes.

Seeds ``catalog:start_urls`` exactly as ``redis-cli lpush`` would, shows progress while the
nodes work, then checks MongoDB against the shop's ground truth.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pymongo
from scrapy.settings import Settings

from distcrawl.base.config import SETTINGS
from distcrawl.base.names.commands import LIST_DEAD_LETTERS, STOP_SERVICES
from distcrawl.base.urls import mask_url
from distcrawl.demo.checks import account_dead_letters, check_fields, check_store
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.incident_checks import (
    ALLOWED_EXITS,
    expected_absent,
    incident_summary,
    shop_incidents,
)
from distcrawl.demo.nodes import allowed_hosts, node_command, node_env, shop_hosts
from distcrawl.demo.options import add_arguments
from distcrawl.demo.shop import DemoShop
from distcrawl.demo.webhook import WebhookReceiver
from distcrawl.frontier import connection
from distcrawl.frontier.keys import default_shards
from distcrawl.frontier.protocol.spec import queued_in
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.servers.cluster import LocalRedisCluster
from distcrawl.servers.embedded import ensure_mongo, ensure_redis, services_status, stop_services

__all__ = ["add_arguments", "crawl", "run"]

#: the seed list, on one server and on a Redis Cluster alike
START_KEY = "catalog:start_urls"


def _stop_on_sigterm() -> None:
    """SIGTERM (kill, a process manager) stops the demo as Ctrl-C does: through every cleanup."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def run(args: argparse.Namespace) -> int:
    _stop_on_sigterm()
    if args.shards is None:
        args.shards = default_shards()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="distcrawl-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    try:
        return _run(args, home, say)
    except KeyboardInterrupt:
        # every server and node the demo started is stopped by now (the clean-ups ran)
        print(_what_stays(args, home), file=sys.stderr, flush=True)
        raise


def _what_stays(args: argparse.Namespace, home: Path) -> str:
    """What an interrupted demo leaves behind, and how to get rid of it."""
    if not args.home:
        return (
            f"the demo leaves its node logs and server data in {home} ({_size(home)}): "
            f"`rm -r {home}` deletes them"
        )
    return "; ".join(_services_left(home)) or f"the crawl's data stays in {home}"


def _size(folder: Path) -> str:
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return f"{total / 1e6:.1f} MB"


def _services_left(home: Path) -> list[str]:
    """The embedded servers of *home* still running, and the command that stops them."""
    running = {n: i for n, i in services_status(home).items() if i["running"]}
    if not running:
        return []
    names = " and ".join(f"{n} ({mask_url(str(i['url']))})" for n, i in running.items())
    return [f"{names} of {home} keep running: `{STOP_SERVICES.line(home=home)}` stops them"]


def _run(args: argparse.Namespace, home: Path, say: Any) -> int:
    if args.incidents:
        if args.variant != "jsonld":
            print("error: --incidents switches jsonld product pages only", file=sys.stderr)
            return 2
        args.sites = max(2, args.sites)
    was_running = {name for name, info in services_status(home).items() if info["running"]}
    started_services = not args.home
    cluster: LocalRedisCluster | None = None
    try:
        if args.redis_cluster:
            cluster = LocalRedisCluster(home / "redis-cluster", masters=args.redis_cluster)
            redis_url = cluster.start().url
        else:
            redis_url = ensure_redis(home)
        mongo_uri = ensure_mongo(home)
        if args.home and not args.replace:
            held = crawl_in_home(redis_url, mongo_uri, args.shards)
            if held:
                print(
                    f"error: {home} holds a crawl ({', '.join(held)}); the demo would delete "
                    "it. Run again with --replace to delete it, or pick another --home.",
                    file=sys.stderr,
                )
                if not was_running:
                    stop_services(home)
                return 2
        configs = [
            ShopConfig(
                products=args.products,
                variant=args.variant,
                host=host,
                latency_ms=args.latency,
                error_rate=args.error_rate,
                # random transient errors, not a site asking to slow down (that would carry
                # Retry-After and cut the site's shared rate)
                retry_after=None,
            )
            for host in shop_hosts(args.sites)
        ]
        if args.incidents:
            configs = [
                replace(c, **shop_incidents(i, args.products)) for i, c in enumerate(configs)
            ]
        shops = [DemoShop(config) for config in configs]
        try:
            for shop in shops:
                shop.start()
                say(f"demo shop {shop.url} ({args.products} products, {args.variant})")
            say(
                f"redis {mask_url(redis_url)} ({args.shards} shards)  "
                f"mongodb {mask_url(mongo_uri)}  home {home}"
            )
            dashboard = start_dashboard(args, redis_url, mongo_uri, say) if args.web else None
            try:
                summary = crawl(args, shops, home, redis_url, mongo_uri, say)
            finally:
                if dashboard is not None:
                    dashboard.stop()
        finally:
            for shop in shops:
                shop.stop()
    finally:
        if cluster is not None:
            cluster.stop()
        if started_services:
            stop_services(home)
    # a dead letter is the shop's doing, reported as such; a lost product is the crawler's
    ok = (
        summary["lost"] == 0
        and summary["duplicates"] == 0
        and summary["nodes_failed"] == 0
        and summary["fields_wrong"] == 0
        and all(summary.get("incident_checks", {}).values())
    )
    # a temporary home holds nothing a clean run needs afterwards; a failed run's node logs and
    # server data stay for a look
    summary["home_kept"] = str(home) if args.home or not ok else None
    if not args.home and ok:
        shutil.rmtree(home, ignore_errors=True)
    # the summary names only what is still there
    summary["node_logs"] = [log for log in summary["node_logs"] if Path(log).exists()]
    summary["services_running"] = {
        name: mask_url(str(info["url"]))
        for name, info in (services_status(home).items() if home.exists() else ())
        if info["running"]
    }
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        say(
            f"\nexpected {summary['expected']}  stored {summary['stored']}  dead-lettered "
            f"{summary['dead_lettered']}  lost {summary['lost']}  duplicates "
            f"{summary['duplicates']}  fields wrong {summary['fields_wrong']}  "
            f"pages {summary['pages']}  "
            f"{summary['seconds']:.1f}s  ({summary['pages_per_s']:.0f} pages/s)"
        )
        if summary["dead_letters"]:
            reasons = ", ".join(f"{k} {v}" for k, v in summary["dead_letter_reasons"].items())
            say(
                f"dead letters {summary['dead_letters']} ({reasons}): the shop failed them on "
                f"every try; `{LIST_DEAD_LETTERS.line(spider='catalog')}` shows them"
            )
    if args.incidents and not args.json:
        for finding in summary["findings"]:
            say(f"finding: {finding.get('message')}")
        say(f"error groups {len(summary['error_groups'])}  notices {summary['webhook_notices']}")
        failed = [name for name, passed in summary["incident_checks"].items() if not passed]
        say("incident checks: " + (f"failed {', '.join(failed)}" if failed else "all passed"))
    if not args.home and not ok:
        say(f"node logs and server data kept in {home}")
    for line in _services_left(home) if args.home else ():
        say(line)
    return 0 if ok else 1


def crawl_in_home(redis_url: str, mongo_uri: str, shards: int | None = None) -> list[str]:
    """What of a crawl the embedded servers of a home hold (empty: nothing a demo would delete),
    read in ``shards`` shards (default: ``DISTCRAWL_SHARDS``)."""
    r = connection.client(redis_url)
    keys = FrontierKeys(spider="catalog", start_urls=START_KEY, shards=shards or default_shards())
    held = []
    try:
        in_shards = keys.all_shards()
        counts = {
            "seen URLs": sum(int(r.hget(s.seen_info, "n") or 0) for s in in_shards),
            "queued": sum(queued_in(r.zrange(s.levels, 0, -1, withscores=True)) for s in in_shards),
            "parked retries": sum(r.zcard(s.delayed) for s in in_shards),
            "dead letters": sum(r.hlen(s.dead) for s in in_shards),
            "seeds": r.llen(keys.start_urls),
        }
        held += [f"{label} {count}" for label, count in counts.items() if count]
    finally:
        r.close()
    mongo: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        products = mongo.get_default_database("catalog")["products"].estimated_document_count()
    finally:
        mongo.close()
    if products:
        held.insert(0, f"{products} products in catalog.products")
    return held


def start_dashboard(args: argparse.Namespace, redis_url: str, mongo_uri: str, say: Any) -> Any:
    """``--web``: this crawl's dashboard on a thread (``DISTCRAWL_WEB_TOKEN`` allows actions)."""
    from distcrawl.web.command import web_config
    from distcrawl.web.security import UnsafeBind
    from distcrawl.web.server import DashboardServer

    settings = Settings(
        {
            # the environment supplies a setting of its name (the token too), as on a node
            **SETTINGS.environment(os.environ),
            "REDIS_URL": redis_url,
            "MONGO_URI": mongo_uri,
            "DISTCRAWL_ALLOW_PRIVATE": allowed_hosts(args.sites),  # as the nodes' (node_env)
            "DISTCRAWL_SHARDS": args.shards,
        }
    )
    try:
        dashboard = DashboardServer(web_config(settings, "catalog"), port=args.web_port).start()
    except UnsafeBind as exc:
        raise SystemExit(f"error: {exc}") from None
    say(f"dashboard {dashboard.url}  metrics {dashboard.url}metrics")
    return dashboard


def crawl(
    args: argparse.Namespace,
    shops: list[DemoShop],
    home: Path,
    redis_url: str,
    mongo_uri: str,
    say: Any,
) -> dict[str, Any]:
    r = connection.client(redis_url)
    keys = FrontierKeys(spider="catalog", start_urls=START_KEY, shards=args.shards)
    for pattern in keys.patterns():
        for key in r.scan_iter(match=pattern, count=1000):
            r.delete(key)
    r.delete(keys.start_urls)
    mongo: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    collection = mongo.get_default_database("catalog")["products"]
    collection.drop()
    profiles = os.pathsep.join(args.profile)
    expected = set().union(*(shop.expected_product_urls() for shop in shops))

    receiver = WebhookReceiver().start() if args.incidents else None
    alerts = [f"DISTCRAWL_ALERT_WEBHOOK={receiver.url}"] if receiver is not None else []
    t0 = time.monotonic()
    for shop in shops:  # what `redis-cli lpush catalog:start_urls URL` does
        r.lpush(keys.start_urls, shop.url)
    procs = []
    for i in range(args.nodes):
        log_file = home / f"node-{i + 1}.log"
        procs.append(
            subprocess.Popen(
                node_command(i, log_file, [f"DISTCRAWL_SHARDS={args.shards}", *alerts, *args.set]),
                env=node_env(
                    redis_url,
                    mongo_uri,
                    home,
                    f"demo-node-{i + 1}",
                    profiles,
                    sites=args.sites,
                    shards=args.shards,
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    store = FrontierStore(r, keys)
    try:
        watch(procs, collection, store, len(expected), t0, args, say)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if receiver is not None:
            receiver.stop()
    seconds = time.monotonic() - t0
    allowed = ALLOWED_EXITS if args.incidents else {0}
    pages = sum(
        1
        for shop in shops
        for e in shop.request_log()
        if e["status"] == 200 and e["path"] != "/robots.txt"
    )
    summary = check_store(collection, expected)
    absent = expected_absent(shops) if args.incidents else None
    summary.update(
        merge_fields(
            [check_fields(collection, s.catalog, s.url, s.config.variant, absent) for s in shops]
        )
    )
    if receiver is not None:
        summary.update(
            incident_summary(shops, r, keys, mongo_uri, receiver, summary["fields_absent"])
        )
    stored = {doc["url"] for doc in collection.find({}, {"url": 1, "_id": 0})}
    letters = [v for shard in keys.all_shards() for v in r.hvals(shard.dead)]
    summary.update(shard_use(r, keys, connection.is_cluster_url(redis_url)))
    summary.update(account_dead_letters(expected - stored, letters, expected))
    summary.update(
        pages=pages,
        seconds=round(seconds, 2),
        pages_per_s=round(pages / seconds, 1) if seconds else 0.0,
        seed_list=keys.start_urls,
        nodes=args.nodes,
        sites=args.sites,
        shards=args.shards,
        nodes_exit_statuses=[p.returncode for p in procs],
        nodes_failed=sum(1 for p in procs if p.returncode not in allowed),
        node_logs=[str(home / f"node-{i + 1}.log") for i in range(args.nodes)],
        frontier_left=dict(
            zip(
                ("queued", "parked", "in_flight", "seeding", "start"),
                map(int, store.drained()),
                strict=True,
            )
        ),
    )
    mongo.close()
    return summary


def shard_use(r: Any, keys: FrontierKeys, cluster: bool) -> dict[str, Any]:
    """How many shards took URLs (their dupefilter counts any), and on a cluster how many
    masters hold those shards."""
    used = [s for s in keys.all_shards() if int(r.hget(s.seen_info, "n") or 0) > 0]
    out: dict[str, Any] = {"shards_used": len(used)}
    if cluster:
        out["masters_used"] = len({r.get_node_from_key(s.prefix).name for s in used})
    return out


def merge_fields(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The :func:`check_fields` results of several shops as one."""
    by_field: dict[str, int] = {}
    absent: dict[str, list[str]] = {}
    for check in checks:
        for name, n in check["fields_wrong_by_field"].items():
            by_field[name] = by_field.get(name, 0) + n
        for name, urls in check.get("fields_absent", {}).items():
            absent.setdefault(name, []).extend(urls)
    return {
        "fields_wrong": sum(c["fields_wrong"] for c in checks),
        "fields_wrong_by_field": by_field,
        "fields_wrong_sample": [x for c in checks for x in c["fields_wrong_sample"]][:5],
        "fields_absent": absent,
    }


def watch(
    procs: list[subprocess.Popen[bytes]],
    collection: Any,
    store: FrontierStore,
    expected: int,
    t0: float,
    args: argparse.Namespace,
    say: Any,
) -> None:
    """Show progress until every node has exited (or the timeout is reached)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]crawl"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} products"),
        TextColumn("{task.fields[frontier]}"),
        # the same clock as the summary's seconds (from the seed), not the bar's own
        TextColumn("{task.fields[elapsed]}"),
        console=console,
        transient=args.json,
        disable=not console.is_terminal and args.json,
    ) as progress:
        task = progress.add_task("crawl", total=expected, frontier="", elapsed="")
        last_line = 0.0
        while any(p.poll() is None for p in procs):
            if time.monotonic() - t0 > args.timeout:
                say(f"timeout after {args.timeout:.0f}s: stopping the nodes")
                break
            stored = collection.estimated_document_count()
            queued, parked, in_flight, _seeding, _start = map(int, store.drained())
            frontier = f"queued {queued} in flight {in_flight} parked retries {parked}"
            elapsed = time.monotonic() - t0
            progress.update(task, completed=stored, frontier=frontier, elapsed=f"{elapsed:.1f}s")
            if not console.is_terminal and time.monotonic() - last_line > 5:
                say(f"[{elapsed:5.1f}s] products {stored}/{expected} {frontier}")
                last_line = time.monotonic()
            time.sleep(0.5)
        progress.update(
            task,
            completed=collection.estimated_document_count(),
            elapsed=f"{time.monotonic() - t0:.1f}s",
        )
