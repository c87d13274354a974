"""The crawl's record of its crawl-wide settings (distcrawl.frontier.crawlconf), on a real
Redis: the first writer's values stay, later ones are compared."""

from __future__ import annotations

import asyncio

import redis
import redis.asyncio as aioredis

from distcrawl.frontier import crawlconf
from distcrawl.frontier.keys import FrontierKeys

KEYS = FrontierKeys("catalog", "catalog:start_urls", shards=16)


def _record(url: str, values: dict[str, str], by: str) -> dict[str, str]:
    async def run() -> dict[str, str]:
        client = aioredis.Redis.from_url(url)
        try:
            return await crawlconf.record(client, KEYS, values, by=by, at_ms=1)
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_the_first_node_records_and_a_later_one_reads_its_values(redis_url: str) -> None:
    first = {"DISTCRAWL_SHARDS": "16", "DISTCRAWL_DUPEFILTER": "exact"}
    assert _record(redis_url, first, "a") == {**first, "_by": "a", "_started": "1"}
    later = _record(redis_url, {"DISTCRAWL_SHARDS": "4", "DISTCRAWL_DUPEFILTER": "exact"}, "b")
    assert later == {**first, "_by": "a", "_started": "1"}  # nothing of b's replaced a's
    assert crawlconf.started_ms(later[crawlconf.STARTED]) == 1
    assert crawlconf.differences(later, {"DISTCRAWL_SHARDS": "4"}) == [
        crawlconf.Mismatch("DISTCRAWL_SHARDS", "4", "16")
    ]
    client = redis.Redis.from_url(redis_url)
    try:
        assert crawlconf.read(client, KEYS) == later
        assert client.type(KEYS.config) == b"hash"
        assert KEYS.config == "{catalog}:config"  # the control slot
    finally:
        client.close()


def test_a_setting_the_record_lacks_is_added_not_compared(redis_url: str) -> None:
    _record(redis_url, {"DISTCRAWL_SHARDS": "16"}, "a")
    now = _record(redis_url, {"DISTCRAWL_SHARDS": "16", "PAGE_PRIORITIES": "{}"}, "b")
    assert now["PAGE_PRIORITIES"] == "{}" and now["_by"] == "a"
    assert not crawlconf.differences(now, {"DISTCRAWL_SHARDS": "16", "PAGE_PRIORITIES": "{}"})


def test_no_record_no_difference(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        assert crawlconf.read(client, KEYS) == {}
        assert not crawlconf.differences({}, crawlconf.layout(KEYS))
    finally:
        client.close()


def test_the_refusal_names_the_setting_both_values_and_the_ways_out() -> None:
    recorded = {"DISTCRAWL_SHARDS": "16", "_by": "node-a"}
    (mismatch,) = crawlconf.differences(recorded, {"DISTCRAWL_SHARDS": "4"})
    line = crawlconf.refusal(mismatch, KEYS, recorded)
    assert line == (
        "DISTCRAWL_SHARDS is 4 here, but crawl catalog runs with 16 (recorded by node node-a "
        "in {catalog}:config): set DISTCRAWL_SHARDS=16 here, or stop every node and "
        "`distcrawl control catalog reset --yes-really` to start the crawl over"
    )
    (bloom,) = crawlconf.differences(
        {"DISTCRAWL_BLOOM_CAPACITY": crawlconf.NOT_IN_EFFECT}, {"DISTCRAWL_BLOOM_CAPACITY": "5"}
    )
    assert crawlconf.refusal(bloom, KEYS, {}).startswith(
        "DISTCRAWL_BLOOM_CAPACITY is 5 here, but it is not in effect in crawl catalog "
        "(recorded in {catalog}:config): leave DISTCRAWL_BLOOM_CAPACITY out here, or stop"
    )


def test_the_layout_is_what_an_operator_command_must_share() -> None:
    keys = FrontierKeys("shop", "{shop}:start_urls", shards=4)
    assert crawlconf.layout(keys) == {
        "DISTCRAWL_SHARDS": "4",
        "DISTCRAWL_START_URLS_KEY": "{shop}:start_urls",
    }
