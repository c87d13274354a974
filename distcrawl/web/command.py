"""``web``: the live dashboard of the cluster in a browser, and ``/metrics`` for Prometheus.

``scrapy web catalog [--host H] [--port P]`` (or ``distcrawl web catalog``). It reads Redis the
way ``status`` does, once a second, whoever looks. Actions (pause, resume, re-queue dead
letters, seed) need ``DISTCRAWL_WEB_TOKEN``; without it the page is read-only, and it then
serves loopback only. It answers only requests that name it in ``Host``: loopback names and
the names of ``DISTCRAWL_WEB_HOSTS`` (comma-separated), and IP addresses beyond loopback.

Registered for Scrapy through the ``scrapy.commands`` entry point group (pyproject.toml) and for
``distcrawl`` in :data:`distcrawl.cli.SUBCOMMANDS`: the dashboard's own command lives with the
dashboard, so the command line and the dashboard never import each other.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING

from redis.exceptions import RedisClusterException, RedisError

from distcrawl.base.config import SETTINGS
from distcrawl.base.names import commands as words
from distcrawl.base.urls import mask_url
from distcrawl.ops.context import Context
from distcrawl.ops.entry import add_spider_argument, entry_points
from distcrawl.ops.products import ProductStore
from distcrawl.ops.report import observe_store
from distcrawl.web.app import WebConfig
from distcrawl.web.sampler import DEFAULT_INTERVAL
from distcrawl.web.security import HOSTS_ENV, TOKEN_ENV, UnsafeBind
from distcrawl.web.server import DEFAULT_HOST, DEFAULT_PORT, DashboardServer

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Command", "add_arguments", "check_stored", "execute", "run", "web_config"]


def add_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_spider_argument(parser)
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; another needs {TOKEN_ENV})",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between two reads of the cluster (default {DEFAULT_INTERVAL:g})",
    )
    parser.add_argument(
        "--no-store", action="store_true", help="do not watch the products in MongoDB"
    )


def web_config(
    settings: BaseSettings,
    spider: str,
    *,
    interval: float = DEFAULT_INTERVAL,
    store: bool = True,
    ctx: Context | None = None,
) -> WebConfig:
    """The dashboard's view of *spider*'s crawl, from the project's settings (and *ctx*, the
    crawl as :func:`check_stored` found it)."""
    token = SETTINGS.value(settings, TOKEN_ENV) or None
    ctx = ctx or Context(settings, spider)
    hosts: list[str] = SETTINGS.value(settings, HOSTS_ENV)
    return WebConfig(
        keys=ctx.keys,
        redis_url=ctx.redis_url,
        heartbeat_timeout=ctx.heartbeat_timeout,
        token=token,
        page_priorities=ctx.page_priorities,
        revisit_grace=ctx.revisit_grace,
        allow_private=ctx.allow_private,
        interval=max(0.2, interval),
        store=ProductStore.from_settings(settings) if store else None,
        observe=observe_store(settings, timeout=3.0) if store else None,
        hosts=tuple(str(n).strip() for n in hosts if str(n).strip()),
    )


def check_stored(settings: BaseSettings, spider: str) -> Context:
    """The operator tools' check of how the crawl is stored, once at start: the dashboard's
    views and actions must find the crawl where its nodes put it, in its format and layout
    (raises :class:`~distcrawl.ops.context.CrawlRefused`); the crawl as found. Redis away is
    no refusal: the dashboard shows the outage, and says so."""
    ctx = Context(settings, spider)
    try:
        client = ctx.client()
    except (RedisError, RedisClusterException, OSError):
        return ctx
    try:
        ctx.check_stored(client)
    except (RedisError, RedisClusterException, OSError):
        pass
    finally:
        client.close()
    return ctx


def execute(opts: argparse.Namespace, settings: BaseSettings) -> int:
    ctx = check_stored(settings, opts.spider)
    config = web_config(
        settings, opts.spider, interval=opts.interval, store=not opts.no_store, ctx=ctx
    )
    try:
        server = DashboardServer(config, host=opts.host, port=opts.port)
    except UnsafeBind as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {opts.host}:{opts.port}: {exc}", file=sys.stderr)
        return 1
    mode = "actions need the token" if config.token else f"read-only (set {TOKEN_ENV})"
    print(
        f"dashboard of crawl {opts.spider} at {server.url} ({mode}); metrics at "
        f"{server.url}metrics; redis {mask_url(config.redis_url)}",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve()
    return 0


Command, add_arguments, run = entry_points(
    __name__,
    add_command_arguments,
    execute,
    usage="SPIDER [--host H] [--port P]",
    summary="Serve the live dashboard and Prometheus /metrics",
    name=words.WEB,
)
