"""A node's crawl-wide settings as the crawl records them (distcrawl.node.scheduler.crawlwide),
and the check at start on a real Redis: the first node records, a differing one is refused."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis
from scrapy.settings import Settings

from distcrawl.base.config import SETTINGS
from distcrawl.base.config.kinds import show_duration
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.store import Dupefilter
from distcrawl.node.revisit.schedule import RevisitPolicy
from distcrawl.node.scheduler.crawlwide import (
    CrawlSettingsDiffer,
    check_crawl_settings,
    crawl_wide_values,
)

KEYS = FrontierKeys("catalog", "catalog:start_urls", shards=16)


def values(keys: FrontierKeys = KEYS, **given: str) -> dict[str, str]:
    settings = Settings(given)
    dupefilter = Dupefilter(
        kind=SETTINGS.value(settings, "DISTCRAWL_DUPEFILTER"),
        capacity=SETTINGS.value(settings, "DISTCRAWL_BLOOM_CAPACITY"),
        error_rate=SETTINGS.value(settings, "DISTCRAWL_BLOOM_ERROR_RATE"),
    )
    return crawl_wide_values(settings, keys, dupefilter, RevisitPolicy.from_settings(settings))


def test_every_crawl_wide_setting_is_recorded() -> None:
    assert set(values()) == {s.name for s in SETTINGS.crawl_wide()}
    assert set(values(DISTCRAWL_REVISIT="product:6h")) == {s.name for s in SETTINGS.crawl_wide()}


def test_the_values_in_effect_as_text() -> None:
    plain = values()
    assert plain["DISTCRAWL_SHARDS"] == "16"
    assert plain["DISTCRAWL_START_URLS_KEY"] == "catalog:start_urls"
    assert plain["DISTCRAWL_DUPEFILTER"] == "exact"
    assert plain["DISTCRAWL_BLOOM_CAPACITY"] == "-"  # not in effect with an exact dupefilter
    assert plain["DISTCRAWL_REVISIT"] == "-" and plain["DISTCRAWL_REVISIT_FORGET"] == "-"
    assert plain["DISTCRAWL_HEARTBEAT_TIMEOUT"] == "30"
    assert plain["PAGE_PRIORITIES"] == ('{"category":300,"listing":200,"product":100,"seed":1000}')
    bloom = values(DISTCRAWL_DUPEFILTER="bloom", DISTCRAWL_BLOOM_CAPACITY="5000")
    assert bloom["DISTCRAWL_BLOOM_CAPACITY"] == "5000"
    assert bloom["DISTCRAWL_BLOOM_ERROR_RATE"] == "0.001"
    revisit = values(DISTCRAWL_REVISIT="product:6h,listing:1h")
    assert revisit["DISTCRAWL_REVISIT"] == "listing:1h,product:6h"
    assert revisit["DISTCRAWL_REVISIT_MAX_BACKOFF"] == "1"
    # the generation the nodes' dupefilter forgets at: derived, and so the same on every node
    policy = RevisitPolicy.from_settings(Settings({"DISTCRAWL_REVISIT": "product:6h,listing:1h"}))
    assert policy is not None
    assert revisit["DISTCRAWL_REVISIT_FORGET"] == show_duration(policy.forget_ms / 1000)


def test_the_same_value_given_as_text_or_python_records_alike() -> None:
    assert values(DISTCRAWL_HEARTBEAT_TIMEOUT="30.0") == values()
    assert values(PAGE_PRIORITIES='{"product": 100}') == values()  # the default, partly given
    assert values(DISTCRAWL_REVISIT="product:360m") == values(DISTCRAWL_REVISIT="product:6h")


def _check(url: str, mine: dict[str, str], node_id: str) -> None:
    async def run() -> None:
        client = aioredis.Redis.from_url(url)
        try:
            await check_crawl_settings(client, KEYS, mine, node_id=node_id)
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_node_with_other_shards_is_refused_naming_both_values(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _check(redis_url, values(), "first")
    _check(redis_url, values(), "second")  # the same settings: it starts
    other = values(FrontierKeys("catalog", "catalog:start_urls", shards=4))
    with caplog.at_level(logging.ERROR), pytest.raises(CrawlSettingsDiffer, match="SHARDS"):
        _check(redis_url, other, "third")
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line.startswith(
        "Node refuses to start: DISTCRAWL_SHARDS is 4 here, but crawl catalog runs with 16 "
        "(recorded by node first in {catalog}:config)"
    )


def test_a_node_in_revisit_mode_in_a_crawl_without_it_is_refused_in_one_line(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Not one line for each revisit setting it never set: the revisit mode explains them."""
    keys = FrontierKeys("revisited", "revisited:start_urls", shards=16)

    def check(mine: dict[str, str], node_id: str) -> None:
        async def run() -> None:
            client = aioredis.Redis.from_url(redis_url)
            try:
                await check_crawl_settings(client, keys, mine, node_id=node_id)
            finally:
                await client.aclose()

        asyncio.run(run())

    check(values(keys), "plain")
    revisiting = values(keys, DISTCRAWL_REVISIT="product:10s", DISTCRAWL_DUPEFILTER="bloom")
    with caplog.at_level(logging.ERROR), pytest.raises(CrawlSettingsDiffer):
        check(revisiting, "revisiting")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert [line.split(" ")[4] for line in lines] == [
        "DISTCRAWL_DUPEFILTER", "DISTCRAWL_REVISIT"
    ], lines  # fmt: skip
