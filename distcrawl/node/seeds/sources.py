"""Seeds the scrapy-redis way: a spider's own ``redis_key``, sets and sorted sets, JSON seeds.

The frontier takes seeds from a Redis list into a node's taken list in one script call (in
the list's own slot), so a node that dies holding seeds gives them back (``take_seeds`` in
``frontier/lua``). A scrapy-redis project may keep its seeds in a set
(``REDIS_START_URLS_AS_SET``) or a sorted set (``REDIS_START_URLS_AS_ZSET``, highest score
first): :class:`SeedSource` moves a batch from there into the list ``staged`` beside it (the
same slot, so on a Redis Cluster too) atomically, and the frontier takes seeds from that list.

A spider without ``make_request_from_seed`` gets its requests from a seed the way
scrapy-redis builds them: a plain URL, or JSON ``{"url", "method", "meta", <form fields>}``,
through the spider's own ``make_request_from_data`` (a ``RedisSpider``'s, overrides included)
or an equivalent ``FormRequest``. Either way the seed is checked first (size, JSON shape,
method, meta keys a seed may not set) and every request's URL after.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import FormRequest, Request
from scrapy_redis.spiders import RedisMixin

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import UrlRefused, check_url
from distcrawl.frontier.keys import SeedKeys
from distcrawl.node.requests.payload import ALLOWED_METHODS
from distcrawl.node.requests.values import json_safe
from distcrawl.node.seeds.parse import (
    DEFAULT_MAX_SEED_BYTES,
    RESERVED_META_KEYS,
    BadSeed,
    json_seed_object,
)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.settings import BaseSettings

__all__ = ["SeedSource", "seed_requests"]

_STAGE_LUA = """
-- KEYS[1] the seed set or sorted set, KEYS[2] the staging list; ARGV[1] n, ARGV[2] kind
local n = tonumber(ARGV[1])
local taken
if ARGV[2] == 'set' then
  taken = redis.call('SPOP', KEYS[1], n)
else
  taken = redis.call('ZRANGE', KEYS[1], -n, -1)
  redis.call('ZREMRANGEBYRANK', KEYS[1], -n, -1)
