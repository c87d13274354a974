"""Site profiles: per-shop CSS/XPath rules for page kinds, links and product fields, in TOML.

A profile is written only for a shop whose markup the built-in extraction cannot read; it
overrides, field by field and link kind by link kind, whatever structured data and
heuristics found, and leaves everything it does not mention to them. ``distcrawl extract
--profile FILE URL`` shows the result while writing one.

Every key (see ``distcrawl/profiles/example.toml`` for a commented file)::

    [site]
    name = "my-shop"                 # optional, defaults to the file name
    domains = ["shop.example.com"]   # required: hosts it applies to; subdomains match too,
                                     # "host:port" matches that port only
    currency = "EUR"                 # optional: ISO code for prices that show no currency
    strip_params = ["sessionid"]     # optional: extra query parameters to drop from URLs

    [links]                          # optional; each replaces the built-in rule for its kind
    category = "nav.menu a::attr(href)"
    listing = "ul.subcats a::attr(href)"
    product = "a.product-link::attr(href)"
    next = "a[rel=next]::attr(href)"

    [kinds]                          # optional: the page is of the first kind that matches,
    product = "div.pdp"              # checked in the order product, listing, category;
    listing = "ul.products"          # no match falls back to the built-in rules
    category = "ul.subcategories"

    [fields]                         # optional: any of FIELD_NAMES
    name = "h2.pdp-name::text"
    price = "div.pdp-cost::attr(data-amount)"
    sku = { selector = "div.pdp-code::text", pattern = 'SKU:\\s*(\\S+)' }
    category_path = { selector = "ol.trail li a::text", skip = 1 }

    [politeness]                     # optional: read by the crawl's throttling, not here
    rate = 5.0                       # requests per second to this site
    concurrency = 4                  # requests in flight to this site

A *selector* is CSS (parsel's, with ``::text`` and ``::attr(name)``) or XPath when it
starts with ``xpath:``; a list of selectors is allowed anywhere one is. A selector that
matches elements rather than text or attributes yields their text (for fields) or their
``href`` (for links). Field tables take ``selector`` plus ``pattern`` (a regular
expression; its first group, or the whole match, is kept and non-matching values dropped)
and ``skip`` (how many leading matches to drop, e.g. a breadcrumb's "Home").

Scalar fields take the first non-empty match, ``description`` all matches joined by a
space, ``category_path`` and ``image_urls`` all matches. ``price`` and ``list_price`` go
through price-parser, ``currency`` and ``availability`` are normalised, a leading "Home"
crumb and a trailing crumb equal to the product name are dropped from ``category_path``
even without ``skip``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lxml import etree
from parsel import Selector
from parsel.csstranslator import css2xpath

from distcrawl.base.durations import parse_duration

from .links import LINK_KINDS

__all__ = [
    "FIELD_NAMES",
    "KIND_NAMES",
    "LINK_NAMES",
    "POLITENESS_KEYS",
    "FieldRule",
    "ProfileError",
    "Rule",
    "SiteProfile",
    "load_profiles",
]

#: Product fields a profile may set
FIELD_NAMES: tuple[str, ...] = (
    "name",
    "price",
    "currency",
    "list_price",
    "sku",
    "gtin",
    "brand",
    "availability",
    "category_path",
    "description",
    "image_urls",
)
#: link kinds a profile may set (the keys of ``PageAnalysis.links``)
LINK_NAMES: tuple[str, ...] = LINK_KINDS
#: page kinds a profile may recognise, in the order they are tried
KIND_NAMES: tuple[str, ...] = ("product", "listing", "category")
#: politeness keys and their types
POLITENESS_KEYS: dict[str, type] = {"rate": float, "concurrency": int, "delay": float}
#: revisit intervals a profile may set (page kinds; "gone": pages that answered 404/410;
#: "*": every other kind), over DISTCRAWL_REVISIT for the profile's sites
REVISIT_KEYS: tuple[str, ...] = ("seed", *KIND_NAMES, "gone", "*")

_SECTIONS: dict[str, tuple[str, ...]] = {
    "site": ("name", "domains", "currency", "strip_params"),
    "links": LINK_NAMES,
    "kinds": KIND_NAMES,
    "fields": FIELD_NAMES,
    "politeness": tuple(POLITENESS_KEYS),
    "revisit": REVISIT_KEYS,
}
_FIELD_TABLE_KEYS = ("selector", "pattern", "skip")


class ProfileError(ValueError):
    """A profile file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Rule:
    """One compiled selector."""

    source: str
    xpath: str

    @classmethod
    def compile(cls, source: str, where: str) -> Rule:
        """Translate CSS to XPath and check the XPath, or raise :class:`ProfileError`."""
        text = source.strip()
        if not text:
            raise ProfileError(f"{where}: empty selector")
        try:
            xpath = text[len("xpath:") :].strip() if text.startswith("xpath:") else css2xpath(text)
            etree.XPath(xpath)
        except Exception as exc:  # cssselect and lxml raise several unrelated types
            raise ProfileError(f"{where}: invalid selector {source!r}: {exc}") from exc
        return cls(source=source, xpath=xpath)

    def values(self, selector: Selector, *, attribute: str | None = None) -> list[str]:
        """Matches as strings: text and attributes as they are, elements as their text (or
        their *attribute*, e.g. ``href`` for links); whitespace collapsed, empties dropped."""
        try:
            matches = selector.xpath(self.xpath)
        except Exception:  # an XPath valid at load time can still fail on odd documents
            return []
        out = []
        for match in matches:
            node = match.root
            if isinstance(node, etree._Element):
                raw = node.get(attribute) if attribute else node.text_content()
            else:
                raw = node
            if raw is None:
                continue
            text = " ".join(str(raw).split())
            if text:
                out.append(text)
        return out


