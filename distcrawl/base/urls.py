"""Which URLs the crawler may fetch: scheme, shape, length, and private addresses."""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from typing import Any
from urllib.parse import ParseResult, urlsplit, urlunsplit

from distcrawl.base.names import reasons

__all__ = [
    "MAX_URL_LENGTH",
    "UrlRefused",
    "check_url",
    "is_metadata_address",
    "is_private_address",
    "mask_url",
    "parse_allow_private",
    "plain_url_host",
    "plain_url_parts",
    "printable",
    "private_allowed",
    "shorten_middle",
]

#: URLs longer than this are refused (browsers and servers cap around 2-8 KB)
MAX_URL_LENGTH = 4096
#: schemes a seed or a queued request may use
ALLOWED_SCHEMES = frozenset({"http", "https"})
#: cloud metadata services (AWS/GCP/Azure/OpenStack, AWS IPv6, Alibaba): refused with their own
#: reason, because a crawler that reaches one can leak the credentials of the machine it runs on
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),
        ipaddress.ip_address("fd00:ec2::254"),
        ipaddress.ip_address("100.100.100.200"),
    }
)

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_DEFAULT_PORTS = {"http": 80, "https": 443}
# What inet_aton (and so the resolver and every browser) reads as an IPv4 address: 1-4 labels
# in decimal, octal or hex, e.g. 2130706433, 0x7f.1 or 127.1 all mean 127.0.0.1.
#: controls, space and DEL: never part of a URL to fetch
_BAD_URL_CHARACTERS = re.compile(r"[\x00-\x20\x7f]")
_NUMERIC_HOST = re.compile(r"(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?", re.IGNORECASE)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: the plainest URL, what a crawl's URLs mostly are: http(s), a lower-case ASCII host, a port
#: without a leading zero, a path, a query (not empty) of unreserved, sub-delimiter and
#: ``:@/?%`` characters, no fragment (tests/node/test_plain_urls.py: see plain_url_host)
_PLAIN_URL = re.compile(
    r"https?://([a-z0-9.\-]+)(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-._~:/@!$&'()*+,;=%]*"
    r"(?:\?[A-Za-z0-9\-._~:/?@!$&()*+,;=%]+)?"
)


def shorten_middle(text: str, width: int) -> str:
    """*text* in at most *width* characters: cut in the middle with ``…``, so a URL keeps its
    site and the end of its path (``http://shop.test/c…/p/1234``)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with control characters escaped, so that hostile
    input quoted in a log line cannot end the line or forge another one."""
    cut = text[:limit]
    if cut.isprintable():
        return cut
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)


class UrlRefused(ValueError):
    """A URL the crawler will not fetch; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, url: str = "") -> None:
        super().__init__(f"{reason}: {printable(url)}" if url else reason)
        self.reason = reason


def _ip(host: str) -> _IPAddress | None:
    """``host`` as an IP address when it is one, in any notation the resolver accepts."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            return None
    return None


def _embedded_v4(ip: _IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64), which is where it goes."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _special(ip: _IPAddress) -> bool:
    # is_global is False for every special-purpose range: private, shared (100.64/10),
    # loopback, link-local, reserved, documentation, benchmarking, unspecified ...
    if not ip.is_global or ip.is_multicast:
        return True
    inner = _embedded_v4(ip)
    return inner is not None and _special(inner)


def is_private_address(host: str) -> bool:
    """Whether ``host`` is an IP literal in a private, loopback, link-local or reserved range.

    Any range that is not globally reachable counts (RFC 6890), also when an IPv6 address
    carries such an IPv4 address (``::ffff:127.0.0.1``) or the IPv4 address is written the way
    ``inet_aton`` reads it (``2130706433``, ``0x7f.1``).
    """
    ip = _ip(host)
    return ip is not None and _special(ip)


def is_metadata_address(host: str) -> bool:
    """Whether ``host`` is the address of a cloud metadata service."""
    ip = _ip(host)
    if ip is None:
        return False
    inner = _embedded_v4(ip)
    return ip in METADATA_ADDRESSES or (inner is not None and inner in METADATA_ADDRESSES)


