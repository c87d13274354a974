"""``status``: the whole cluster at a glance: queue by page kind, parked retries, nodes and their
heartbeats, pages/min and products/min, dead letters, errors and the time left to drain.

``scrapy status [SPIDER]`` on any node, or ``distcrawl status [SPIDER]`` (by default the
project's only spider); ``--watch`` redraws it live, ``--json`` prints one JSON object for
scripts. Rates need two heartbeats of a node:
a one-shot status waits for them (``--sample``), ``--watch`` averages over the last minute.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from typing import TYPE_CHECKING, Any

import redis
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from distcrawl.base.durations import short_duration
from distcrawl.base.names import status as words
from distcrawl.base.names.commands import LIST_ERROR_GROUPS, RESUME_CRAWL
from distcrawl.base.pipes import quiet_when_closed
from distcrawl.base.urls import shorten_middle
from distcrawl.commands._common import redis_error, warn_if_no_crawl
from distcrawl.commands._tables import Column, fit_table
from distcrawl.ops.context import Context
from distcrawl.ops.entry import add_spider_argument, entry_points
from distcrawl.ops.products import ProductStore, no_store_reason
from distcrawl.ops.progress import progress_line
from distcrawl.ops.rates import RateTracker
from distcrawl.ops.sites import DEFAULT_LIMIT
from distcrawl.ops.status import products_accounted, read_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import RenderableType
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "collect", "execute", "render", "run"]

#: seconds between two redraws of ``--watch``
DEFAULT_WATCH_INTERVAL = 2.0


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser, optional=True)
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
    ctx: Context,
    client: Any,
    *,
    products: Callable[[int | None], dict[str, Any]] | None,
    sample: float | None = None,
    tracker: RateTracker | None = None,
) -> dict[str, Any]:
    """One status, with the Redis it was read from (masked) and, given a way to count them,
    the products in MongoDB (``store``: :meth:`~distcrawl.ops.products.ProductStore.figures`
    of the crawl's start) and how they add up with the nodes' counts.
    Without a *tracker* (one-shot), it samples for *sample* seconds (default: a heartbeat
    interval and one second) to give each live node's rates."""
    wait = ctx.heartbeat_interval + 1.0 if sample is None else sample
    status = read_status(
        client,
        ctx.keys,
        page_priorities=ctx.page_priorities,
        heartbeat_timeout=ctx.heartbeat_timeout,
        revisit_grace=ctx.revisit_grace,
        tracker=tracker,
        sample=wait,
    )
    status["redis"] = ctx.masked_url
    if products is not None:
        status["store"] = products(status["started_ms"])
        status["products_accounted"] = products_accounted(status, ctx.heartbeat_interval)
    return status


# --------------------------------------------------------------------------- the screen


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.1f}"
    return text + unit


def _memory(memory: dict[str, Any]) -> str:
    used = f"{memory['used_bytes'] / 1024 / 1024:,.0f} MB"
    if not memory["maxmemory_bytes"]:
        return f"{used} (no maxmemory)"
    limit = memory["maxmemory_bytes"] / 1024 / 1024
    return f"{used} of {limit:,.0f} MB ({memory['used_share']:.0%})"


