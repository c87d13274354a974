"""scrapy-redis' example project on the frontier: the same items as with scrapy-redis' own
scheduler, switched by the one ``ADDONS`` line; and exactly once with a node killed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from crawl_nodes import Node, stop_all, stored_urls, wait_for
from frontier_state import leased

from distcrawl.frontier.keys import FrontierKeys, SeedKeys

pytestmark = pytest.mark.slow

#: the spiders of scrapy-redis' example project: name -> (seed list or None, -a args)
SHAPES = {
    "example_crawl": (None, {}),
    "myspider_redis": ("myspider:start_urls", {"domain": "127.0.0.1"}),
    "mycrawler_redis": ("mycrawler:start_urls", {"domain": "127.0.0.1"}),
}
#: a RedisSpider never sees links: these are its seeds (paths of the shop)
SPIDER_SEEDS = ["/", "/c/toys/", "/c/books/"]


def _node(
    spider: str,
    *,
    frontier: bool,
    redis_url: str,
    mongo_uri: str,
    tmp_path: Path,
    name: str,
    start_url: str,
    store: str = "redis",
    settings: dict[str, str] | None = None,
) -> Node:
    _, args = SHAPES[spider]
    if spider == "example_crawl":
        args = {"start_url": start_url}
    env = {"EXAMPLE_STORE": store}
    if frontier:
        env["EXAMPLE_FRONTIER"] = "1"
    return Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id=name,
        spider=spider,
        spider_args=args,
        settings_module="redis_example_settings",
        # scrapy-redis closes a spider idle for this long (its own setting)
        settings={"MAX_IDLE_TIME_BEFORE_CLOSE": "3", **(settings or {})},
        env=env,
    )


#: how seeds are kept (scrapy-redis' REDIS_START_URLS_AS_SET / _AS_ZSET) -> node settings
SEED_KINDS = {
    "list": {},
    "set": {"REDIS_START_URLS_AS_SET": "True"},
    "zset": {"REDIS_START_URLS_AS_ZSET": "True"},
}


def _seed(r: redis.Redis, spider: str, base: str, kind: str = "list") -> None:
    key, _ = SHAPES[spider]
    if key is None:
        return
    seeds = [base + "/"]
    if spider == "myspider_redis":
        # plain URLs and scrapy-redis' JSON seed format
        seeds += [json.dumps({"url": base + p, "meta": {"from": "seed"}}) for p in SPIDER_SEEDS[1:]]
    if kind == "set":
        r.sadd(key, *seeds)
    elif kind == "zset":
        r.zadd(key, {seed: i for i, seed in enumerate(seeds)})
    else:
        r.lpush(key, *seeds)


def _assert_clean_log(text: str) -> None:
    """No traceback, and no deprecation warning but those scrapy-redis' own code causes."""
    assert "Traceback" not in text, text[text.index("Traceback") :][:2000]
    ours = [x for x in text.splitlines() if "Deprecat" in x and "RedisPipeline" not in x]
    assert not ours, ours[:3]


def _items(r: redis.Redis, spider: str) -> list[tuple[str, str]]:
    return [
        (d["url"], d["name"]) for d in (json.loads(x) for x in r.lrange(f"{spider}:items", 0, -1))
    ]


@pytest.mark.parametrize(
    ("spider", "kind"),
    [
        ("example_crawl", "list"),
        ("myspider_redis", "list"),
        ("myspider_redis", "set"),
        ("myspider_redis", "zset"),
        ("mycrawler_redis", "list"),
    ],
)
def test_frontier_stores_what_scrapy_redis_stores(
    spider: str, kind: str, redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=40, tracking_params=False)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    results = {}
    for frontier in (False, True):
        r.flushall()
        _seed(r, spider, base, kind)
        node = _node(
            spider,
            frontier=frontier,
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            tmp_path=tmp_path,
            name=f"{spider}-{kind}-{'frontier' if frontier else 'scrapy-redis'}",
            start_url=base + "/",
            settings=SEED_KINDS[kind],
        )
        try:
            assert node.wait() == 0, node.log()[-3000:]
        finally:
            node.kill()
        log = node.log()
        items = _items(r, spider)
        assert items, log[-3000:]
        results[frontier] = items
        if frontier:
            assert "Frontier node" in log
            _assert_clean_log(log)
            assert "Cannot queue" not in log
            assert len(items) == len(set(items))  # each page's item once
            # scrapy-redis' own spider code took no seed: every one went through the frontier
            if SHAPES[spider][0]:
                assert f"seeds from {SHAPES[spider][0]}" in log
                # every seed taken, none left half-way (staged or in a node's taken list)
                seeds = SeedKeys.of(SHAPES[spider][0])
                assert not r.exists(SHAPES[spider][0], seeds.staged, seeds.returned)
                assert not r.keys(seeds.taken("*"))
                n_seeds = len(SPIDER_SEEDS) if spider == "myspider_redis" else 1
                assert f"'frontier/seeds/accepted': {n_seeds}," in log
                assert "start req url" not in log  # what RedisMixin logs for a seed it pops
            for stat in ("scheduler/enqueued", "scheduler/dequeued", "frontier/acked"):
                assert f"'{stat}'" in log, stat
    assert set(results[True]) == set(results[False])
    if spider == "myspider_redis":
        assert {u for u, _ in results[True]} == {base + p for p in SPIDER_SEEDS}
    else:
        assert shop.expected_product_urls() <= {u for u, _ in results[True]}