def parse_allow_private(value: Any) -> bool | frozenset[str]:
    """``DISTCRAWL_ALLOW_PRIVATE`` as a flag or a set of entries (comma list or iterable)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    if isinstance(value, bool):
        return value
    text = str(value or "").strip()
    if text.lower() in ("", "0", "false", "no", "off"):
        return False
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    return frozenset(h.strip() for h in text.split(",") if h.strip())


@functools.lru_cache(maxsize=64)
def _entries(
    allow: frozenset[str],
) -> tuple[tuple[str | None, _IPNetwork | None, int | None], ...]:
    """Allow-list entries as (name, network, port): ``host``, ``host:port``, ``[v6]:port``,
    ``10.0.0.0/8`` or ``10.0.0.0/8:port`` (a port of None matches every port)."""
    out: list[tuple[str | None, _IPNetwork | None, int | None]] = []
    for entry in allow:
        host, port = entry.strip(), None
        if host.startswith("["):
            inside, _, rest = host[1:].partition("]")
            host, port_text = inside, rest[1:] if rest.startswith(":") else ""
            port = int(port_text) if port_text.isdigit() else None
        elif host.count(":") == 1:
            host, _, port_text = host.partition(":")
            port = int(port_text) if port_text.isdigit() else None
        try:
            out.append((None, ipaddress.ip_network(host, strict=False), port))
        except ValueError:
            ip = _ip(host)
            if ip is not None:
                out.append((None, ipaddress.ip_network(ip), port))
            else:
                out.append((host.lower().rstrip("."), None, port))
    return tuple(out)


def private_allowed(
    allow: bool | frozenset[str], host: str, port: int | None, address: str | None = None
) -> bool:
    """Whether ``allow`` lets the crawler reach private ``host`` on ``port``.

    ``address`` is what the name resolved to (None: ``host`` itself, when it is an IP). An entry
    naming an address or a network allows every name that resolves into it; an entry naming a
    host allows that name whatever it resolves to. An entry with a port allows that port only.
    """
    if allow is True:
        return True
    if allow is False or not allow:
        return False
    name = host.strip("[]").lower().rstrip(".")
    ip = _ip(address if address is not None else name)
    for entry_name, network, entry_port in _entries(allow):
        if entry_port is not None and entry_port != port:
            continue
        if entry_name is not None and entry_name == name:
            return True
        if network is not None and ip is not None and ip in network:
            return True
    return False


def plain_url_host(url: str) -> str | None:
    """The host of ``url`` if it is a plain URL (else None): one :func:`check_url` passes
    without a look at its parts when private hosts are allowed, and one Scrapy's
    normalisation of a request's URL (w3lib's ``safe_url_string``) leaves as it is, so a
    decoded request skips it. A cheap look at a URL seen for every request."""
    if len(url) > MAX_URL_LENGTH:
        return None
    match = _PLAIN_URL.fullmatch(url)
    if match is None:
        return None
    port = match.group(2)
    return match.group(1) if port is None or int(port) <= 65535 else None


def plain_url_parts(url: str) -> ParseResult | None:
    """``urllib.parse.urlparse(url)`` for a URL :func:`plain_url_host` accepted, by three
    partitions instead of Python's parse (a quarter of the cost); None where a path segment
    holds ``;`` (urlparse splits it into params). A plain URL has a lower-case scheme and no
    fragment, and its path starts at the first ``/`` after ``://``."""
    scheme, _, rest = url.partition("://")
    netloc, _, after = rest.partition("/")
    path, _, query = after.partition("?")
    if ";" in path:
        return None
    return ParseResult(scheme, netloc, "/" + path, "", query, "")


def check_url(url: str, *, allow_private: bool | frozenset[str] = False) -> str:
    """Return the host of ``url`` if the crawler may fetch it, else raise :class:`UrlRefused`.

    ``allow_private`` is True (anything goes), False (no private IP literals or
    ``localhost``), or a set of entries that are allowed although private (e.g. ``127.0.0.1``
    for the demo shop, ``127.0.0.1:8000`` for one port, ``10.0.0.0/8``). Names are checked
    again after DNS resolution by
    :class:`~distcrawl.node.middlewares.safety.AddressGuardMiddleware`; this is
    the cheap check done before a URL enters the frontier.
    """
    if allow_private is True and isinstance(url, str):
        plain = plain_url_host(url)
        if plain is not None:
            return plain
    return _checked_host(url, allow_private)


def _checked_host(url: str, allow_private: bool | frozenset[str]) -> str:
    """:func:`check_url` without its look for a plain URL."""
    if not isinstance(url, str) or not url:
        raise UrlRefused(reasons.EMPTY_URL)
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused(reasons.URL_TOO_LONG, url)
    if _BAD_URL_CHARACTERS.search(url):
        raise UrlRefused(reasons.BAD_CHARACTERS, url)
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port  # raises on a non-numeric or out-of-range port
    except ValueError:
        raise UrlRefused(reasons.MALFORMED_URL, url) from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UrlRefused(reasons.BAD_SCHEME, url)
    if not host:
        raise UrlRefused(reasons.MISSING_HOST, url)
    if allow_private is True:
        return host
    private = host == "localhost" or host.endswith(".localhost") or is_private_address(host)
    if private and not private_allowed(allow_private, host, port or _DEFAULT_PORTS[scheme]):
        raise UrlRefused(reasons.PRIVATE_ADDRESS, url)
    return host


#: query parameters whose values :func:`mask_url` hides
SECRET_QUERY_KEYS = frozenset({"password", "pass", "pwd", "secret", "token", "access_token"})


def mask_url(url: str) -> str:
    """*url* with its password (and password-like query parameters) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostinfo}" if colon else netloc
    query = parts.query
    if query:
        masked = []
        for pair in query.split("&"):
            key, eq, _value = pair.partition("=")
            masked.append(f"{key}=***" if eq and key.lower() in SECRET_QUERY_KEYS else pair)
        query = "&".join(masked)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
