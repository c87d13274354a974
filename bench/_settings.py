"""Where the benches run from and the Scrapy settings of each crawl variant (plain Scrapy,
scrapy-redis, distcrawl): the same concurrency and middlewares for all of them."""

from __future__ import annotations

from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
#: the seed list every Redis-based variant reads (scrapy-redis and distcrawl alike)
START_URLS_KEY = "catalog:start_urls"
#: hosts the nodes may crawl although they are private (the shop is on loopback)
ALLOW_PRIVATE = "127.0.0.1,localhost"
#: Scrapy settings every variant runs with (on top of distcrawl.settings): same concurrency,
#: same CONCURRENT_ITEMS, same middlewares, robots.txt obeyed, item pipeline off
COMMON_SETTINGS: dict[str, str] = {
    "CONCURRENT_REQUESTS": "16",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
    "CONCURRENT_ITEMS": "16",
    "ROBOTSTXT_OBEY": "True",
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": "False",
    "DISTCRAWL_EMBEDDED": "False",
    "ITEM_PIPELINES": "{}",
    # the operator's periodic cluster-progress log line reads Redis: off, so that only the
    # frontier talks to Redis and plain Scrapy runs exactly what the others run
    "DISTCRAWL_PROGRESS_INTERVAL": "0",
    # Scrapy re-reads and re-parses the callback's source (inspect.getsource + ast) to warn
    # about generators that return values; its cache is keyed by weak references to bound
    # methods, which die with their request, so it misses on 5-20 % of the node's CPU and
    # erratically (it depends on how long requests live, which differs by design). Off for
    # every variant, so the figures compare frontiers, not this cache's luck.
    "WARN_ON_GENERATOR_RETURN_VALUE": "False",
    # the cluster-wide pages-per-site budget (a safety guard kept in Redis, one INCRBY per 16
    # pages) is not the frontier, and plain Scrapy has no Redis to keep it in: without one it
    # tries to connect for every page. Off for every variant.
    "DISTCRAWL_MAX_PAGES_PER_SITE": "0",
}
#: scrapy-redis 0.9.1 as its README sets it up: its scheduler, dupefilter, priority queue and
#: default (pickle) serializer; SCHEDULER_PERSIST so a closing node keeps the shared queue
SCRAPY_REDIS_SETTINGS: dict[str, str] = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
    "SCHEDULER_PERSIST": "True",
}
#: plain Scrapy: its in-memory scheduler and dupefilter
PLAIN_SETTINGS: dict[str, str] = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
}


def plain_settings() -> dict[str, str]:
    """PLAIN_SETTINGS, robots.txt not shared through Redis (plain Scrapy has no Redis; it
    would try 127.0.0.1:6379)."""
    return {**PLAIN_SETTINGS, "DISTCRAWL_ROBOTS_SHARED": "False"}


#: scrapy-redis keys of the bench_scrapy_redis spider
SCRAPY_REDIS_QUEUE = "bench_scrapy_redis:requests"
SCRAPY_REDIS_DUPEFILTER = "bench_scrapy_redis:dupefilter"


def spider_modules_setting() -> dict[str, str]:
    """Settings that let a node find the bench spiders next to the catalog spider."""
    return {"SPIDER_MODULES": "distcrawl.node.spiders,_spiders"}
