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
from pathlib import Path
from typing import Any

import pymongo
from scrapy.settings import Settings

from distcrawl.base.config import SETTINGS
from distcrawl.base.names.commands import LIST_DEAD_LETTERS, STOP_SERVICES
from distcrawl.base.urls import mask_url
from distcrawl.demo.checks import account_dead_letters, check_fields, check_store
from distcrawl.demo.config import VARIANTS, ShopConfig
from distcrawl.demo.shop import DemoShop
from distcrawl.frontier import connection
from distcrawl.frontier.keys import MAX_SHARDS, default_shards
from distcrawl.frontier.store import FrontierKeys, FrontierStore
from distcrawl.servers.cluster import LocalRedisCluster
from distcrawl.servers.embedded import ensure_mongo, ensure_redis, services_status, stop_services

#: the seed list, on one server and on a Redis Cluster alike
START_KEY = "catalog:start_urls"
#: seconds a demo crawl may take before the nodes are stopped and the run reported as failed
DEFAULT_TIMEOUT = 600.0
#: most demo shops a run may start (one per loopback address 127.0.0.1 ...)
MAX_SITES = 250


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _shards(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SHARDS}, got {value}")
    return value


def _sites(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_SITES:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SITES}, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--products", type=_positive_int, default=300, help="products in each demo shop"
    )
    parser.add_argument(
        "--sites",
        type=_sites,
        default=1,
        help="demo shops, each a site of its own on 127.0.0.1, 127.0.0.2, ... (default 1): "
        "several sites spread the crawl over the frontier's shards (and a cluster's masters)",
    )
    parser.add_argument(
        "--shards",
        type=_shards,
        default=None,
        help="frontier shards (DISTCRAWL_SHARDS for the nodes; default: DISTCRAWL_SHARDS "
        "from the environment, else 16)",
    )
    parser.add_argument(
        "--nodes", type=_positive_int, default=2, help="scrapy crawl processes to run (1 or more)"
    )
    parser.add_argument(
        "--variant",
        choices=VARIANTS,
        default="jsonld",
        help="how product pages are marked up: schema.org JSON-LD (default), or one of the "
        "templates without structured data (plain has a bundled site profile, demo-plain.toml; "
        "bootstrap prints stock lines, a hex 'UPC' and a titled description; crowded and "
        "crowded-de crowd each product with other products' prices, codes and buy buttons, "
        "crowded-de in German notation)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="site profile file or folder for the nodes (default: none, generic extraction)",
    )
    parser.add_argument("--latency", type=float, default=0.0, help="shop latency per page, ms")
    parser.add_argument("--error-rate", type=float, default=0.0, help="fraction of 503s")
    parser.add_argument(
        "--home",
        help="state folder for the embedded servers, kept after the run (default: a new "
        "temporary folder whose servers are stopped at the end, deleted after a clean run)",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --home: delete the crawl that home already holds (products and frontier)",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=0,
        metavar="MASTERS",
        help="run the frontier on a fresh local Redis Cluster of this many masters",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds before the nodes are stopped and the run fails "
        f"(default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument(
        "--web", action="store_true", help="serve the live dashboard during the crawl"
    )
    parser.add_argument("--web-port", type=int, default=8470, help="dashboard port (0 = any free)")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Scrapy setting for every node (repeatable)",
    )


def node_command(index: int, log_file: Path, extra: list[str]) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "catalog",
        "-s",
        "DISTCRAWL_CLOSE_WHEN_DRAINED=1",
        "-s",
        f"LOG_FILE={log_file}",
    ]
    for setting in extra:
        cmd += ["-s", setting]
    return cmd


def shop_hosts(sites: int) -> list[str]:
    """The loopback address of each demo shop."""
    return [f"127.0.0.{i + 1}" for i in range(sites)]


def allowed_hosts(sites: int) -> str:
    """``DISTCRAWL_ALLOW_PRIVATE`` for the nodes: every demo shop's host."""
    return ",".join(dict.fromkeys([*shop_hosts(max(2, sites)), "localhost"]))


def node_env(
    redis_url: str,
    mongo_uri: str,
    home: Path,
    node_id: str,
    profiles: str = "",
    *,
    sites: int = 1,
    shards: int | None = None,
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SCRAPY_SETTINGS_MODULE="distcrawl.settings",
        REDIS_URL=redis_url,
        MONGO_URI=mongo_uri,
        DISTCRAWL_HOME=str(home),
        DISTCRAWL_NODE_ID=node_id,
        DISTCRAWL_ALLOW_PRIVATE=allowed_hosts(sites),
    )
    if shards is not None:
        env["DISTCRAWL_SHARDS"] = str(shards)
    if profiles:
        env["DISTCRAWL_SITE_PROFILES"] = profiles
    return env


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
        shops = [
            DemoShop(
                ShopConfig(
                    products=args.products,
                    variant=args.variant,
                    host=host,
                    latency_ms=args.latency,
                    error_rate=args.error_rate,
                    # random transient errors, not a site asking to slow down (that would
                    # carry Retry-After and cut the site's shared rate)
                    retry_after=None,
                )
            )
            for host in shop_hosts(args.sites)
        ]
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
            "queued": sum(r.zcard(s.queue) for s in in_shards),
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

    t0 = time.monotonic()
    for shop in shops:  # what `redis-cli lpush catalog:start_urls URL` does
        r.lpush(keys.start_urls, shop.url)
    procs = []
    for i in range(args.nodes):
        log_file = home / f"node-{i + 1}.log"
        procs.append(
            subprocess.Popen(
                node_command(i, log_file, [f"DISTCRAWL_SHARDS={args.shards}", *args.set]),
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
    seconds = time.monotonic() - t0
    pages = sum(
        1
        for shop in shops
        for e in shop.request_log()
        if e["status"] == 200 and e["path"] != "/robots.txt"
    )
    summary = check_store(collection, expected)
    summary.update(
        merge_fields([check_fields(collection, s.catalog, s.url, s.config.variant) for s in shops])
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
        nodes_failed=sum(1 for p in procs if p.returncode != 0),
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
    for check in checks:
        for name, n in check["fields_wrong_by_field"].items():
            by_field[name] = by_field.get(name, 0) + n
    return {
        "fields_wrong": sum(c["fields_wrong"] for c in checks),
        "fields_wrong_by_field": by_field,
        "fields_wrong_sample": [x for c in checks for x in c["fields_wrong_sample"]][:5],
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