_duration = short_duration


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
    unreadable = status.get("unreadable", {})
    when = dt.datetime.fromtimestamp(status["server_time_ms"] / 1000, tz=dt.UTC)
    header = Text.assemble(
        ("crawl ", "bold"),
        (status["crawl"], "bold cyan"),
        "  ",
        Text(status["state"], style=_STATE_STYLES.get(status["state"], "")),
        f"  {_nodes_summary(totals)}",
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
    if frontier.get("sites_held"):
        queue.add_row(
            "  sites held", _num(frontier["sites_held"]), "robots.txt unavailable, Retry-After"
        )
    if frontier.get("sites_with_crawl_delay"):
        queue.add_row(
            "sites with a Crawl-delay",
            _num(frontier["sites_with_crawl_delay"]),
            "one request at a time for the cluster",
        )
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
        for label, value, note in _store_rows(status["store"]):
            queue.add_row(label, value, note)
    memory = status.get("redis_memory")
    if memory:
        queue.add_row("Redis memory", _memory(memory), memory["warning"] or memory["policy"])
    elif "redis_memory" in unreadable:
        queue.add_row("Redis memory", "-", unreadable["redis_memory"])
    trend = status["backlog_per_min"]
    trend_text = f"backlog {'+' if (trend or 0) > 0 else ''}{_num(trend)}/min" if trend else ""
    if status["paused"] and not status["drained"]:
        queue.add_row(
            "time to drain",
            "paused",
            f"nothing drains until `{RESUME_CRAWL.line(spider=status['crawl'])}`",
        )
    elif status.get("revisit"):
        queue.add_row("time to drain", "continuous", unreadable.get("eta_seconds", ""))
    elif status["eta_seconds"] is None:
        queue.add_row("time to drain", "-", unreadable.get("eta_seconds", ""))
    else:
        queue.add_row("time to drain", _duration(status["eta_seconds"]), trend_text)

    nodes = _nodes_table(status, width)
    parts: list[RenderableType] = [header, Text(""), queue, Text(""), nodes]
    accounted = _accounted(status.get("products_accounted"))
    if accounted is not None:
        parts.append(accounted)
    if "rates" in unreadable and status["nodes"]:
        parts.append(Text(f"rates: - ({unreadable['rates']})", style="dim"))
    parts.append(Text(""))
    if status.get("sites"):
        parts += [_sites(status["sites"], width, status.get("site_defaults")), Text("")]
    if status.get("servers"):
        parts += [_servers(status["servers"], width), Text("")]
    politeness = _politeness(status.get("politeness") or {})
    if politeness is not None:
        parts += [politeness, Text("")]

    dead = status["dead_letters"]
    side = Table.grid(padding=(0, 6))
    side.add_row(
        _pairs("Dead letters by reason", dead["by_reason"]),
        _pairs("Errors by kind", status["errors"]),
    )
    side.add_row(Text(""), Text(""))
    side.add_row(
        _pairs("Dead letters by site", dead["by_site"]),
        _pairs("Pages parsed by kind", status["pages_by_kind"]),
    )
    return Group(*parts, side, *_observed(status, width))


def _observed(status: dict[str, Any], width: int | None) -> list[RenderableType]:
    """The error groups with most failures and the latest findings (none: nothing shown)."""
    parts: list[RenderableType] = []
    groups = status.get("error_groups") or {}
    if groups.get("top"):
        rows = [
            # what comes from crawled sites is text, never rich markup
            [g["id"], g["kind"], Text(g["site"] or "(any)"), _num(g["count"]), Text(g["template"])]
            for g in groups["top"]
        ]
        listed = LIST_ERROR_GROUPS.line(spider=status["crawl"])
        title = f"Error groups ({groups['groups']}; `{listed}`)"
        parts += [Text(""), fit_table(_GROUP_COLUMNS, rows, width or 10**6, title=title)]
    findings = status.get("findings") or {}
    if findings.get("total"):
        lines = Table(
            title=f"Findings ({findings['total']})",
            title_justify="left",
            box=None,
            show_header=False,
            pad_edge=False,
        )
        lines.add_column(style="bold red")
        for finding in findings["latest"]:
            lines.add_row(Text(str(finding.get("message", ""))))
        parts += [Text(""), lines]
    return parts


_GROUP_COLUMNS = (
    Column("group", cap=16, drop=2),
    Column("kind"),
    Column("site", shrink="middle", least=12, drop=1),
    Column("failures", justify="right"),
    Column("template", shrink="end", least=24, give=1),
)


_STATE_STYLES = {
    words.RUNNING: "green",
    words.WAITING: "bold yellow",
    words.PAUSED: "bold yellow",
    words.DRAINED: "bold green",
}


def _nodes_summary(totals: dict[str, Any]) -> str:
    """``2 live, 1 dead, 2 stopped nodes``: the live nodes, and every other state any node
    is in."""
    by_state = totals.get("nodes_by_state") or {}
    parts = [f"{totals['live_nodes']} live"]
    parts += [f"{n} {state}" for state, n in by_state.items() if n and state != words.LIVE]
    return ", ".join(parts) + " nodes"


def _store_rows(store: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The stored products: this crawl's, and the collection's over every crawl."""
    where = f"MongoDB {store['collection']}" if store.get("collection") else "MongoDB"
    error = store.get("error")
    rows = [
        (
            "stored by this crawl",
            _num(store.get("this_crawl")),
            error
            if store.get("this_crawl") is None and error
            else f"products seen since the crawl started ({where})",
        ),
    ]
    if store.get("in_collection") is not None or not error:
        rows.append(
            ("in the collection", _num(store.get("in_collection")), "every crawl's products")
        )
    return rows


def _accounted(accounted: dict[str, Any] | None) -> Text | None:
    """A line under the nodes when their products do not add up to this crawl's: why."""
    if not accounted or not accounted.get("difference"):
        return None
    return Text(
        f"The nodes counted {accounted['counted_by_nodes']:,} products; this crawl stored "
        f"{accounted['stored_by_this_crawl']:,}: " + "; ".join(accounted["why"]),
        style="yellow",
    )


#: the nodes table's columns, and the order in which a narrow screen leaves them out
_NODE_COLUMNS = (
    "node", "state", "heartbeat", "in flight", "responses", "products", "responses/min",
    "products/min",
)  # fmt: skip
_DROP_FIRST = ("heartbeat", "responses", "products", "in flight", "responses/min")


def _nodes_table(status: dict[str, Any], width: int | None) -> Table:
    frontier, totals = status["frontier"], status["totals"]
    colours = {
        words.LIVE: "green",
        words.DEAD: "bold red",
        words.ORPHAN: "yellow",
        words.GONE: "dim",
    }
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
                _num(node["responses"]),
                _num(node["products"]),
                _num(node["responses_per_min"]),
                _num(node["products_per_min"]),
            ]
        )
        styles.append(colours.get(node["state"], ""))
    total = ["total", "", "", _num(frontier["in_flight"]), _num(totals["responses"])]
    total += [_num(totals["products"]), _num(totals["responses_per_min"])]
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