@dataclass(frozen=True)
class FieldRule:
    """How a profile reads one Product field."""

    rules: tuple[Rule, ...]
    pattern: re.Pattern[str] | None = None
    skip: int = 0

    def values(self, selector: Selector) -> list[str]:
        """Values of the first rule that matches, after ``skip`` and ``pattern``."""
        for rule in self.rules:
            values = rule.values(selector)[self.skip :]
            if self.pattern is not None:
                values = [v for v in (self._apply(value) for value in values) if v]
            if values:
                return values
        return []

    def _apply(self, value: str) -> str | None:
        assert self.pattern is not None
        match = self.pattern.search(value)
        if match is None:
            return None
        group = match.group(1) if self.pattern.groups else match.group(0)
        return group.strip() if group else None


@dataclass(frozen=True)
class SiteProfile:
    """A loaded, checked site profile."""

    name: str
    path: str
    domains: tuple[str, ...]
    currency: str | None = None
    strip_params: tuple[str, ...] = ()
    links: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    kinds: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    fields: dict[str, FieldRule] = field(default_factory=dict)
    politeness: dict[str, float | int] = field(default_factory=dict)
    #: revisit intervals by page kind, in seconds (read by the frontier's revisit mode)
    revisit: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def match(profiles: Sequence[SiteProfile], url: str) -> SiteProfile | None:
        """The profile for *url*'s host; the most specific domain wins (a ``host:port``
        entry over a host, a longer host over its parent domain)."""
        try:
            parts = urlsplit(url.strip())
            host = (parts.hostname or "").lower().rstrip(".")
            netloc = f"{host}:{parts.port}" if parts.port else host
        except ValueError:
            return None
        if not host:
            return None
        best: tuple[int, SiteProfile] | None = None
        for profile in profiles:
            for domain in profile.domains:
                if ":" in domain and not domain.startswith("["):
                    score = len(domain) + 1000 if netloc == domain else -1
                elif host == domain or host.endswith("." + domain):
                    score = len(domain)
                else:
                    score = -1
                if score >= 0 and (best is None or score > best[0]):
                    best = (score, profile)
        return best[1] if best else None

    def kind(self, selector: Selector) -> str | None:
        """The first of :data:`KIND_NAMES` whose rule matches anything, else None."""
        for kind in KIND_NAMES:
            for rule in self.kinds.get(kind, ()):
                try:
                    if selector.xpath(rule.xpath):
                        return kind
                except Exception:
                    continue
        return None

    def link_values(self, selector: Selector, kind: str) -> list[str] | None:
        """Raw hrefs for link *kind*, or None when the profile leaves that kind alone."""
        rules = self.links.get(kind)
        if not rules:
            return None
        return [value for rule in rules for value in rule.values(selector, attribute="href")]


