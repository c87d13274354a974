"""Which URLs the crawler may fetch: scheme, shape, length, and private addresses."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["MAX_URL_LENGTH", "UrlRefused", "check_url", "is_private_address"]

#: URLs longer than this are refused (browsers and servers cap around 2-8 KB)
MAX_URL_LENGTH = 4096
#: schemes a seed or a queued request may use
ALLOWED_SCHEMES = frozenset({"http", "https"})


class UrlRefused(ValueError):
    """A URL the crawler will not fetch; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, url: str = "") -> None:
        super().__init__(f"{reason}: {url[:200]}" if url else reason)
        self.reason = reason


def is_private_address(host: str) -> bool:
    """Whether ``host`` is an IP literal in a private, loopback, link-local or reserved range."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def check_url(url: str, *, allow_private: bool | frozenset[str] = False) -> str:
    """Return the host of ``url`` if the crawler may fetch it, else raise :class:`UrlRefused`.

    ``allow_private`` is True (anything goes), False (no private IP literals or
    ``localhost``), or a set of hosts that are allowed although private (e.g. ``127.0.0.1``
    for the demo shop). Names are checked again after DNS resolution by the downloader
    middleware; this is the cheap check done before a URL enters the frontier.
    """
    if not isinstance(url, str) or not url:
        raise UrlRefused("empty_url")
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused("url_too_long", url)
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise UrlRefused("bad_characters", url)
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # raises on a non-numeric port
    except ValueError:
        raise UrlRefused("malformed_url", url) from None
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise UrlRefused("bad_scheme", url)
    if not host:
        raise UrlRefused("missing_host", url)
    if allow_private is True:
        return host
    private = host == "localhost" or host.endswith(".localhost") or is_private_address(host)
    if private and not (isinstance(allow_private, frozenset) and host in allow_private):
        raise UrlRefused("private_address", url)
    return host
