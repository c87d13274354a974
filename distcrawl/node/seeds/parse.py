"""Seeds: what may be pushed to ``<spider>:start_urls``, and how it is checked.

A seed is a plain URL (``redis-cli lpush catalog:start_urls https://shop.example.com/``) or a
JSON object ``{"url": ..., "priority": ..., "meta": {...}}``. Anything else is refused with a
short reason; the same check serves seeds from Redis and from ``scrapy seed``. A seed's meta is
the operator's own data: keys that steer Scrapy (:data:`RESERVED_META_KEYS`: a proxy, a size
limit, a depth, retry and redirect counters) are refused, so a seed cannot switch a limit off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from scrapy import Request

from distcrawl.base.names import reasons
from distcrawl.base.urls import UrlRefused, check_url, printable
from distcrawl.node.requests.payload import MAX_PRIORITY, UNSAFE_META_KEYS
from distcrawl.node.requests.values import json_safe

__all__ = [
    "DEFAULT_MAX_SEED_BYTES",
    "RESERVED_META_KEYS",
    "BadSeed",
    "Seed",
    "json_seed_object",
    "parse_seed",
    "refusal_hint",
]

#: a raw seed larger than this is refused before it is parsed
DEFAULT_MAX_SEED_BYTES = 16 * 1024
#: meta keys a seed may not set: they steer the crawl's limits, not the operator's data
RESERVED_META_KEYS = UNSAFE_META_KEYS | frozenset(
    {
        "depth",
        "distcrawl_delay",
        "download_timeout",
        "max_retry_times",
        "redirect_reasons",
        "redirect_times",
        "redirect_ttl",
        "redirect_urls",
        "retry_times",
    }
)
_SEED_KEYS = frozenset({"url", "priority", "meta"})


class BadSeed(ValueError):
    """A seed that cannot be crawled; ``reason`` is short and stable for stats."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {printable(detail)}" if detail else reason)
        self.reason = reason


def refusal_hint(reason: str) -> str:
    """What to do about a refused seed, where there is something to do ("" otherwise)."""
    if reason == reasons.PRIVATE_ADDRESS:
        return " (a private or loopback host: list it in DISTCRAWL_ALLOW_PRIVATE to crawl it)"
    return ""


@dataclass(frozen=True)
class Seed:
    url: str
    priority: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def parse_seed(
    raw: bytes | str,
    *,
    max_bytes: int = DEFAULT_MAX_SEED_BYTES,
    allow_private: bool | frozenset[str] = False,
) -> Seed:
    """Parse one raw seed, or raise :class:`BadSeed` saying why it was refused."""
    if len(raw) > max_bytes:
        raise BadSeed(reasons.SEED_TOO_LARGE, f"{len(raw)} bytes > {max_bytes}")
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadSeed(reasons.NOT_UTF8, repr(raw[:40])) from None
    else:
        text = raw
    text = text.strip()
    if not text:
        raise BadSeed(reasons.EMPTY_SEED)
    if text.startswith("{"):
        seed = _parse_json_seed(text)
    elif text[0] in '["' or text in ("null", "true", "false"):
        raise BadSeed(reasons.NOT_AN_OBJECT, text[:60])
    else:
        seed = Seed(url=text)
    try:
        check_url(seed.url, allow_private=allow_private)
        # what is fetched is the URL as Scrapy normalises it (IDNA, percent-encoding)
        fetched = Request(seed.url).url
        if fetched != seed.url:
            check_url(fetched, allow_private=allow_private)
    except UrlRefused as exc:
        raise BadSeed(exc.reason, seed.url[:200]) from None
    except (ValueError, UnicodeError) as exc:
        raise BadSeed(reasons.MALFORMED_URL, f"{seed.url[:200]}: {exc}") from None
    return seed


def json_seed_object(text: str) -> dict[str, Any]:
    """The JSON object of a JSON seed, with a string ``url``; :class:`BadSeed` otherwise."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise BadSeed(reasons.BAD_JSON, text[:60]) from None
    if not isinstance(data, dict):
        raise BadSeed(reasons.NOT_AN_OBJECT, text[:60])
    if not isinstance(data.get("url"), str):
        raise BadSeed(reasons.MISSING_URL, text[:60])
    return data


def _parse_json_seed(text: str) -> Seed:
    data = json_seed_object(text)
    unknown = set(data) - _SEED_KEYS
    if unknown:
        raise BadSeed(reasons.UNKNOWN_KEYS, ",".join(sorted(map(str, unknown)))[:80])
    url: str = data["url"]
    priority = data.get("priority")
    if priority is not None and (
        not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > MAX_PRIORITY
    ):
        raise BadSeed(reasons.BAD_PRIORITY, repr(priority)[:20])
    meta = data.get("meta", {})
    if not isinstance(meta, dict) or not json_safe(meta):
        raise BadSeed(reasons.BAD_META, text[:60])
    reserved = RESERVED_META_KEYS.intersection(meta)
    if reserved:
        raise BadSeed(reasons.RESERVED_META, ",".join(sorted(reserved)))
    return Seed(url=url.strip(), priority=priority, meta=meta)
