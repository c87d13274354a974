"""distcrawl profile draft: a site profile drafted from what the generic extraction found.

Give it a few product pages of one shop (and a listing page or two): each field the
heuristics read (name, price, SKU, stock, ...) gets a selector that points at the element
or label/value pair it came from, checked on every page given; links and page kinds get
selectors the same way. The draft is written as TOML with comments, then loaded and tried:
``distcrawl extract --profile DRAFT`` on the same pages gives the same fields. Fields that
came from structured data need no rule (structured data still fills what a profile leaves
out). A rule that does not reproduce the generic value on every page is left commented out,
with the reason. It is a starting point to edit, for shops where the generic reading is
close but not right.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from distcrawl.base.names.commands import EXPLAIN_PROFILE

from .canonical import canonicalize_url, join_url
from .cli import DEFAULT_TIMEOUT, InputError, json_ready, read_input
from .heuristics import HEURISTIC_FIELDS, heuristic_product
from .labels import LabelValue
from .links import scan_links
from .page import PageAnalysis, _decode, _parse, analyze
from .profile import ProfileError, SiteProfile, load_profile

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = ["add_arguments", "draft_profile", "run"]

#: the fields a draft writes rules for, in the order they are written
DRAFT_FIELDS: tuple[str, ...] = (
    "name",
    "price",
    "currency",
    "sku",
    "gtin",
    "brand",
    "availability",
    "description",
)


@dataclass
class _Page:
    source: str
    url: str
    root: HtmlElement
    analysis: PageAnalysis
    found_in: dict[str, HtmlElement | LabelValue] = field(default_factory=dict)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("draft",), help="draft: write a draft profile")
    parser.add_argument("inputs", nargs="+", metavar="URL|FILE", help="product/listing pages")
    parser.add_argument("-o", "--output", help="write the profile here (default: stdout)")
    parser.add_argument("--name", help="site.name of the profile (default: the host)")
    parser.add_argument("--base-url", help="URL that local files were saved from")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="fetch timeout")


def run(args: argparse.Namespace) -> int:
    pages: list[_Page] = []
    for source in args.inputs:
        try:
            url, body, encoding, _errors, _local = read_input(
                source, base_url=args.base_url, timeout=args.timeout, max_bytes=8 * 1024 * 1024
            )
        except InputError as exc:
            print(f"distcrawl profile: {exc}", file=sys.stderr)
            return 1
        pages.append(_read_page(source, url, body, encoding))
    if not any(p.analysis.kind == "product" for p in pages):
        print("distcrawl profile: no product page among the inputs", file=sys.stderr)
        return 1
    text, report = draft_profile(pages, name=args.name)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for line in report:
        print(line, file=sys.stderr)
    return 0


def _read_page(source: str, url: str, body: bytes, encoding: str | None) -> _Page:
    root = _parse(_decode(body, encoding, []) or "<html></html>")
    analysis = analyze(url=url, body=body, encoding=encoding)
    page = _Page(source, url, root, analysis)
    if analysis.kind == "product":
        scan = scan_links(root, url, canonicalize_url)
        page.found_in = heuristic_product(root, url, scan.cards, HEURISTIC_FIELDS).found_in
    return page


def _q(text: str) -> str:
    """*text* as an XPath string literal."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return "concat(" + ', "\'", '.join(f"'{part}'" for part in text.split("'")) + ")"


def _has_class(tag: str, name: str) -> str:
    return f"//{tag}[contains(concat(' ', normalize-space(@class), ' '), ' {name} ')]"


def _element_xpath(el: HtmlElement) -> str:
    """An XPath that finds *el* alone on its page: by id, a class, or a path below one."""
    root = el.getroottree()
    if el.get("id") and len(root.xpath(f"//*[@id={_q(el.get('id'))}]")) == 1:
        return f"//*[@id={_q(el.get('id'))}]"
    if el.tag == "h1" and len(root.xpath("//h1")) == 1:
        return "//h1"
    for name in (el.get("class") or "").split():
        if re.fullmatch(r"[\w-]+", name) and len(root.xpath(_has_class(el.tag, name))) == 1:
            return _has_class(el.tag, name)
    parent = el.getparent()
    if parent is None or parent.tag in ("body", "html"):
        return f"//{el.tag}"
    same = [c for c in parent if c.tag == el.tag]
    step = el.tag if len(same) == 1 else f"{el.tag}[{same.index(el) + 1}]"
    return f"{_element_xpath(parent)}/{step}"


def _rule_for(found: HtmlElement | LabelValue, name: str) -> tuple[str, str | None]:
    """(selector, pattern) reading *name* where the generic extraction found it."""
    value_group = r"(\S+)" if name in ("sku", "gtin") else r"(.+)"
    if isinstance(found, LabelValue):
        label = found.label
        if found.shape == "dt/dd":
            return f"xpath://dt[normalize-space()={_q(label)}]/following-sibling::dd[1]", None
        if found.shape.endswith("/td"):
            return f"xpath://tr[*[1][normalize-space()={_q(label)}]]/td[last()]", None
        if found.shape.startswith("@"):
            attr = found.shape[1:]
            return f"xpath://*[@{attr}]/@{attr}", None
        if found.shape.endswith("+next"):
            before = found.element.getprevious()
            tag = before.tag if before is not None else "*"
            return f"xpath://{tag}[normalize-space()={_q(label)}]/following-sibling::*[1]", None
        tag = found.element.tag
        pattern = re.escape(label) + r"\s*[:#\uff1a]?\s*" + value_group
        if found.shape == "text":
            return f"xpath://{tag}[starts-with(normalize-space(), {_q(label)})]", pattern
        return f"xpath://{tag}[*[1][normalize-space()={_q(label)}]]", pattern
    code = r"([A-Za-z0-9][\w\-./]*\d[\w\-./]*)" if name in ("sku", "gtin") else None
    return "xpath:" + _element_xpath(found), code


_CLASS_XPATH = re.compile(
    r"//(\w+)\[contains\(concat\(' ', normalize-space\(@class\), ' '\), ' ([\w-]+) '\)\]"
)


def _pretty(selector: str) -> str:
    """The CSS form of the simple XPaths a draft makes (``div.pdp-cost``), else as it is."""
    if not selector.startswith("xpath:"):
        return selector
    xp = selector[len("xpath:") :]
    tail = ""
    for suffix, css in (("//a/@href", " a::attr(href)"), ("/@href", "::attr(href)")):
        if xp.endswith(suffix):
            xp, tail = xp[: -len(suffix)], css
            break
    if match := _CLASS_XPATH.fullmatch(xp):
        return f"{match[1]}.{match[2]}{tail}"
    if match := re.fullmatch(r"//\*\[@id='([\w-]+)'\]", xp):
        return f"#{match[1]}{tail}"
    if re.fullmatch(r"//\w+", xp):
        return xp[2:] + tail
    return selector


def _toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _field_line(name: str, selector: str, pattern: str | None) -> str:
    selector = _pretty(selector)
    if pattern is None:
        return f"{name} = {_toml(selector)}"
    return f"{name} = {{ selector = {_toml(selector)}, pattern = {_toml(pattern)} }}"


def _same(a: Any, b: Any) -> bool:
    return bool(json_ready(a) == json_ready(b))


def _links_rule(pages: list[_Page], kind: str) -> str | None:
    """A selector whose hrefs are the generic *kind* links of every page that has them."""
    listings = [p for p in pages if p.analysis.kind == "listing" and p.analysis.links[kind]]
    if not listings:
        return None
    first = listings[0]
    wanted = set(first.analysis.links[kind])
    candidates: list[str] = []
    if kind == "next":
        candidates += [
            "a[rel=next]::attr(href), link[rel=next]::attr(href)",
            "xpath://a[contains(translate(@aria-label, 'NEXT', 'next'), 'next')]/@href",
        ]
    for a in first.root.iter("a"):
        href = a.get("href")
        if not href or canonicalize_url(join_url(first.url, href)) not in wanted:
            continue
        if kind == "next":
            text = " ".join((a.text_content() or "").split())
            if text and not text.isdigit():
                candidates.append(f"xpath://a[normalize-space()={_q(text)}]/@href")
            continue
        for el in (a, *list(a.iterancestors())[:3]):
            for cls in (el.get("class") or "").split():
                if re.fullmatch(r"[\w-]+", cls):
                    tail = "" if el is a else "//a"
                    candidates.append(f"xpath:{_has_class(el.tag, cls)}{tail}/@href")
            if el.tag in ("li", "tr", "article"):
                path = "/".join(
                    str(x.tag) for x in reversed([a, *list(a.iterancestors())[:4]]) if x is not a
                )
                candidates.append(f"xpath://{path.split('/')[-1]}//a/@href")
        break
    for selector in dict.fromkeys(candidates):
        if all(_links_match(p, kind, selector) for p in listings):
            return selector
    return None


def _links_match(page: _Page, kind: str, selector: str) -> bool:
    from parsel import Selector

    from .profile import Rule

    rule = Rule.compile(selector, "draft")
    hrefs = rule.values(Selector(root=page.root, type="html"), attribute="href")
    found = [canonicalize_url(join_url(page.url, h)) for h in hrefs]
    generic = page.analysis.links[kind]
    if kind == "next":
        return bool(found) and set(found) <= set(generic)
    return list(dict.fromkeys(found)) == generic


def _kind_rule(pages: list[_Page], xpaths: list[str]) -> str | None:
    """The first XPath that matches on every product page and on no other page given."""
    for xp in xpaths:
        base = xp.split("/@")[0].split("/following-sibling::")[0]
        if all(bool(p.root.xpath(base)) == (p.analysis.kind == "product") for p in pages):
            return "xpath:" + base
    return None


def draft_profile(pages: list[_Page], *, name: str | None = None) -> tuple[str, list[str]]:
    """(TOML text, report lines) of a profile drafted from *pages*, checked on them."""
    products = [p for p in pages if p.analysis.kind == "product"]
    host = urlsplit(products[0].url).hostname or "localhost"
    site_name = name or host
    rules: dict[str, tuple[str, str | None]] = {}
    notes: dict[str, str] = {}
    for field_name in DRAFT_FIELDS:
        sources = {p.analysis.sources.get(field_name) for p in products}
        if sources <= {None}:
            notes[field_name] = "not found on these pages"
            continue
        if sources != {"heuristics"}:
            notes[field_name] = (
                f"from {', '.join(sorted(s or 'nowhere' for s in sources))}: no rule needed"
            )
            continue
        candidates = list(
            dict.fromkeys(
                _rule_for(p.found_in[field_name], field_name)
                for p in products
                if field_name in p.found_in
            )
        )
        if not candidates and field_name == "currency" and "price" in rules:
            notes[field_name] = "printed with the price: the price rule reads it too"
            continue
        if not candidates:
            notes[field_name] = "read from the page text as a whole: no selector to give"
            continue
        # the first rule (from any page) that reads every page given as the generic reading
        why = ""
        for candidate in candidates:
            trial = _load(_render(site_name, host, {field_name: candidate}, {}, {}, {}))
            wrong = _check(products, trial, {field_name: candidate})
            if not wrong:
                rules[field_name] = candidate
                break
            why = why or next(iter(wrong.values()))
        else:
            notes[field_name] = f"the drafted rule {why}; edit it: " + _field_line(
                field_name, *candidates[0]
            )
    report: list[str] = []
    links = {kind: r for kind in ("product", "next") if (r := _links_rule(pages, kind))}
    kinds: dict[str, str] = {}
    product_kind = _kind_rule(pages, [s[len("xpath:") :] for s, _ in rules.values()])
    if product_kind:
        kinds["product"] = product_kind
    text = _render(site_name, host, rules, notes, links, kinds)
    profile = _load(text)
    wrong = _check(products, profile, rules)
    report.append(
        f"drafted {len(rules)} field rules, {len(links)} link rules, {len(kinds)} kind rules"
        f" from {len(products)} product pages and {len(pages) - len(products)} other pages"
    )
    for field_name, why in wrong.items():
        report.append(f"warning: {field_name}: {why}")
    return text, report


def _load(text: str) -> SiteProfile:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "draft.toml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_profile(path)
        except ProfileError as exc:  # a bug here, not the user's: say so plainly
            raise RuntimeError(f"the drafted profile does not load: {exc}") from exc


def _check(
    products: list[_Page], profile: SiteProfile, rules: dict[str, tuple[str, str | None]]
) -> dict[str, str]:
    """Fields whose rule gives another value than the generic extraction on some page."""
    from parsel import Selector

    from .merge import read_profile_fields

    wrong: dict[str, str] = {}
    for page in products:
        selector = Selector(root=page.root, type="html")
        values = read_profile_fields(profile, selector, page.url, [])
        generic = page.analysis.product or {}
        checked = [*rules, "currency"] if "price" in rules else list(rules)
        for field_name in checked:
            if field_name == "currency" and "currency" not in values:
                continue  # a price without one: the generic reading still fills it
            if field_name not in wrong and not _same(
                values.get(field_name), generic.get(field_name)
            ):
                wrong[field_name] = (
                    f"gives {json_ready(values.get(field_name))!r} where the page says"
                    f" {json_ready(generic.get(field_name))!r} ({page.source})"
                )
    return wrong


def _render(
    site_name: str,
    host: str,
    rules: dict[str, tuple[str, str | None]],
    notes: dict[str, str],
    links: dict[str, str],
    kinds: dict[str, str],
) -> str:
    lines = [
        f"# Draft site profile for {host}, drafted by distcrawl's profile command from what the",
        "# generic extraction found. Each rule points where that value was read; check it with",
        f"#   {EXPLAIN_PROFILE.line(profile='THIS_FILE')}",
        "# and edit freely: every key is explained in distcrawl/profiles/example.toml.",
        "",
        "[site]",
        f"name = {_toml(site_name)}",
        f"domains = [{_toml(host)}]",
        "",
    ]
    if links:
        lines += ["[links]", "# the generic link finder's choices on the pages given"]
        lines += [f"{kind} = {_toml(_pretty(selector))}" for kind, selector in links.items()]
        lines.append("")
    if kinds:
        lines += ["[kinds]", "# present on every product page given, and on no other page"]
        lines += [f"{kind} = {_toml(_pretty(selector))}" for kind, selector in kinds.items()]
        lines.append("")
    lines.append("[fields]")
    for field_name in DRAFT_FIELDS:
        if field_name in rules:
            lines.append(_field_line(field_name, *rules[field_name]))
        elif field_name in notes:
            lines.append(f"# {field_name}: {notes[field_name]}")
    return "\n".join(lines) + "\n"
