"""distcrawl/settings.py holds every default, so ``scrapy settings --get NAME`` shows it, and
the values agree with the defaults the components fall back to outside the project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcrawl import settings
from distcrawl.frontier import store
from distcrawl.node import pipeline as pipelines
from distcrawl.node import scheduler
from distcrawl.node.middlewares import retry as middlewares
from distcrawl.node.middlewares import robots, safety
from distcrawl.node.revisit import freshness
from distcrawl.node.spiders import catalog
from distcrawl.storage import writer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "code_default"),
    [
        ("DISTCRAWL_DRAIN_GRACE", scheduler.DEFAULT_DRAIN_GRACE),
        ("DISTCRAWL_HEARTBEAT_INTERVAL", scheduler.DEFAULT_HEARTBEAT_INTERVAL),
        ("DISTCRAWL_PREFETCH", scheduler.DEFAULT_PREFETCH),
        ("DISTCRAWL_SEED_BATCH", scheduler.DEFAULT_SEED_BATCH),
        ("DISTCRAWL_SITE_LATENCY_TARGET", scheduler.DEFAULT_SITE_LATENCY_TARGET),
        ("DISTCRAWL_SITE_RATE", store.SiteBudget.rate),
        ("DISTCRAWL_SITE_CONCURRENCY", store.SiteBudget.concurrency),
        ("DISTCRAWL_SITE_BURST", store.SiteBudget.burst),
        ("DISTCRAWL_ADAPTIVE_RATE", store.SiteBudget.adaptive_rate),
        ("DISTCRAWL_SITE_RECOVERY", store.DEFAULT_SITE_RECOVERY),
        ("DISTCRAWL_ROBOTS_TTL", robots.DEFAULT_ROBOTS_TTL),
        ("DISTCRAWL_DNS_TTL", safety.DEFAULT_DNS_TTL),
        ("CATALOG_KNOWN_LINKS", catalog.DEFAULT_KNOWN_LINKS),
        ("RETRY_BACKOFF_BASE", middlewares.DEFAULT_BACKOFF_BASE),
        ("RETRY_BACKOFF_MAX", middlewares.DEFAULT_BACKOFF_MAX),
        ("RETRY_BACKOFF_JITTER", middlewares.DEFAULT_BACKOFF_JITTER),
        ("RETRY_AFTER_MAX", middlewares.DEFAULT_RETRY_AFTER_MAX),
        ("MONGO_COLLECTION", pipelines.DEFAULT_COLLECTION),
        ("MONGO_UNIQUE_KEY", list(pipelines.DEFAULT_UNIQUE_KEY)),
        ("MONGO_BATCH_SIZE", pipelines.DEFAULT_BATCH_SIZE),
        ("MONGO_FLUSH_INTERVAL", pipelines.DEFAULT_FLUSH_INTERVAL),
        ("MONGO_PRICE_HISTORY", pipelines.DEFAULT_PRICE_HISTORY),
        ("MONGO_TIMEOUT", pipelines.DEFAULT_TIMEOUT),
        ("MONGO_BUFFER_MAX_ITEMS", pipelines.DEFAULT_BUFFER_MAX_ITEMS),
        ("MONGO_JOURNAL_AFTER", pipelines.DEFAULT_JOURNAL_AFTER),
        ("MONGO_CLOSE_TIMEOUT", pipelines.DEFAULT_CLOSE_TIMEOUT),
        ("MONGO_RETRY_BACKOFF", pipelines.DEFAULT_RETRY_BACKOFF),
        ("MONGO_RETRY_BACKOFF_MAX", pipelines.DEFAULT_RETRY_BACKOFF_MAX),
        ("MONGO_CHANGES_COLLECTION", writer.DEFAULT_CHANGES_COLLECTION),
        ("DISTCRAWL_GONE_STATUSES", list(freshness.DEFAULT_GONE_STATUSES)),
    ],
)
def test_settings_py_holds_the_defaults_the_code_falls_back_to(name, code_default) -> None:
    assert getattr(settings, name) == code_default


def test_scrapy_settings_get_shows_the_defaults() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCRAWL_")}
    for name, shown in (("DISTCRAWL_SITE_RATE", "0.0"), ("RETRY_TIMES", "3")):
        done = subprocess.run(
            [sys.executable, "-m", "scrapy", "settings", "--get", name],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )
        assert done.stdout.strip() == shown, done.stderr


def test_the_freshness_middleware_sees_answers_before_httperror_drops_them() -> None:
    from scrapy.settings import default_settings

    httperror = default_settings.SPIDER_MIDDLEWARES_BASE[
        "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware"
    ]
    freshness = "distcrawl.node.revisit.freshness.FreshnessMiddleware"
    assert settings.SPIDER_MIDDLEWARES[freshness] < httperror