def test_a_crawl_spider_seeded_through_catalog_start_urls_stores_what_scrapy_redis_stores(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    # The seed is a start URL, dont_filter as on Scrapy: it does not mark its URL seen, so the
    # rule that finds the home page again hands it to its callback, and its item is stored
    shop = shop_factory(products=30, tracking_params=False)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    _seed(r, "mycrawler_redis", base)
    node = _node(
        "mycrawler_redis",
        frontier=False,
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        tmp_path=tmp_path,
        name="scrapy-redis",
        start_url="",
    )
    try:
        assert node.wait() == 0, node.log()[-3000:]
    finally:
        node.kill()
    on_scrapy_redis = set(_items(r, "mycrawler_redis"))
    r.flushall()
    r.lpush("catalog:start_urls", base + "/")
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="distcrawl-project",
        spider="seeded_crawler",
        spider_args={"domain": "127.0.0.1"},
        settings={
            "SPIDER_MODULES": "distcrawl.node.spiders,probe_spiders.redis_examples",
            "DISTCRAWL_START_URLS_KEY": "catalog:start_urls",
            "ITEM_PIPELINES": json.dumps({"scrapy_redis.pipelines.RedisPipeline": 400}),
        },
    )
    try:
        assert node.wait() == 0, node.log()[-3000:]
    finally:
        node.kill()
    log = node.log()
    assert "seeds from catalog:start_urls" in log
    items = _items(r, "seeded_crawler")
    assert len(items) == len(set(items))
    assert base + "/" in {u for u, _ in on_scrapy_redis}
    assert set(items) == on_scrapy_redis


def test_redis_crawl_spider_on_two_nodes_with_one_killed(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    # slow pages, few at a time: the kill lands while the victim holds leases
    shop = shop_factory(products=120, tracking_params=False, latency_ms=400)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    _seed(r, "mycrawler_redis", base)
    settings = {"CONCURRENT_REQUESTS": "3", "DISTCRAWL_HEARTBEAT_TIMEOUT": "3"}

    def mk(name: str) -> Node:
        return _node(
            "mycrawler_redis",
            frontier=True,
            redis_url=redis_url,
            mongo_uri=mongo_uri,
            tmp_path=tmp_path,
            name=name,
            start_url="",
            store="mongo",
            settings=settings,
        )

    victim, survivor = mk("victim"), mk("survivor")
    nodes = [victim, survivor]
    try:
        keys = FrontierKeys("mycrawler_redis", "mycrawler_redis:start_urls")
        assert wait_for(
            lambda: leased(r, "victim", keys) > 0 and len(shop.request_log()) > 20, 120
        ), victim.log()[-2000:]
        victim.kill()  # SIGKILL
        assert survivor.wait() == 0, survivor.log()[-3000:]
    finally:
        stop_all(nodes)
    urls = stored_urls(mongo_uri)
    assert len(urls) == len(set(urls))
    fetched = {
        base + e["path"]
        for e in shop.request_log()
        if e["status"] == 200 and e["path"] != "/robots.txt"
    }
    # every page fetched has its item, exactly once, and every product is there
    assert set(urls) == fetched
    assert shop.expected_product_urls() <= set(urls)
    assert "Recovered" in survivor.log()
    _assert_clean_log(survivor.log())


def test_a_request_json_cannot_carry_is_crawled_from_memory_and_counted(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=20, tracking_params=False)
    base = shop.url.rstrip("/")
    r = redis.Redis.from_url(redis_url)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="badmeta",
        spider="example_badmeta",
        spider_args={"start_url": base + "/"},
        settings_module="redis_example_settings",
        env={"EXAMPLE_FRONTIER": "1"},
    )
    try:
        assert node.wait() == 0, node.log()[-3000:]
    finally:
        node.kill()
    log = node.log()
    # as Scrapy keeps a request its disk queue cannot serialise: in memory, counted, logged once
    warnings = [x for x in log.splitlines() if "Unable to serialize request" in x]
    assert len(warnings) == 1, warnings
    assert f"{base}/c/toys/" in warnings[0] and "meta key 'when' holds a datetime" in warnings[0]
    assert "'scheduler/unserializable': 1" in log
    assert "'scheduler/enqueued/memory': 1" in log
    assert not r.exists("{example_badmeta}:rejected")
    urls = {u for u, _ in _items(r, "example_badmeta")}
    assert f"{base}/c/toys/" in urls and f"{base}/c/books/" in urls
