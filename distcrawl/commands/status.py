"""``status``: the whole cluster at a glance: queue by page kind, parked retries, nodes and their
heartbeats, pages/min and products/min, dead letters, errors and the time left to drain.

``scrapy status [SPIDER]`` on any node, or ``distcrawl status [SPIDER]``; ``--watch`` redraws
it live, ``--json`` prints one JSON object for scripts. Rates need two heartbeats of a node:
a one-shot status waits for them (``--sample``), ``--watch`` averages over the last minute.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from typing import TYPE_CHECKING, Any

import pymongo
import redis
from pymongo.errors import PyMongoError
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.commands._common import (
    add_spider_argument,
    check_crawl,
    crawl_keys,
    entry_points,
    heartbeat_interval,
    heartbeat_timeout,
    page_priorities,
    redis_client,
    redis_error,
    redis_url,
    warn_if_no_crawl,
)
from distcrawl.ops.progress import progress_line
from distcrawl.ops.status import RateTracker, build_status, read_snapshot
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE, resolve_home, services_status

if TYPE_CHECKING:
    from rich.console import RenderableType
    from scrapy.settings import BaseSettings

    from distcrawl.frontier.store import FrontierKeys

__all__ = ["Command", "add_arguments", "collect", "execute", "render", "run"]

#: seconds between two redraws of ``--watch``
DEFAULT_WATCH_INTERVAL = 2.0
#: polls per second while a one-shot status waits for a second heartbeat of every node
_POLL = 0.25


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--watch",
        action="store_true",
        help="redraw live until Ctrl-C (into a pipe or file: one line per interval)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_WATCH_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between redraws with --watch (default {DEFAULT_WATCH_INTERVAL:g})",
    )
    parser.add_argument(
        "--sample",
        type=float,
        default=None,
        metavar="SECONDS",
        help="one-shot: wait up to this long for a second heartbeat of every live node, to "
        "derive rates (default: the heartbeat interval + 1 s; 0 = no rates)",
    )
    parser.add_argument(
        "--no-store",
        action="store_true",
        help="do not count the products stored in MongoDB",
    )


def collect(
    client: Any,
    keys: FrontierKeys,
    settings: BaseSettings,
    *,
    sample: float | None = None,
    tracker: RateTracker | None = None,
) -> dict[str, Any]:
    """One status. Without a *tracker* (one-shot), sample until every live node has shown two
    heartbeats or *sample* seconds have passed."""
    priorities = page_priorities(settings)
    timeout = heartbeat_timeout(settings)
    grace: float = SETTINGS.value(settings, "DISTCRAWL_REVISIT_GRACE")
    if tracker is not None:
        snapshot = read_snapshot(client, keys, page_priorities=priorities)
        tracker.update(snapshot)
        return build_status(snapshot, tracker, heartbeat_timeout=timeout, revisit_grace=grace)
    tracker = RateTracker()
    wait = heartbeat_interval(settings) + 1.0 if sample is None else sample
    deadline = time.monotonic() + wait
    while True:
        snapshot = read_snapshot(client, keys, page_priorities=priorities, dead_sample=0)
        tracker.update(snapshot)
        status = build_status(snapshot, tracker, heartbeat_timeout=timeout, revisit_grace=grace)
        live = [n for n in status["nodes"] if n["state"] == "live"]
        if all(n["pages_per_min"] is not None for n in live) or time.monotonic() >= deadline:
            break
        time.sleep(_POLL)
    snapshot = read_snapshot(client, keys, page_priorities=priorities)
    tracker.update(snapshot)
    return build_status(snapshot, tracker, heartbeat_timeout=timeout, revisit_grace=grace)


def stored_products(settings: BaseSettings) -> int | None:
    """Products in MongoDB (``MONGO_URI``, else the embedded server if one runs), or None."""
    uri: str = SETTINGS.value(settings, "MONGO_URI")
    if not uri:
        home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
        mongo = services_status(home)["mongo"]
        uri = mongo["url"] if mongo["running"] else ""
    if not uri:
        return None
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        uri, serverSelectionTimeoutMS=3000, connectTimeoutMS=3000, socketTimeoutMS=10000
    )
    try:
        # the pipeline's choice: MONGO_DATABASE, else the URI's database, else "catalog"
        name = SETTINGS.value(settings, "MONGO_DATABASE")
        database = client[name] if name else client.get_default_database(DEFAULT_MONGO_DATABASE)
        collection = database[SETTINGS.value(settings, "MONGO_COLLECTION")]
        return int(collection.estimated_document_count())
    except PyMongoError:
        return None
    finally:
        client.close()


def _add_context(status: dict[str, Any], settings: BaseSettings, url: str, store: bool) -> None:
    status["redis"] = mask_url(url)
    if store:
        status["store"] = {"products": stored_products(settings)}


# --------------------------------------------------------------------------- the screen


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.1f}"
    return text + unit


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d"


def _short(label: str) -> str:
    """``retry/twisted.internet.error.TimeoutError`` -> ``retry/TimeoutError``."""
    head, _, tail = label.rpartition("/")
    return (head + "/" if head else "") + tail.rpartition(".")[2]


def _pairs(title: str, counts: dict[str, Any], empty: str = "none") -> Table:
    table = Table(
        title=title,
        title_justify="left",
        show_header=False,
        box=None,
        pad_edge=False,
        min_width=len(title),
    )
    table.add_column(style="cyan")
    table.add_column(justify="right")
    for key, value in counts.items():
        table.add_row(str(key), _num(value))
    if not counts:
        table.add_row(Text(empty, style="dim"), "")
    return table


def render(status: dict[str, Any], width: int | None = None) -> RenderableType:
    """The status as rich renderables (what ``status`` and ``status --watch`` show); with a
    *width*, the nodes table leaves out its least needed columns until it fits."""
    frontier, totals = status["frontier"], status["totals"]
    when = dt.datetime.fromtimestamp(status["server_time_ms"] / 1000, tz=dt.UTC)
    state = Text("PAUSED", style="bold yellow") if status["paused"] else Text("running", "green")
    if status["drained"]:
        state = Text("drained", style="bold green")
    header = Text.assemble(
        ("crawl ", "bold"),
        (status["crawl"], "bold cyan"),
        "  ",
        state,
        f"  {totals['live_nodes']} live / {totals['dead_nodes']} dead nodes",
        f"  {when:%Y-%m-%d %H:%M:%S} UTC\n",
        (f"redis {status.get('redis', '?')}", "dim"),
    )

    queue = Table(title="Frontier", title_justify="left", show_header=False, box=None)
    queue.add_column(style="cyan")
    queue.add_column(justify="right")
    queue.add_column(style="dim")
    by_kind = ", ".join(f"{k} {_num(v)}" for k, v in frontier["queued_by_kind"].items())
    queue.add_row("queued", _num(frontier["queued"]), by_kind)
    if frontier["waiting_for_site"]:
        sites = ", ".join(f"{k} {_num(v)}" for k, v in frontier["waiting_by_site"].items())
        queue.add_row("  of which wait for their site", _num(frontier["waiting_for_site"]), sites)
    queue.add_row("parked retries", _num(frontier["parked"]), "")
    revisit = status.get("revisit")
    if revisit:
        nxt = revisit["next_due_s"]
        due = "none" if nxt is None else ("now" if nxt <= 0 else f"in {_duration(nxt)}")
        queue.add_row(
            "revisits scheduled",
            _num(revisit["scheduled"]),
            f"next due {due}; behind schedule {_duration(revisit['behind_s'])}",
        )
    queue.add_row("in flight", _num(frontier["in_flight"]), "leased to nodes")
    if frontier["seeding"] or frontier["start_list"]:
        queue.add_row("seeds waiting", _num(frontier["start_list"] + frontier["seeding"]), "")
    queue.add_row("seen URLs", _num(frontier["seen"]), "dupefilter")
    queue.add_row("dead letters", _num(status["dead_letters"]["total"]), "")
    if frontier["rejected"]:
        queue.add_row("refused entries", _num(frontier["rejected"]), "seeds / queue entries")
    if "store" in status:
        queue.add_row("stored products", _num(status["store"]["products"]), "MongoDB")
    trend = status["backlog_per_min"]
    trend_text = f"backlog {'+' if (trend or 0) > 0 else ''}{_num(trend)}/min" if trend else ""
    if status["paused"] and not status["drained"]:
        queue.add_row("time to drain", "paused", "nothing drains until `control resume`")
    else:
        queue.add_row("time to drain", _duration(status["eta_seconds"]), trend_text)

    nodes = _nodes_table(status, width)
    parts: list[RenderableType] = [header, Text(""), queue, Text(""), nodes, Text("")]
    if status.get("sites"):
        parts += [_sites(status["sites"]), Text("")]

    dead = status["dead_letters"]
    reasons = {_short(k): v for k, v in dead["by_reason"].items()}
    errors = {_short(k): v for k, v in status["errors"].items()}
    side = Table.grid(padding=(0, 6))
    side.add_row(_pairs("Dead letters by reason", reasons), _pairs("Errors by kind", errors))
    side.add_row(Text(""), Text(""))
    side.add_row(
        _pairs("Dead letters by site", dead["by_site"]),
        _pairs("Pages by kind", status["pages_by_kind"]),
    )
    return Group(*parts, side)


#: the nodes table's columns, and the order in which a narrow screen leaves them out
_NODE_COLUMNS = (
    "node", "state", "heartbeat", "in flight", "pages", "products", "pages/min", "products/min",
)  # fmt: skip
_DROP_FIRST = ("heartbeat", "pages", "products", "in flight", "pages/min")


def _nodes_table(status: dict[str, Any], width: int | None) -> Table:
    frontier, totals = status["frontier"], status["totals"]
    colours = {"live": "green", "dead": "bold red", "orphan": "yellow", "gone": "dim"}
    rows: list[list[str]] = []
    styles: list[str] = []
    for node in status["nodes"]:
        age = node["heartbeat_age_s"]
        rows.append(
            [
                node["node"],
                node["state"] + (" (recovered)" if node["recovered"] else ""),
                "-" if age is None else f"{_duration(age)} ago",
                _num(node["in_flight"]),
                _num(node["pages"]),
                _num(node["products"]),
                _num(node["pages_per_min"]),
                _num(node["products_per_min"]),
            ]
        )
        styles.append(colours.get(node["state"], ""))
    total = ["total", "", "", _num(frontier["in_flight"]), _num(totals["pages"])]
    total += [_num(totals["products"]), _num(totals["pages_per_min"])]
    total.append(_num(totals["products_per_min"]))
    columns = list(_NODE_COLUMNS)
    if totals.get("journal_held"):  # products only in a node's local journal, not in MongoDB yet
        columns.append("journal")
        for row, node in zip(rows, status["nodes"], strict=True):
            row.append(_num(node.get("journal_held")))
        total.append(_num(totals["journal_held"]))
    widths = {
        c: max(len(c), *(len(r[i]) for r in [*rows, total])) + 2 for i, c in enumerate(columns)
    }
    shown = list(columns)
    for column in _DROP_FIRST:
        if width is None or sum(widths[c] for c in shown) <= width:
            break
        shown.remove(column)
    table = Table(title="Nodes", title_justify="left", box=None, header_style="bold")
    for column in shown:
        left = column in ("node", "state")
        red = "bold red" if column == "journal" else None
        table.add_column(column, justify="left" if left else "right", no_wrap=not left, style=red)
    index = [columns.index(c) for c in shown]
    for row, style in zip(rows, styles, strict=True):
        cells: list[Any] = [row[i] for i in index]
        if "state" in shown:
            cells[shown.index("state")] = Text(row[1], style=style)
        table.add_row(*cells)
    table.add_row(*[total[i] for i in index], style="bold")
    return table


def _sites(sites: list[dict[str, Any]]) -> Table:
    """Busy sites and their shared budget: the rate allowed now is the limit times the
    adaptive factor (below 1 after the site answered 429 or slowly)."""
    table = Table(title="Sites (shared budget)", title_justify="left", box=None)
    for column in ("site", "pages/min", "limit/s", "allowed/s", "factor", "in flight", "waiting"):
        table.add_column(column, justify="left" if column == "site" else "right")
    for site in sites:
        table.add_row(
            site["site"],
            _num(site.get("pages_per_min", 0)),
            "none" if site["limit_rate"] is None else _num(site["limit_rate"]),
            "-" if site["allowed_rate"] is None else _num(site["allowed_rate"]),
            f"{site['factor']:.2f}",
            _num(site["in_flight"]),
            _num(site["waiting"]),
        )
    return table


# --------------------------------------------------------------------------- the command


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    """Print (or watch) the status; exit 0, or 1 when Redis cannot be reached."""
    url = redis_url(settings)
    client = redis_client(settings)
    keys = crawl_keys(settings, opts.spider)
    store = not opts.no_store
    try:
        warn_if_no_crawl(client, keys, url)
        check_crawl(client, keys)
        if opts.watch:
            return _watch(client, keys, settings, url, opts)
        status = collect(client, keys, settings, sample=opts.sample)
        _add_context(status, settings, url, store)
    except (redis.RedisError, OSError) as exc:
        return redis_error(url, exc, "cannot read ")
    finally:
        client.close()
    if opts.json:
        print(json.dumps(status, sort_keys=True))
    else:
        console = _console()
        console.print(render(status, console.width))
    return 0


def _console() -> Console:
    """The terminal's console; into a pipe or a file, wide enough that nothing is cut
    (``COLUMNS`` if set, else 200: tables take only the width they need)."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=int(os.environ.get("COLUMNS") or 0) or 200)


