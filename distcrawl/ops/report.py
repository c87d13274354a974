"""The crawl report: per crawl (its run), products new / changed / unchanged / gone against the
last crawl, pages, errors by group, dead letters, field coverage per site, findings, duration
and rate. Built from the crawl's keys (a bounded read of the status, every error group, every
site's figures) and MongoDB (the products, the last crawl's figures, the snapshots), the same
for ``distcrawl report`` and for the last node of a finished crawl, which also keeps it in
MongoDB (``crawl_reports``) and in ``DISTCRAWL_REPORT_FILE``.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from distcrawl.base.config import SETTINGS
from distcrawl.base.coverage import Baseline, judge, step_of
from distcrawl.frontier import crawlconf
from distcrawl.frontier.crawlconf import NOT_IN_EFFECT
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.products import mongo_uri
from distcrawl.ops.status import read_status
from distcrawl.servers.embedded import DEFAULT_MONGO_DATABASE
from distcrawl.storage.observe import ObserveStore

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.settings import BaseSettings

    from distcrawl.frontier.keys import FrontierKeys

__all__ = [
    "ReportSettings",
    "build_report",
    "observe_store",
    "render_html",
    "summary_line",
    "write_report_file",
]

logger = logging.getLogger(__name__)

#: error groups an HTML report lists (the JSON holds them all)
HTML_GROUPS = 50


@dataclass(frozen=True)
class ReportSettings:
    """What a report reads besides the crawl: the watched fields, the window, the drop that
    is a finding, the products' collection, the nodes' heartbeat timeout and page kinds."""

    fields: tuple[str, ...]
    window: int
    drop: float
    collection: str
    heartbeat_timeout: float
    page_priorities: Mapping[str, int]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ReportSettings:
        def get(name: str) -> Any:
            return SETTINGS.value(settings, name)

        return cls(
            fields=tuple(get("DISTCRAWL_QUALITY_FIELDS")),
            window=get("DISTCRAWL_QUALITY_WINDOW"),
            drop=get("DISTCRAWL_QUALITY_DROP"),
            collection=get("MONGO_COLLECTION"),
            heartbeat_timeout=get("DISTCRAWL_HEARTBEAT_TIMEOUT"),
            page_priorities=get("PAGE_PRIORITIES"),
        )


def as_recorded(settings: ReportSettings, recorded: Mapping[str, str]) -> ReportSettings:
    """*settings* with the crawl's own watched fields, window and drop where its first node
    recorded them (they are crawl-wide: the report judges as the nodes did)."""
    changes: dict[str, Any] = {}
    for attr, name in (
        ("fields", "DISTCRAWL_QUALITY_FIELDS"),
        ("window", "DISTCRAWL_QUALITY_WINDOW"),
        ("drop", "DISTCRAWL_QUALITY_DROP"),
    ):
        text = recorded.get(name)
        if text is not None and text != NOT_IN_EFFECT:
            try:
                value = SETTINGS[name].read(text)
            except ValueError:
                continue
            changes[attr] = tuple(value) if isinstance(value, list) else value
    return replace(settings, **changes)


def observe_store(settings: BaseSettings, *, timeout: float = 5.0) -> ObserveStore | None:
    """The crawl's MongoDB as reports and snapshots read it (None: none configured or
    running)."""
    uri = mongo_uri(settings)
    if not uri:
        return None
    database = SETTINGS.value(settings, "MONGO_DATABASE")
    if not database:
        database = unquote(urlsplit(uri).path.lstrip("/")) or DEFAULT_MONGO_DATABASE
    return ObserveStore(uri, database, timeout=timeout)


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")


def build_report(
    client: Any,
    keys: FrontierKeys,
    settings: ReportSettings,
    *,
    mongo: ObserveStore | None,
    record_findings: str | None = None,
) -> dict[str, Any]:
    """The report of the crawl as its keys and MongoDB hold it now. With *record_findings*
    (a node's name), the findings the report finds that the crawl did not hold yet are
    recorded (the end of a crawl judges every site once more); ``new_findings`` lists them."""
    store = FrontierStore(client, keys)
    settings = as_recorded(settings, crawlconf.read(client, keys))
    run = store.read_run()
    status = read_status(
        client,
        keys,
        page_priorities=settings.page_priorities,
        heartbeat_timeout=settings.heartbeat_timeout,
        sample=0.0,
    )
    groups = store.error_groups()
    _, totals = store.top_groups(0)
    figures = store.read_quality()
    started = run.started_ms if run else 0
    finished = run.finished_ms if run else 0
    now = status["server_time_ms"]
    last_crawl: dict[str, Baseline] = {}
    products: dict[str, Any] = {"stored": None}
    snapshots: dict[str, dict[str, Any]] = {}
    mongo_error = None
    if mongo is not None:
        try:
            run_id = run.id if run else None
            kept = mongo.baselines(keys.spider, run=run_id)
            last_crawl = {site: Baseline(n, shares) for site, (n, shares) in kept.items()}
            products["stored"] = mongo.db[settings.collection].estimated_document_count()
            if started:
                since = dt.datetime.fromtimestamp(started / 1000, tz=dt.UTC)
                products.update(mongo.product_changes(settings.collection, since))
            if run is not None:
                snapshots = mongo.snapshots(keys.spider, run.id)
        except Exception as exc:  # MongoDB away: the report says so and keeps the rest
            mongo_error = f"MongoDB: {exc}"
    new_findings: list[dict[str, Any]] = []
    quality: dict[str, Any] = {}
    for site, fig in sorted(figures.items()):
        quality[site] = {
            "products": fig.products,
            "shares": fig.shares(),
            "window": fig.window(settings.window),
            "last_crawl": dict(last_crawl[site].shares) if site in last_crawl else None,
        }
        if record_findings is None:
            continue
        found = judge(
            site,
            fig,
            fields=settings.fields,
            window=settings.window,
            drop=settings.drop,
            last_crawl=last_crawl.get(site),
        )
        for finding in found:
            record = {**finding.as_dict(), "at_ms": now, "node": record_findings}
            if store.record_finding(finding.key, json.dumps(record), now):
                new_findings.append(record)
    findings, _ = store.read_findings()
    seconds = max(0.0, ((finished or now) - started) / 1000) if started else None
    # every answer, and the pages parsed (the answers less robots.txt, error answers, 304s)
    responses = status["totals"]["responses"]
    pages = sum(status["pages_by_kind"].values())
    scraped = status["totals"]["products"]
    group_rows = []
    for group in groups:
        row = group.as_dict()
        shot = snapshots.get(group.id)
        row["snapshot"] = _snapshot_summary(shot) if shot else None
        group_rows.append(row)
    report: dict[str, Any] = {
        "crawl": keys.spider,
        "run": run.id if run else None,
        "state": "finished" if finished else "running",
        "started_ms": started or None,
        "finished_ms": finished or None,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "duration_s": round(seconds, 1) if seconds is not None else None,
        "responses": responses,
        "pages": pages,
        "pages_by_kind": status["pages_by_kind"],
        "products": {"scraped": scraped, **products},
        "rate": {
            "responses_per_min": round(responses / seconds * 60, 1) if seconds else None,
            "pages_per_min": round(pages / seconds * 60, 1) if seconds else None,
            "products_per_min": round(scraped / seconds * 60, 1) if seconds else None,
        },
        "errors": {
            "groups": len(groups),
            "failures": sum(g.count for g in groups),
            "groups_by_kind": totals.groups_by_kind,
            "failures_by_kind": totals.events_by_kind,
            "by_group": group_rows,
        },
        "dead_letters": status["dead_letters"],
        "quality": quality,
        "quality_window": settings.window,
        "findings": findings,
        "new_findings": new_findings,
        "mongo_error": mongo_error,
    }
    report["summary"] = summary_line(report)
    return report


def _snapshot_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    at = doc.get("at")
    return {
        "url": doc.get("url"),
        "status": doc.get("status"),
        "body_bytes": doc.get("body_bytes"),
        "truncated": doc.get("truncated"),
        "node": doc.get("node"),
        "at": at.isoformat() if isinstance(at, dt.datetime) else at,
    }


def summary_line(report: Mapping[str, Any]) -> str:
    """One line: what the crawl did, as a notice and the report's first line say it."""
    products = report["products"]
    changes = ""
    if products.get("new") is not None:
        changes = (
            f" ({products['new']} new, {products['changed']} changed, "
            f"{products['unchanged']} unchanged, {products['gone']} gone)"
        )
    took = report["duration_s"]
    state = f"finished in {took:.0f}s" if report["state"] == "finished" and took else "running"
    errors = report["errors"]
    findings = len(report["findings"])
    return (
        f"crawl {report['crawl']} {state}: {report['pages']} pages, {products['scraped']} "
        f"products{changes}, {errors['groups']} error groups ({errors['failures']} failures), "
        f"{report['dead_letters']['total']} dead letters, {findings} "
        f"finding{'' if findings == 1 else 's'}"
    )


def keep_baselines(mongo: ObserveStore, report: Mapping[str, Any]) -> None:
    """A finished crawl's field shares by site, for the next crawl's findings (sites with a
    quarter of a window of products or more)."""
    step = step_of(int(report["quality_window"]))
    sites = {
        site: (q["products"], q["shares"])
        for site, q in report["quality"].items()
        if q["products"] >= step
    }
    mongo.save_baselines(report["crawl"], str(report["run"]), sites)


def write_report_file(report: Mapping[str, Any], path: str | Path) -> Path:
    """*report* to *path*: HTML when it ends in ``.html`` or ``.htm``, else JSON."""
    target = Path(path)
    if target.suffix.lower() in (".html", ".htm"):
        target.write_text(render_html(report), encoding="utf-8")
    else:
        target.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    return target


# -- HTML --------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _table(head: list[str], rows: list[list[Any]], cls: str = "") -> str:
    out = [f'<table class="{cls}"><thead><tr>']
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    if not rows:
        out.append(f'<tr><td colspan="{len(head)}">none</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (every value escaped)."""
    products = report["products"]
    errors = report["errors"]
    dead = report["dead_letters"]
    overview = [
        ["run", report["run"]],
        ["state", report["state"]],
        ["started", report["started_at"]],
        ["finished", report["finished_at"]],
        ["duration (s)", report["duration_s"]],
        ["responses", report["responses"]],
        ["pages parsed", report["pages"]],
        ["pages/min", report["rate"]["pages_per_min"]],
        ["products scraped", products["scraped"]],
        ["products stored", products.get("stored")],
        *[[k, products.get(k)] for k in ("new", "changed", "unchanged", "gone")],
        ["products/min", report["rate"]["products_per_min"]],
        ["error groups", errors["groups"]],
        ["failures", errors["failures"]],
        ["dead letters", dead["total"]],
    ]
    findings = [[f.get("site"), f.get("field"), f.get("message")] for f in report["findings"]]
    groups = [
        [g["kind"], g["site"] or "(any)", g["template"], g["count"], g["id"],
         (g.get("snapshot") or {}).get("url") or ("kept" if g["snapshot"] else "-")]
        for g in errors["by_group"][:HTML_GROUPS]
    ]  # fmt: skip
    fields = sorted({f for q in report["quality"].values() for f in q["shares"]})
    quality = [
        [site, q["products"], *(_pct(q["shares"].get(f)) for f in fields),
         q["window"]["products"], *(_pct(q["window"]["shares"].get(f)) for f in fields)]
        for site, q in report["quality"].items()
    ]  # fmt: skip
    dead_rows = [[reason, n] for reason, n in dead.get("by_reason", {}).items()]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>distcrawl report: {_e(report['crawl'])}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin:0 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
        ".finding{color:#b3261e}</style></head><body>",
        f"<h1>Crawl report: {_e(report['crawl'])}</h1>",
        f'<p id="summary">{_e(report["summary"])}</p>',
        _table(["", ""], overview, "overview"),
        "<h2>Findings</h2>",
        _table(["site", "field", "finding"], findings, "findings"),
        "<h2>Errors by group</h2>",
        _table(
            ["kind", "site", "template", "failures", "group", "first occurrence"], groups, "groups"
        ),
        "<h2>Dead letters by reason</h2>",
        _table(["reason", "dead letters"], dead_rows, "dead"),
        "<h2>Field coverage per site</h2>",
        _table(
            ["site", "products", *fields, "last products", *(f"{f} (last)" for f in fields)],
            quality,
            "quality",
        ),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
