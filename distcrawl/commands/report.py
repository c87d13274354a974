"""``report``: the crawl report: products new / changed / unchanged / gone against the last
crawl, pages, errors by group, dead letters, field coverage per site, findings, duration and
rate.

``distcrawl report [SPIDER]`` prints it, ``--json`` as one JSON object, ``--html FILE`` writes it
as an HTML page. It is read from the crawl's keys in Redis and from MongoDB as they are now (a
crawl still running gets a report so far); once the crawl's keys are gone (``control
reset``), the last report a finished crawl kept in MongoDB is printed. The last node of a
finished crawl writes the same report to MongoDB, and to ``DISTCRAWL_REPORT_FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

import redis
from pymongo.errors import PyMongoError
from rich.text import Text

from distcrawl.base.urls import printable
from distcrawl.commands._common import redis_error
from distcrawl.commands._tables import Column, console, fit_table
from distcrawl.ops.context import Context, NoCrawl
from distcrawl.ops.entry import add_spider_argument, entry_points
from distcrawl.ops.report import ReportSettings, build_report, observe_store, write_report_file

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "execute", "run"]

#: error groups the screen shows (the JSON and the HTML page hold more)
SHOWN_GROUPS = 10


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser, optional=True)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the report as one JSON object")
    out.add_argument("--html", metavar="FILE", help="write the report to FILE as an HTML page")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def _show(report: dict[str, Any]) -> None:
    out = console()
    # what comes from crawled sites is text, never rich markup
    out.print(Text(printable(report["summary"], 2000)))
    if report.get("mongo_error"):
        out.print(Text(f"(products against the last crawl not read: {report['mongo_error']})"))
    if report["findings"]:
        out.print("\nFindings")
        for finding in report["findings"]:
            out.print(Text(f"  {printable(str(finding.get('message')), 500)}"))
    groups = report["errors"]["by_group"]
    if groups:
        rows = [
            [
                g["id"],
                g["kind"],
                Text(g["site"] or "(any)"),
                str(g["count"]),
                Text(printable(g["template"])),
            ]
            for g in groups[:SHOWN_GROUPS]
        ]
        columns: tuple[Column, ...] = (
            Column("group", cap=16),
            Column("kind"),
            Column("site", shrink="middle", drop=1),
            Column("failures", justify="right"),
            Column("template", shrink="end", least=24, give=1),
        )
        out.print(fit_table(columns, rows, out.width, title="Errors by group"))
    quality = report["quality"]
    if quality:
        fields = sorted({f for q in quality.values() for f in q["shares"]})
        rows = [
            [Text(site), str(q["products"]), *(_pct(q["window"]["shares"].get(f)) for f in fields)]
            for site, q in quality.items()
        ]
        columns = (
            Column("site", shrink="middle", least=16),
            Column("products", justify="right"),
            *(Column(f, justify="right", drop=len(fields) - i) for i, f in enumerate(fields)),
        )
        title = "Field coverage per site (its last products)"
        out.print(fit_table(columns, rows, out.width, title=title))


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    ctx = Context(settings, opts.spider)
    mongo = observe_store(settings)
    client = ctx.client()
    try:
        try:
            ctx.check_crawl(client)
            report = build_report(
                client, ctx.keys, ReportSettings.from_settings(settings), mongo=mongo
            )
        except NoCrawl as exc:
            kept = mongo.last_report(ctx.keys.spider) if mongo is not None else None
            if kept is None:
                print(f"error: {exc}; and MongoDB keeps no report of it", file=sys.stderr)
                return 1
            kept.pop("_id", None)
            report = kept
            print(
                f"the crawl's keys are gone: its last report, of run {report.get('run')}",
                file=sys.stderr,
            )
    except (redis.RedisError, OSError) as exc:
        return redis_error(ctx.redis_url, exc, "cannot read ")
    except PyMongoError as exc:
        print(f"error: MongoDB: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if mongo is not None:
            mongo.close()
    report.pop("new_findings", None)
    if opts.json:
        print(json.dumps(report, sort_keys=True, default=str))
    elif opts.html:
        path = write_report_file(report, opts.html)
        print(f"{report['summary']}\nreport written to {path}")
    else:
        _show(report)
    return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="[SPIDER] [--json | --html FILE]",
    summary="The crawl report: products, pages, errors, field coverage, findings",
)