_SITE_COLUMNS = (
    Column("site", shrink="middle", least=16),
    Column("responses/min", justify="right"),
    Column("limit/s", justify="right", drop=2),
    Column("allowed/s", justify="right"),
    Column("factor", justify="right"),
    Column("delay/s", justify="right", drop=3),
    Column("in flight", justify="right", drop=1),
    Column("waiting", justify="right"),
)
_SERVER_COLUMNS = (
    Column("server", least=8),
    Column("sites", justify="right"),
    Column("in flight", justify="right"),
    Column("some of its sites", shrink="middle", least=16),
)


def _limit(site: dict[str, Any], defaults: dict[str, Any] | None) -> str:
    """A site's rate limit in force: ``2`` (its own), ``2 default`` (the nodes'), ``none``, or
    ``?`` when no live node says what its default is."""
    if site["limit_rate"] is not None:
        shown = _num(site["limit_rate"])
        return f"{shown} default" if site.get("limit_rate_from") == DEFAULT_LIMIT else shown
    if defaults is not None and defaults.get("rate") is None:
        return "?"
    return "none"


def _defaults_line(defaults: dict[str, Any] | None) -> Text:
    """The per-site defaults the live nodes lease with, for sites without limits of their own."""
    if not defaults or (defaults.get("rate") is None and defaults.get("concurrency") is None):
        why = (defaults or {}).get("why", "no live node publishes its defaults")
        return Text(f"default limits: ? ({why})", style="dim")
    rate, conc = defaults.get("rate"), defaults.get("concurrency")
    rate_text = "?" if rate is None else (f"{rate:g}/s" if rate else "none")
    conc_text = "?" if conc is None else (f"{conc} in flight" if conc else "none")
    why = f" ({defaults['why']})" if defaults.get("why") else ""
    return Text(
        f"default limits of the live nodes, for sites without their own: "
        f"DISTCRAWL_SITE_RATE {rate_text}, DISTCRAWL_SITE_CONCURRENCY {conc_text}{why}",
        style="dim",
    )


