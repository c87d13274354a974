"""The baseline spiders, loaded by node processes as a spider module (``SPIDER_MODULES`` with
``bench/`` on ``PYTHONPATH``): the catalog spider on plain Scrapy (``bench_plain``, seeded by
the ``seed`` spider argument) and on vanilla scrapy-redis (``bench_scrapy_redis``, seeded
from ``catalog:start_urls``). Both reuse ``CatalogSpider``'s seed request and ``parse``
unchanged, so every variant crawls with the same logic."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from _settings import START_URLS_KEY
from scrapy_redis.spiders import RedisSpider
from scrapy_redis.utils import bytes_to_str

from distcrawl.node.seeds.parse import Seed, parse_seed
from distcrawl.node.spiders.catalog import CatalogSpider


class PlainCatalogSpider(CatalogSpider):
    """The catalog spider on plain Scrapy: ``-a seed=URL`` is its one start request."""

    name = "bench_plain"

    def __init__(self, *args: Any, seed: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seed_url = seed

    async def start(self) -> AsyncIterator[Any]:
        yield self.make_request_from_seed(parse_seed(self.seed_url, allow_private=True))


class ScrapyRedisCatalogSpider(RedisSpider, CatalogSpider):  # type: ignore[misc]
    """The catalog spider on vanilla scrapy-redis: seeds from ``catalog:start_urls``, read
    when the spider goes idle (scrapy-redis' way); the seed request is CatalogSpider's."""

    name = "bench_scrapy_redis"
    redis_key = START_URLS_KEY

    def make_request_from_data(self, data: bytes) -> Any:
        return self.make_request_from_seed(Seed(url=bytes_to_str(data).strip()))
