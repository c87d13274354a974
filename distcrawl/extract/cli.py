"""distcrawl extract: show what the spider would extract from pages (URLs or saved files).

Each input is an http(s) URL (fetched with one plain GET), a file:// URL or a local file.
A local file is analysed as if fetched from --base-url, else from its absolute
rel=canonical URL (where a saved page came from), else from its own file:// URL. A
profile is picked by the page's host; a local file whose host matches no profile gets the
first --profile given, so a profile can be tried on saved pages. With --json every input
prints one JSON object on one line; the exit status is 1 only when an input could not be
read at all (and 2 for an unusable profile).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import urllib.request
import zlib
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from parsel import Selector

from distcrawl.base.pipes import quiet_when_closed

from .. import __version__
from .page import PRODUCT_FIELDS, PageAnalysis, analyze
from .profile import ProfileError, SiteProfile, load_profiles

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT",
    "add_arguments",
    "json_ready",
    "read_input",
    "run",
]

#: seconds before a fetch of an http(s) input gives up
DEFAULT_TIMEOUT = 20.0
#: bytes read from an input at most; a larger page is cut (with an error)
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
#: links of each kind shown without --json
DEFAULT_LINKS_SHOWN = 5

_USER_AGENT = f"distcrawl-extract/{__version__} (+https://github.com/distcrawl)"


class InputError(Exception):
    """An input that could not be read at all."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="URL|FILE", help="pages to analyse")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="site profile file or directory of them (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per input")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="per field, where it came from (structured data, profile, label, heuristic)"
        " and the selector or text that gave it",
    )
    parser.add_argument(
        "--base-url", help="URL that local files were saved from (for relative links)"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="fetch timeout")
    parser.add_argument(
        "--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="largest body read per input"
    )
    parser.add_argument(
        "--links",
        type=int,
        default=DEFAULT_LINKS_SHOWN,
        metavar="N",
        help="links of each kind shown without --json",
    )


def read_input(
    source: str, *, base_url: str | None, timeout: float, max_bytes: int
) -> tuple[str, bytes, str | None, list[str], bool]:
    """(url, body, encoding, errors, is_local) for one input, or raise :class:`InputError`."""
    errors: list[str] = []
    if source.startswith(("http://", "https://")):
        request = urllib.request.Request(source, headers={"User-Agent": _USER_AGENT})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(max_bytes + 1)
                url = response.geturl()
                encoding = response.headers.get_content_charset()
        except Exception as exc:  # URLError, HTTPError, timeouts, bad URLs alike
            raise InputError(f"cannot fetch {source}: {exc}") from exc
        if len(body) > max_bytes:
            errors.append(f"body cut to {max_bytes} bytes")
            body = body[:max_bytes]
        return url, body, encoding, errors, False
    if source.startswith("file://"):
        path = Path(urllib.request.url2pathname(urlsplit(source).path))
    else:
        path = Path(source)
    try:
        with path.open("rb") as handle:
            body = handle.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror or exc}") from exc
    body = _decompressed(source, body, max_bytes)
    if len(body) > max_bytes:
        errors.append(f"body cut to {max_bytes} bytes")
        body = body[:max_bytes]
    return base_url or _saved_from(body) or path.resolve().as_uri(), body, None, errors, True


#: how compressed files start, and what they are: gzip is read, the others refused
_GZIP = b"\x1f\x8b"
_ARCHIVES = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}


def _decompressed(source: str, body: bytes, max_bytes: int) -> bytes:
    """A gzip file's page (``page.html.gz``, as a crawl's cache saves it), at most
    *max_bytes* + 1 of it; another compressed format is an :class:`InputError`, never a page
    of garbage analysed as ``other``."""
    if body.startswith(_GZIP):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(body)) as unzipped:
                return unzipped.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"cannot read {source}: a damaged gzip file ({exc})") from exc
    for magic, kind in _ARCHIVES.items():
        if body.startswith(magic):
            raise InputError(
                f"cannot read {source}: a {kind} file, not a page (decompress it first)"
            )
    return body


def _saved_from(body: bytes) -> str | None:
    """The absolute http(s) rel=canonical URL of a saved page, if it has one."""
    head = body[:200_000].decode("utf-8", errors="replace")
    for href in Selector(text=head).xpath("//link[@rel='canonical']/@href").getall()[:1]:
        if href.strip().startswith(("http://", "https://")):
            return href.strip()
    return None