def _sites(
    sites: list[dict[str, Any]], width: int | None, defaults: dict[str, Any] | None = None
) -> RenderableType:
    """Busy sites and their shared budget: the limit in force (the site's own, or the nodes'
    default), the rate allowed now (the limit times the adaptive factor, below 1 after the
    site answered 429 or slowly); under it, why each site under a cut runs slower, and until
    when."""
    rows = [
        [
            site["site"],
            _num(site.get("responses_per_min", 0)),
            _limit(site, defaults),
            "-" if site["allowed_rate"] is None else _num(site["allowed_rate"]),
            f"{site['factor']:.2f}",
            "-" if site.get("crawl_delay_s") is None else f"{site['crawl_delay_s']:g}",
            _num(site["in_flight"]),
            _num(site["waiting"]),
        ]
        for site in sites
    ]
    table = Group(
        fit_table(_SITE_COLUMNS, rows, width or 10**6, title="Sites (shared budget)"),
        _defaults_line(defaults),
    )
    cut = [site for site in sites if site.get("slower_because")]
    if not cut:
        return table
    lines = Table(title="Slower than they could be", title_justify="left", box=None,
                  show_header=False, pad_edge=False)  # fmt: skip
    lines.add_column(style="yellow", no_wrap=True, max_width=max(16, (width or 200) // 3))
    lines.add_column()
    for site in cut:
        lines.add_row(
            shorten_middle(site["site"], max(16, (width or 200) // 3)), site["slower_because"]
        )
    return Group(table, Text(""), lines)


def _servers(servers: list[dict[str, Any]], width: int | None) -> RenderableType:
    """Servers (IP addresses) more than one site answers from: with server budgets
    (``DISTCRAWL_SERVER_LIMITS``) they share one, across the cluster."""
    rows = [
        [s["server"], _num(s["sites"]), _num(s["in_flight"]), ", ".join(s["some_sites"])]
        for s in servers
    ]
    return fit_table(_SERVER_COLUMNS, rows, width or 10**6, title="Servers with more than one site")


def _politeness(figures: dict[str, Any]) -> RenderableType | None:
    """One line of what the nodes counted of the sites' politeness, when they counted any."""
    parts = [
        f"{label} {_num(figures[key])}"
        for key, label in (
            ("robots_unavailable", "robots.txt unavailable"),
            ("robots_no_rules", "robots.txt 4xx (no rules)"),
            ("given_back", "leases given back"),
            ("share_waits", "waits for a site's share"),
            ("server_waits", "waits for a server"),
            ("outside_waits", "waits outside the queue"),
            ("retry_after_capped", "Retry-After capped"),
        )
        if figures.get(key)
    ]
    for key, label in (("site_holds", "holds"), ("set_aside", "set aside")):
        for part, n in sorted((figures.get(key) or {}).items()):
            parts.append(f"{label} {part} {_num(n)}")
    if not parts:
        return None
    return Text.assemble(("Politeness: ", "bold"), ", ".join(parts))


# --------------------------------------------------------------------------- the command


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    """Print (or watch) the status; exit 0, or 1 when Redis cannot be reached."""
    ctx = Context(settings, opts.spider)
    client = ctx.client()
    store = None if opts.no_store else ProductStore.from_settings(settings)
    products: Callable[[int | None], dict[str, Any]] | None = None
    if store is not None:
        products = store.figures
    elif not opts.no_store:
        missing = no_store_reason(settings)

        def products(since_ms: int | None) -> dict[str, Any]:
            return {"collection": None, "in_collection": None, "this_crawl": None,
                    "since_ms": since_ms, "error": missing}  # fmt: skip

    try:
        warn_if_no_crawl(ctx, client)
        if opts.watch:
            return _watch(ctx, client, products, opts)
        status = collect(ctx, client, products=products, sample=opts.sample)
    except (redis.RedisError, OSError) as exc:
        return redis_error(ctx.redis_url, exc, "cannot read ")
    finally:
        client.close()
        if store is not None:
            store.close()
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
        return quiet_when_closed(console)
    return quiet_when_closed(Console(width=int(os.environ.get("COLUMNS") or 0) or 200))


def _watch(
    ctx: Context,
    client: Any,
    products: Callable[[int | None], dict[str, Any]] | None,
    opts: argparse.Namespace,
) -> int:
    """Redraw until Ctrl-C; with ``--json``, print one JSON object per line instead."""
    tracker = RateTracker()

    def current() -> dict[str, Any]:
        return collect(ctx, client, products=products, tracker=tracker)

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