def _watch(
    client: Any, keys: FrontierKeys, settings: BaseSettings, url: str, opts: argparse.Namespace
) -> int:
    """Redraw until Ctrl-C; with ``--json``, print one JSON object per line instead."""
    tracker = RateTracker()
    store = not opts.no_store

    def current() -> dict[str, Any]:
        status = collect(client, keys, settings, tracker=tracker)
        _add_context(status, settings, url, store)
        return status

    console = _console()
    try:
        if opts.json:
            while True:
                print(json.dumps(current(), sort_keys=True), flush=True)
                time.sleep(max(0.2, opts.interval))
        if not console.is_terminal:
            # into a pipe or a file: a redrawn screen shows nothing; one line per interval
            while True:
                status = current()
                when = dt.datetime.fromtimestamp(status["server_time_ms"] / 1000, tz=dt.UTC)
                line = progress_line(status).removeprefix("Cluster: ")
                print(f"{when:%H:%M:%S} {status['crawl']}: {line}", flush=True)
                time.sleep(max(0.2, opts.interval))
        with Live(console=console, auto_refresh=False) as live:
            while True:
                live.update(render(current(), console.width), refresh=True)
                time.sleep(max(0.2, opts.interval))
    except KeyboardInterrupt:
        return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="[SPIDER] [--watch] [--json]",
    summary="Show the whole cluster: queue, nodes, rates, dead letters, errors",
)