def load_profiles(paths: Iterable[str | Path]) -> list[SiteProfile]:
    """Profiles from files and directories (every ``*.toml`` in it, sorted by name)."""
    profiles: list[SiteProfile] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            profiles.extend(load_profile(p) for p in sorted(path.glob("*.toml")))
        elif path.is_file():
            profiles.append(load_profile(path))
        else:
            raise ProfileError(f"{path}: no such profile file or directory")
    return profiles


def load_profile(path: str | Path) -> SiteProfile:
    """One profile file, checked key by key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: invalid TOML: {exc}") from exc
    for section, value in data.items():
        if section not in _SECTIONS:
            raise ProfileError(
                f"{path}: unknown section [{section}] (known: {', '.join(_SECTIONS)})"
            )
        if not isinstance(value, dict):
            raise ProfileError(f"{path}: [{section}] must be a table")
        for key in value:
            if key not in _SECTIONS[section]:
                known = ", ".join(_SECTIONS[section])
                raise ProfileError(f"{path}: unknown key {section}.{key} (known: {known})")
    site = data.get("site", {})
    domains = site.get("domains")
    if not _is_str_list(domains) or not domains:
        raise ProfileError(f"{path}: site.domains must be a non-empty list of host names")
    currency = site.get("currency")
    if currency is not None and not (
        isinstance(currency, str) and re.fullmatch(r"[A-Z]{3}", currency)
    ):
        raise ProfileError(f"{path}: site.currency must be an ISO 4217 code such as 'EUR'")
    strip_params = site.get("strip_params", [])
    if not _is_str_list(strip_params):
        raise ProfileError(f"{path}: site.strip_params must be a list of parameter names")
    name = site.get("name", path.stem)
    if not isinstance(name, str):
        raise ProfileError(f"{path}: site.name must be a string")
    return SiteProfile(
        name=name,
        path=str(path),
        domains=tuple(d.strip().lower().rstrip(".") for d in domains),
        currency=currency,
        strip_params=tuple(strip_params),
        links={k: _rules(v, f"{path}: links.{k}") for k, v in data.get("links", {}).items()},
        kinds={k: _rules(v, f"{path}: kinds.{k}") for k, v in data.get("kinds", {}).items()},
        fields={k: _field(v, f"{path}: fields.{k}") for k, v in data.get("fields", {}).items()},
        politeness=_politeness(data.get("politeness", {}), path),
        revisit=_revisit(data.get("revisit", {}), path),
    )


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _rules(value: Any, where: str) -> tuple[Rule, ...]:
    if isinstance(value, str):
        return (Rule.compile(value, where),)
    if _is_str_list(value) and value:
        return tuple(Rule.compile(v, where) for v in value)
    raise ProfileError(f"{where}: must be a selector string or a list of them")


def _field(value: Any, where: str) -> FieldRule:
    if not isinstance(value, dict):
        return FieldRule(rules=_rules(value, where))
    for key in value:
        if key not in _FIELD_TABLE_KEYS:
            known = ", ".join(_FIELD_TABLE_KEYS)
            raise ProfileError(f"{where}: unknown key {key!r} (known: {known})")
    if "selector" not in value:
        raise ProfileError(f"{where}: a field table needs a 'selector'")
    pattern = value.get("pattern")
    compiled = None
    if pattern is not None:
        if not isinstance(pattern, str):
            raise ProfileError(f"{where}.pattern: must be a string")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ProfileError(f"{where}.pattern: invalid regular expression: {exc}") from exc
    skip = value.get("skip", 0)
    if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
        raise ProfileError(f"{where}.skip: must be a whole number >= 0")
    return FieldRule(rules=_rules(value["selector"], where), pattern=compiled, skip=skip)


def _revisit(value: dict[str, Any], path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, raw in value.items():
        try:
            out[key] = parse_duration(raw, f"revisit.{key}")
        except ValueError as exc:
            raise ProfileError(f"{path}: {exc}") from None
    return out


def _politeness(value: dict[str, Any], path: Path) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for key, raw in value.items():
        kind = POLITENESS_KEYS[key]
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ProfileError(f"{path}: politeness.{key} must be a number")
        # a delay of 0 means "no pause"; a rate or concurrency of 0 would stop the crawl
        if raw < 0 or (raw == 0 and key != "delay"):
            raise ProfileError(f"{path}: politeness.{key} must be a positive number")
        if kind is int and not isinstance(raw, int):
            raise ProfileError(f"{path}: politeness.{key} must be a whole number")
        out[key] = kind(raw)
    return out
