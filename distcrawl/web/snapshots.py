"""The page of one error group and its first occurrence: what the dashboard links each group
to. Everything on it comes from crawled sites, so every value is escaped and the body is shown
as text, never as the page it was; the raw body is a download (``/errors/<group>/body``)."""

from __future__ import annotations

import datetime as dt
import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcrawl.frontier.protocol.observe import ErrorGroup
    from distcrawl.ops.errors import Snapshot

__all__ = ["snapshot_page"]


def _e(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _rows(pairs: list[tuple[str, object]]) -> str:
    return "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in pairs)


def snapshot_page(crawl: str, group: ErrorGroup, snapshot: Snapshot | None) -> str:
    facts: list[tuple[str, object]] = [
        ("group", group.id),
        ("site", group.site or "(any)"),
        ("kind", group.kind),
        ("template", group.template),
        ("failures", group.count),
        ("first seen", _when(group.first_ms)),
        ("last seen", _when(group.last_ms)),
        *(("sample", url) for url in group.samples),
    ]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>distcrawl · {_e(crawl)} · error group {_e(group.id)}</title>",
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/dashboard.css">'
        "</head><body>",
        f'<header><h1>distcrawl <span class="crawl">{_e(crawl)}</span></h1>'
        '<a href="/">dashboard</a></header>',
        '<section class="panel"><h2>Error group</h2>',
        f'<table id="group-facts"><tbody>{_rows(facts)}</tbody></table></section>',
    ]
    if snapshot is None:
        parts.append(
            '<section class="panel"><h2>First occurrence</h2><p id="no-snapshot" class="dim">'
            "none kept (DISTCRAWL_SNAPSHOTS_MAX reached, or MongoDB was away)</p></section>"
        )
    else:
        seen: list[tuple[str, object]] = [
            ("url", snapshot.url),
            ("status", snapshot.status),
            ("node", snapshot.node),
            ("at", snapshot.at),
            ("body", f"{len(snapshot.body)} of {snapshot.body_bytes} bytes"),
        ]
        headers = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in snapshot.headers)
        parts += [
            '<section class="panel"><h2>First occurrence</h2>',
            f'<table id="snapshot-facts"><tbody>{_rows(seen)}</tbody></table>',
            f'<h3>Headers</h3><table id="snapshot-headers"><tbody>{headers}</tbody></table>',
        ]
        if snapshot.error:
            parts.append(f'<h3>Error</h3><pre id="snapshot-error">{_e(snapshot.error)}</pre>')
        parts += [
            f'<h3>Body <a href="/errors/{_e(group.id)}/body">download</a></h3>',
            f'<pre id="snapshot-body">{_e(snapshot.text())}</pre></section>',
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
