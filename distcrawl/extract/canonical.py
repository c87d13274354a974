"""URL canonicalisation: one page is one URL, so one fingerprint and one stored product.

Built on :func:`w3lib.url.canonicalize_url` (percent-encoding, sorted query, no fragment,
lower-case host) plus what a catalog crawl needs on top: tracking parameters stripped,
``?page=1`` treated as the first page without a parameter, default ports removed.
Also :func:`join_url`, which every reader uses to make a link absolute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import unquote_plus, urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url as w3lib_canonicalize_url

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_FIRST_PAGE_PARAMS",
    "DEFAULT_JOIN_CACHE_SIZE",
    "DEFAULT_TRACKING_PARAMS",
    "DEFAULT_TRACKING_PREFIXES",
    "canonicalize_url",
    "is_plain_absolute",
    "join_url",
    "same_site",
]

#: query parameters that only say where a visitor came from, never what the page shows
DEFAULT_TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "ref",
        "ref_",
        "referrer",
        "fbclid",
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "yclid",
        "twclid",
        "ttclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "srsltid",
        "spm",
        "sessionid",
        "phpsessid",
        "jsessionid",
        "sid",
    }
)

#: parameter-name prefixes that mark a whole family of tracking parameters (utm_source, ...)
DEFAULT_TRACKING_PREFIXES: tuple[str, ...] = ("utm_", "pk_", "piwik_", "matomo_", "hsa_")

#: pagination parameters whose value ``1`` means the same page as no parameter at all
DEFAULT_FIRST_PAGE_PARAMS: frozenset[str] = frozenset({"page", "pg", "pagenum", "page_num"})

#: canonical forms remembered per process (navigation links recur on every page)
DEFAULT_CACHE_SIZE = 8192

#: root-relative links joined per process (a site's navigation recurs on every page)
DEFAULT_JOIN_CACHE_SIZE = 8192

#: longer hrefs and bases bypass the join caches: a hostile page must not bloat them
_MAX_CACHED_CHARS = 2048

#: ports a URL may leave out, per scheme
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}

# an absolute http(s) URL that urljoin gives back as it is: an ASCII host and port, no
# ";params", no empty "?" or "#", nothing urlsplit strips or lower-cases
_PLAIN_ABSOLUTE = re.compile(
    r"https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[^\s?#;]*)?(?:\?[^\s#]+)?(?:#\S+)?"
)
# "/c/shoes/" but not "//host/..."; urljoin drops tabs and newlines, which could make one
_ROOT_RELATIVE = re.compile(r"/(?!/)[^\t\n\r]*")


def canonicalize_url(
    url: str,
    *,
    tracking_params: Iterable[str] = DEFAULT_TRACKING_PARAMS,
    tracking_prefixes: Iterable[str] = DEFAULT_TRACKING_PREFIXES,
    first_page_params: Iterable[str] = DEFAULT_FIRST_PAGE_PARAMS,
) -> str:
    """Return the canonical form of *url*; idempotent, and never raises.

    Parameter names are compared case-insensitively. A URL that cannot be parsed at all is
    returned stripped of surrounding whitespace, so a caller always has a key to use.
    """
    # frozensets hash once and the same links recur on every page of a site: cache
    options = _lowered(
        frozenset(tracking_params), tuple(tracking_prefixes), frozenset(first_page_params)
    )
    return _canonicalize(url.strip(), *options)


@lru_cache(maxsize=64)
def _lowered(
    tracking_params: frozenset[str], tracking_prefixes: tuple[str, ...], first_page: frozenset[str]
) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """The options of :func:`canonicalize_url` as ``_canonicalize`` compares them."""
    return (
        frozenset(n.lower() for n in tracking_params),
        tuple(p.lower() for p in tracking_prefixes),
        frozenset(n.lower() for n in first_page),
    )


@lru_cache(maxsize=DEFAULT_CACHE_SIZE)
def _canonicalize(
    url: str, drop: frozenset[str], prefixes: tuple[str, ...], first_page: frozenset[str]
) -> str:
    try:
        canonical = w3lib_canonicalize_url(url)
    except Exception:  # w3lib raises on some invalid hosts/ports; keep the raw URL then
        canonical = url
    try:
        parts = urlsplit(canonical)
        netloc = _strip_default_port(parts.scheme, parts.netloc, parts.port)
    except ValueError:
        return canonical
    kept = []
    for pair in parts.query.split("&") if parts.query else ():
        raw_name, _, raw_value = pair.partition("=")
        name = unquote_plus(raw_name).lower()
        if name in drop or name.startswith(prefixes):
            continue
        if name in first_page and unquote_plus(raw_value).strip() in ("1", ""):
            continue
        kept.append(pair)
    path = parts.path or ("/" if netloc else "")
    return urlunsplit((parts.scheme, netloc, path, "&".join(kept), ""))


def is_plain_absolute(url: str) -> bool:
    """True for an absolute http(s) URL that urlsplit reads and urljoin returns unchanged."""
    return _PLAIN_ABSOLUTE.fullmatch(url) is not None


def join_url(base: str, href: str) -> str:
    """``urljoin(base, href)``, without parsing an absolute URL urljoin would only rebuild,
    and with root-relative links (``/c/shoes/``) cached per ``scheme://host``.

    Raises ValueError where urljoin does.
    """
    if base and is_plain_absolute(href):
        urlsplit(base)  # raises on a base urljoin cannot parse
        return href
    cacheable = len(href) <= _MAX_CACHED_CHARS and len(base) <= _MAX_CACHED_CHARS
    if cacheable and _ROOT_RELATIVE.fullmatch(href) and (origin := _origin(base)) is not None:
        return _join_root_relative(origin, href)
    return urljoin(base, href)


@lru_cache(maxsize=256)
def _origin(base: str) -> str | None:
    """``scheme://host`` of an http(s) *base*: all that a root-relative link depends on."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


@lru_cache(maxsize=DEFAULT_JOIN_CACHE_SIZE)
def _join_root_relative(origin: str, href: str) -> str:
    return urljoin(origin, href)


def same_site(url_a: str, url_b: str) -> bool:
    """True when both URLs are on one host; a leading ``www.``, scheme and port are ignored."""
    try:
        host_a, host_b = urlsplit(url_a).hostname or "", urlsplit(url_b).hostname or ""
    except ValueError:
        return False
    return bool(host_a) and host_a.removeprefix("www.") == host_b.removeprefix("www.")


def _strip_default_port(scheme: str, netloc: str, port: int | None) -> str:
    if port is not None and _DEFAULT_PORTS.get(scheme) == port:
        return netloc.rpartition(":")[0]
    return netloc
