"""Scrapy settings of a distcrawl node, made from the settings registry
(:mod:`distcrawl.base.config`): each registered setting's default, replaced by the
environment variable of its name where one is set; then the components a node runs."""

from __future__ import annotations

import os

from distcrawl.base import config

# every registered setting (REDIS_URL, MONGO_*, DISTCRAWL_*, ... and distcrawl's defaults for
# Scrapy's own): the registry's default, or the environment variable of the setting's name
globals().update(config.SETTINGS.project_settings(os.environ))

BOT_NAME = "distcrawl"
SPIDER_MODULES = ["distcrawl.node.spiders"]
NEWSPIDER_MODULE = "distcrawl.node.spiders"
COMMANDS_MODULE = "distcrawl.commands"

SCHEDULER = "distcrawl.node.scheduler.FrontierScheduler"
ADDONS = {
    # unknown DISTCRAWL_* names reported, every value checked, before anything is built
    "distcrawl.node.settings_check.SettingsCheck": -10,
    "distcrawl.node.embedded.EmbeddedServices": 0,
}
ITEM_PIPELINES = {"distcrawl.node.pipeline.MongoPipeline": 300}
# a revisit's 304 and a product page's 404/410 become updates of last_seen / gone_at, before
# Scrapy's HttpErrorMiddleware (50) would drop them
SPIDER_MIDDLEWARES = {
    "distcrawl.node.revisit.freshness.FreshnessMiddleware": 45,
    # no link of a site whose page budget is used up (first: a dropped link costs nothing more)
    "distcrawl.node.middlewares.links.LinkBudgetMiddleware": 950,
}
# Scrapy's RetryMiddleware, extended: retries back off and are parked in Redis (any node
# takes them when due); the last failure goes to the dead letters.
DOWNLOADER_MIDDLEWARES = {
    # no request reaches a private, loopback or metadata address, checked after DNS and
    # after redirects (before robots: no robots.txt fetch from a refused host either)
    "distcrawl.node.middlewares.safety.AddressGuardMiddleware": 60,
    # Scrapy's, fixed: requests that arrive while robots.txt is being fetched wait for it;
    # robots.txt fetched once per cluster, shared through Redis (DISTCRAWL_ROBOTS_SHARED),
    # charged to the site budget
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "distcrawl.node.middlewares.robots.RobotsTxtMiddleware": 100,
    # requests outside the queue (a middleware's own, robots.txt, those kept in memory) wait
    # for their site's hold, Crawl-delay and rate, and their server's budget
    "distcrawl.node.middlewares.politeness.OutsideRequestsMiddleware": 105,
    # pages-per-site budget shared by the cluster, redirect loops, oversized bodies
    "distcrawl.node.middlewares.safety.PageLimitsMiddleware": 110,
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "distcrawl.node.middlewares.retry.BackoffRetryMiddleware": 550,
    # every failure, each try (answers of 400 or more, failed and refused downloads), into
    # the crawl's error groups; also callbacks and pipelines that raised (their signals)
    "distcrawl.node.observe.capture.FailureCapture": 560,
}
# only http(s) is ever fetched
DOWNLOAD_HANDLERS = {"file": None, "s3": None, "ftp": None, "data": None}
# A crawler node exposes nothing: no telnet console (TELNETCONSOLE_ENABLED), no
# remote-control HTTP endpoint.
EXTENSIONS = {
    "scrapy.extensions.remote_control.RemoteControl": None,
    # one INFO line with the whole cluster's figures every DISTCRAWL_PROGRESS_INTERVAL s
    "distcrawl.ops.progress.ClusterProgress": 500,
    # gc.freeze() once the spider is open: full collections skip the start-up objects
    "distcrawl.node.heap.FreezeStartupObjects": 0,
    # the event loop's longest stall (node/loop_stall_max_ms), and a line for a long one
    "distcrawl.node.loopwatch.LoopStallWatch": 0,
    # the end of a crawl: its report (MongoDB, DISTCRAWL_REPORT_FILE) and its notice, by the
    # last node out
    "distcrawl.ops.finish.CrawlEnd": 500,
}