def run(args: argparse.Namespace) -> int:
    try:
        profiles = load_profiles(args.profile)
    except ProfileError as exc:
        print(f"distcrawl extract: {exc}", file=sys.stderr)
        return 2
    console = None if args.json else _console()
    status = 0
    for source in args.inputs:
        try:
            url, body, encoding, read_errors, local = read_input(
                source, base_url=args.base_url, timeout=args.timeout, max_bytes=args.max_bytes
            )
        except InputError as exc:
            status = 1
            if console is None:
                print(json.dumps({"input": source, "kind": None, "errors": [str(exc)]}))
            else:
                console.print(f"[bold red]{source}[/]: {exc}")
            continue
        profile = SiteProfile.match(profiles, url)
        if profile is None and local and profiles:
            profile = profiles[0]
        analysis = analyze(url=url, body=body, encoding=encoding, profile=profile)
        analysis.errors[:0] = read_errors
        record = to_record(source, analysis, profile)
        if args.explain:
            record["explain"] = analysis.explain(profile)
        if console is None:
            print(json.dumps(record, ensure_ascii=False), flush=True)
        else:
            _print_summary(console, record, args.links)
    return status


def to_record(source: str, analysis: PageAnalysis, profile: SiteProfile | None) -> dict[str, Any]:
    """The JSON object printed for one input: product fields at the top level."""
    record: dict[str, Any] = {
        "input": source,
        "kind": analysis.kind,
        "url": analysis.canonical_url,
        "fetched_url": analysis.url,
        "profile": profile.name if profile else None,
    }
    product = analysis.product or {}
    for name in PRODUCT_FIELDS:
        if name != "url":
            record[name] = json_ready(product.get(name, [] if name in _LISTS else None))
    record["sources"] = analysis.sources
    record["links"] = analysis.links
    record["errors"] = analysis.errors
    return record


_LISTS = {"category_path", "image_urls", "variants"}


def json_ready(value: Any) -> Any:
    """JSON-ready: Decimals as decimal strings (never floats), containers recursively."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    return value


def _console() -> Console:
    from rich.console import Console

    return quiet_when_closed(Console(highlight=False, soft_wrap=True))


def _print_summary(console: Console, record: dict[str, Any], links_shown: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    kind = record["kind"]
    console.rule(f"[bold]{escape(record['input'])}[/]")
    console.print(f"kind [bold cyan]{kind}[/]  url {escape(record['url'])}")
    if record["profile"]:
        console.print(f"profile {escape(record['profile'])}")
    if kind == "product":
        table = Table(show_header=False, box=None, padding=(0, 1), expand="explain" in record)
        if "explain" in record:
            # a long value (a description) wraps in its own column: the explanation keeps
            # the room to say where each value came from
            table.add_column(no_wrap=True)
            table.add_column(ratio=2)
            table.add_column(no_wrap=True)
            table.add_column(ratio=3)
        sources = record["sources"]
        for name in PRODUCT_FIELDS:
            if name == "url":
                continue
            value = record[name]
            if name == "category_path":
                shown = " > ".join(value)
            elif name == "variants":
                shown = "; ".join(
                    f"{v.get('sku')} {v.get('price')} {v.get('currency')} {v.get('availability')}"
                    for v in value
                )
            elif name == "image_urls":
                shown = f"{len(value)}: " + " ".join(value[:3]) if value else ""
            else:
                shown = "" if value is None else str(value)
            if len(shown) > 160:
                shown = shown[:157] + "..."
            source = f"[dim]{sources.get(name, '')}[/]"
            row = [name, escape(shown) if shown else "[dim]-[/]", source]
            if "explain" in record:
                why = record["explain"].get(name)
                row.append(escape(f"{why['source']}: {why['detail']}") if why else "")
            table.add_row(*row)
        console.print(table)
    for link_kind, urls in record["links"].items():
        if urls:
            console.print(f"{link_kind} links: {len(urls)}")
            for url in urls[:links_shown]:
                console.print(f"  {escape(url)}")
            if len(urls) > links_shown:
                console.print(f"  [dim]... {len(urls) - links_shown} more[/]")
    for error in record["errors"]:
        console.print(f"[red]error:[/] {escape(error)}")