end
-- the frontier takes from the right: the first to take goes in first (highest score)
for i = #taken, 1, -1 do redis.call('LPUSH', KEYS[2], taken[i]) end
return #taken
"""


@dataclass(frozen=True)
class SeedSource:
    """Where a spider's seeds come from: ``key`` of ``kind`` list, set or zset; ``list_key``
    is the list the frontier takes them from (``key`` itself for a list)."""

    key: str
    kind: str = "list"
    list_key: str = ""

    @classmethod
    def for_spider(cls, spider: Spider, settings: BaseSettings, default_key: str) -> SeedSource:
        """The seed source of a running spider (scrapy-redis resolved its ``redis_key``)."""
        return cls.named(
            spider.name, type(spider), settings, default_key, redis_key=spider_redis_key(spider)
        )

    @classmethod
    def named(
        cls,
        name: str,
        spidercls: type | None,
        settings: BaseSettings,
        default_key: str,
        *,
        redis_key: str | None = None,
    ) -> SeedSource:
        """``DISTCRAWL_START_URLS_KEY``, else a scrapy-redis spider's ``redis_key`` (which
        scrapy-redis sets from ``REDIS_START_URLS_KEY`` if the spider names none), else
        ``REDIS_START_URLS_KEY``, else any other spider's ``redis_key``, else ``default_key``
        (``%(name)s`` is the spider's name); a set or zset with ``REDIS_START_URLS_AS_SET`` /
        ``REDIS_START_URLS_AS_ZSET``, staged through the list ``staged`` in its slot."""
        if redis_key is None and spidercls is not None:
            redis_key = getattr(spidercls, "redis_key", None)
        key = SETTINGS.value(settings, "DISTCRAWL_START_URLS_KEY")
        if not key and spidercls is not None and issubclass(spidercls, RedisMixin):
            key = redis_key
        if not key and not settings.get("REDIS_START_URLS_KEY"):
            key = redis_key
        key = str(key).replace("%(name)s", name) if key else default_key
        if settings.getbool("REDIS_START_URLS_AS_SET"):
            kind = "set"
        elif settings.getbool("REDIS_START_URLS_AS_ZSET"):
            kind = "zset"
        else:
            return cls(key=key, kind="list", list_key=key)
        return cls(key=key, kind=kind, list_key=SeedKeys.of(key).staged)

    def stage(self, client: Any, n: int) -> Any:
        """Move up to ``n`` seeds from a set or zset into :attr:`list_key` (client's result)."""
        script = client.register_script(_STAGE_LUA)
        return script(keys=[self.key, self.list_key], args=[n, self.kind])


def spider_redis_key(spider: Any) -> str | None:
    key = getattr(spider, "redis_key", None)
    return str(key) if key else None


def _text(raw: bytes | str, max_bytes: int) -> str:
    if len(raw) > max_bytes:
        raise BadSeed("seed_too_large", f"{len(raw)} bytes > {max_bytes}")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise BadSeed("not_utf8", repr(raw[:40])) from None
    text = text.strip()
    if not text:
        raise BadSeed("empty_seed")
    return text


def _check_json_seed(text: str) -> None:
    """scrapy-redis' seed: url, optional method and meta, every other key a form field."""
    data = json_seed_object(text)
    method = data.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in ALLOWED_METHODS:
        raise BadSeed("bad_method", repr(method)[:20])
    meta = data.get("meta", {})
    if not isinstance(meta, dict) or not json_safe(meta):
        raise BadSeed("bad_meta", text[:60])
    reserved = RESERVED_META_KEYS.intersection(meta)
    if reserved:
        raise BadSeed("reserved_meta", ",".join(sorted(reserved)))
    for key, value in data.items():
        if key in ("url", "method", "meta"):
            continue
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in values):
            raise BadSeed("bad_form_field", str(key)[:40])


def _form_request(text: str) -> Request:
    """What scrapy-redis' ``RedisMixin.make_request_from_data`` makes of a seed."""
    if not text.startswith("{"):
        return FormRequest(text, dont_filter=True)
    data = json.loads(text)
    url = data.pop("url")
    method = data.pop("method", "GET").upper()
    meta = data.pop("meta", {})
    return FormRequest(url, dont_filter=True, method=method, formdata=data, meta=meta)


def seed_requests(
    spider: Spider,
    raw: bytes | str,
    *,
    allow_private: bool | frozenset[str] = False,
    max_bytes: int = DEFAULT_MAX_SEED_BYTES,
) -> list[Request]:
    """The requests ``spider`` makes of one scrapy-redis seed, or :class:`BadSeed`."""
    text = _text(raw, max_bytes)
    if text.startswith("{"):
        _check_json_seed(text)
    elif text[0] in '["' or text in ("null", "true", "false"):
        raise BadSeed("not_an_object", text[:60])
    make = getattr(spider, "make_request_from_data", None)
    try:
        made = make(text.encode("utf-8")) if make is not None else _form_request(text)
    except Exception as exc:
        raise BadSeed("spider_refused", f"{type(exc).__name__}: {exc}"[:100]) from None
    if made is None:
        made = []
    requests = [made] if isinstance(made, Request) else list(_requests(made))
    if not requests:
        raise BadSeed("spider_refused", text[:60])
    for request in requests:
        try:
            check_url(request.url, allow_private=allow_private)
        except UrlRefused as exc:
            raise BadSeed(exc.reason, request.url[:200]) from None
    return requests


def _requests(made: Any) -> Iterable[Request]:
    if not isinstance(made, Iterable):
        raise BadSeed("spider_refused", repr(made)[:60])
    for item in made:
        if not isinstance(item, Request):
            raise BadSeed("spider_refused", f"made a {type(item).__name__}, not a request")
        yield item
