"""Settings of scrapy-redis' example project (example-project/example/settings.py), for the
spiders in ``probe_spiders.redis_examples``. ``EXAMPLE_FRONTIER=1`` adds the one documented
line that moves the project to the frontier; ``EXAMPLE_STORE=mongo`` stores items in MongoDB
(upserts on the URL) instead of scrapy-redis' RedisPipeline list ``<spider>:items``."""

from __future__ import annotations

import os

SPIDER_MODULES = ["probe_spiders.redis_examples"]
NEWSPIDER_MODULE = "probe_spiders.redis_examples"

USER_AGENT = "scrapy-redis (+https://github.com/rolando/scrapy-redis)"

DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"
SCHEDULER = "scrapy_redis.scheduler.Scheduler"
SCHEDULER_PERSIST = True
SCHEDULER_QUEUE_CLASS = "scrapy_redis.queue.SpiderPriorityQueue"

ITEM_PIPELINES = {"scrapy_redis.pipelines.RedisPipeline": 400}

REDIS_URL = os.environ.get("REDIS_URL", "")
MONGO_URI = os.environ.get("MONGO_URI", "")
DISTCRAWL_ALLOW_PRIVATE = os.environ.get("DISTCRAWL_ALLOW_PRIVATE", "")
DISTCRAWL_NODE_ID = os.environ.get("DISTCRAWL_NODE_ID", "")
TELNETCONSOLE_ENABLED = False
EXTENSIONS = {"scrapy.extensions.remote_control.RemoteControl": None}
LOG_LEVEL = "INFO"

if os.environ.get("EXAMPLE_STORE") == "mongo":
    ITEM_PIPELINES = {"distcrawl.node.pipeline.MongoPipeline": 300}

if os.environ.get("EXAMPLE_FRONTIER") == "1":
    ADDONS = {"distcrawl.Frontier": 0}
