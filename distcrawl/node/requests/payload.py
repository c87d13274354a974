"""The payload of a queued request: its field names, its limits, what never travels in it
(unsafe meta keys, credential headers), and :class:`BadEntry`, raised for one refused."""

from __future__ import annotations

from distcrawl.base.urls import printable

__all__ = [
    "ALLOWED_METHODS",
    "CREDENTIAL_HEADERS",
    "DEFAULT_CALLBACK",
    "DEFAULT_MAX_PAYLOAD",
    "FIELDS",
    "MAX_DEPTH",
    "MAX_PRIORITY",
    "META_SHORT_NAMES",
    "SHORT_NAMES",
    "UNSAFE_META_KEYS",
    "BadEntry",
    "expect",
]

#: a payload larger than this is refused without parsing it
DEFAULT_MAX_PAYLOAD = 256 * 1024
#: priorities outside +/- this bound are refused (they would break the scores of the queue's
#: levels and of parked requests)
MAX_PRIORITY = 100_000
#: HTTP methods a queued request may use
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

#: meta keys that re-route the connection (a proxy, a local address), write local files, or
#: switch a safety limit off; a node sets them from its own settings, never from Redis
UNSAFE_META_KEYS = frozenset(
    {
        "proxy",
        "_auth_proxy",
        "_scheme_proxy",
        "bindaddress",
        "download_maxsize",
        "download_warnsize",
        "dont_obey_robotstxt",
        "ftp_user",
        "ftp_password",
        "ftp_local_filename",
    }
)
#: headers that carry a node's credentials (HttpAuthMiddleware, HttpProxyMiddleware set them
#: from the node's own settings on every node): never written to Redis or the dead letters
CREDENTIAL_HEADERS = frozenset({b"authorization", b"proxy-authorization"})
#: a crawl depth above this in a queue entry is not one a node wrote
MAX_DEPTH = 1_000_000


class BadEntry(ValueError):
    """A queue entry that cannot become a request; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, detail: str = "") -> None:
        # the detail quotes hostile input: escaped, it cannot forge a line of the node's log
        super().__init__(f"{reason}: {printable(detail, 120)}" if detail else reason)
        self.reason = reason
        self.detail = detail


def expect(cond: bool, reason: str, detail: str = "") -> None:
    if not cond:
        raise BadEntry(reason, detail)


#: the payload's field names (short: a queued request's bytes are the frontier's memory)
SHORT_NAMES = {
    "url": "u",
    "class": "cl",
    "method": "m",
    "headers": "h",
    "body": "b",
    "cookies": "c",
    "meta": "mt",
    "priority": "p",
    "dont_filter": "f",
    "callback": "cb",
    "errback": "eb",
    "cb_kwargs": "kw",
    "flags": "fl",
    "encoding": "e",
    "items": "it",
}
#: meta keys every catalog request carries, written short ("~" marks them; a key of the
#: spider's own that starts with "~" is written with one more)
META_SHORT_NAMES = {
    "page_kind": "~k",
    "depth": "~d",
    "site": "~s",
    "seed_meta": "~m",
    "retry_times": "~r",
    "download_slot": "~l",
    "distcrawl_revisit": "~v",  # revisit mode: validators, content hash, backoff of a page
}


#: the callback a request without one gets (Scrapy's default, ``Spider.parse``)
DEFAULT_CALLBACK = "parse"
FIELDS = frozenset({*SHORT_NAMES.values(), "r"})  # r: a same-site Referer without its origin
