"""The site (host) of a request as the frontier names it, read from its payload's URL, and the
value a shard keeps for a request (its payload alone when the payload's URL names its site,
else ``"<site>\\n<payload>"``).

The Lua library reads them too (``include/sites.lua``): both follow the same two patterns,
byte for byte, and a property test holds them to the same answer on every input.
"""

from __future__ import annotations

import json
import re
from typing import Any

from distcrawl.frontier.batch import raw_text

__all__ = ["payload_site", "record_site", "split_value"]

_SCHEME = rb'\{"u":"[A-Za-z][A-Za-z0-9+.\-]*://'
_HOST = rb"([A-Za-z0-9.\-]*)"
_NETLOC_END = rb'[/?#"\\]'
#: most URLs: a plain host name (no user, port or IPv6 literal)
_PLAIN = re.compile(_SCHEME + _HOST + _NETLOC_END)
_NETLOC = re.compile(_SCHEME + rb'([^/?#"\\]*)')
#: _PLAIN on a payload as text, a port allowed (what _NETLOC and _PORT would find then): every
#: character it matches is ASCII, so it matches where the payload's UTF-8 would. A node's
#: payloads, read without encoding them
_PLAIN_TEXT = re.compile((_SCHEME + _HOST + rb"(?::[0-9]*)?" + _NETLOC_END).decode("ascii"))
_V6 = re.compile(rb"\[([^\]]*)\]")
_PORT = re.compile(rb":[0-9]*\Z")


def _site_bytes(payload: bytes) -> bytes | None:
    m = _PLAIN.match(payload)
    if m is not None:
        return m.group(1).lower()
    m = _NETLOC.match(payload)
    if m is None:
        return None
    netloc = m.group(1).rpartition(b"@")[2]
    v6 = _V6.match(netloc)
    if v6 is not None:
        return v6.group(1).lower()
    return _PORT.sub(b"", netloc, count=1).lower()


def payload_site(payload: str | bytes) -> str | None:
    """The site a compact payload's URL names (lower case, no user, no port), None when the
    payload names none."""
    if isinstance(payload, str):
        m = _PLAIN_TEXT.match(payload)
        if m is not None:
            return m.group(1).lower()
        raw = payload.encode("utf-8", "surrogateescape")
    else:
        raw = payload
    site = _site_bytes(raw)
    return None if site is None else site.decode("utf-8", "surrogateescape")


def split_value(value: bytes) -> tuple[Any, bytes]:
    """The site and payload of a request's value. A value of neither form (a hostile entry
    written by hand) is handed over whole, with no site, to be refused."""
    if value[:1] == b"{":
        site = _site_bytes(value)
        return ("" if site is None else raw_text(site)), value
    site, cut, payload = value.partition(b"\n")
    if cut and payload[:1] == b"{":
        return raw_text(site), payload
    return "", value


def record_site(record: str) -> str:
    """The site of a dead letter given none: the record's ``site``, else its URL's (as the
    library's ``record_site`` finds it when the letter is re-queued)."""
    try:
        decoded = json.loads(record)
        site, url = decoded.get("site"), decoded.get("url")
    except (ValueError, AttributeError):
        return ""
    if isinstance(site, str) and site:
        return site
    return (payload_site('{"u":"' + url) or "") if isinstance(url, str) else ""
