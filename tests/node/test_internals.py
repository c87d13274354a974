"""Loud failure on Scrapy internals: every private hook distcrawl uses is checked at open.

The first test fails when an installed Scrapy lacks one of them; the others show that a missing
one stops the node with an error that names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from crawl_nodes import Node
from scrapy import signals
from scrapy.core.engine import _Slot
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobots
from scrapy.utils.reactor import CallLaterOnce
from scrapy.utils.test import get_crawler

from distcrawl.node.internals import (
    ScrapyInternalsMissing,
    check_engine,
    check_retry_middleware,
    check_robots_middleware,
)
from distcrawl.node.middlewares.retry import BackoffRetryMiddleware
from distcrawl.node.middlewares.robots import RobotsTxtMiddleware
from distcrawl.node.scheduler.tracking import InProgress


def with_engine(test: Callable[[Any], None]) -> None:
    """Run ``test(engine)`` on a real Scrapy engine with a real slot, as at open."""

    async def main() -> None:
        crawler = get_crawler(settings_dict={"TELNETCONSOLE_ENABLED": False})
        crawler._apply_settings()
        engine = crawler._create_engine()
        engine._slot = _Slot(False, CallLaterOnce(lambda: None), engine.scheduler)
        try:
            test(engine)
        finally:
            # the download handlers close their sessions when the engine stops
            await crawler.signals.send_catch_log_async(signals.engine_stopped)

    asyncio.run(main())


def test_this_scrapy_has_every_private_hook_distcrawl_uses() -> None:
    with_engine(lambda engine: check_engine(engine, InProgress))
    check_retry_middleware()
    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True})
    check_robots_middleware(ScrapyRobots(crawler))
    RobotsTxtMiddleware(crawler)  # checks itself when built
    BackoffRetryMiddleware(crawler.settings)


def _no_slot(engine: Any) -> None:
    engine._slot = None


def _no_nextcall(engine: Any) -> None:
    del engine._slot.nextcall


def _inprogress_not_a_set(engine: Any) -> None:
    engine._slot.inprogress = []


def _discard_instead_of_remove(engine: Any) -> None:
    slot = engine._slot
    slot.remove_request = lambda request: slot.inprogress.discard(request)


def _no_active(engine: Any) -> None:
    del engine.downloader.active


def _no_start(engine: Any) -> None:
    del engine._start


@pytest.mark.parametrize(
    ("breaks", "named"),
    [
        (_no_slot, "ExecutionEngine._slot"),
        (_no_nextcall, "nextcall.schedule()"),
        (_inprogress_not_a_set, "_slot.inprogress"),
        (_discard_instead_of_remove, "remove_request() -> inprogress.remove()"),
        (_no_active, "downloader.active"),
        (_no_start, "ExecutionEngine._start"),
    ],
)
def test_a_missing_engine_hook_is_named(breaks: Callable[[Any], None], named: str) -> None:
    def test(engine: Any) -> None:
        breaks(engine)
        with pytest.raises(ScrapyInternalsMissing, match="does not have") as info:
            check_engine(engine, InProgress)
        assert named in str(info.value)

    with_engine(test)


def test_a_missing_retry_hook_stops_the_middleware() -> None:
    class Renamed(BackoffRetryMiddleware):
        _retry = None  # type: ignore[assignment]

    with pytest.raises(ScrapyInternalsMissing, match=r"RetryMiddleware\._retry"):
        Renamed(get_crawler().settings)


def test_a_missing_robots_hook_stops_the_middleware() -> None:
    class Renamed(ScrapyRobots):
        def __init__(self, crawler: Any) -> None:
            super().__init__(crawler)
            self._parsers_by_netloc = self.__dict__.pop("_parsers")

    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True})
    with pytest.raises(ScrapyInternalsMissing, match=r"RobotsTxtMiddleware\._parsers"):
        check_robots_middleware(Renamed(crawler))


@pytest.mark.slow
def test_a_node_whose_scrapy_lacks_a_hook_stops_with_a_clear_error(redis_url, tmp_path) -> None:
    node = Node(
        redis_url=redis_url,
        mongo_uri="mongodb://127.0.0.1:9/unused",
        log_dir=tmp_path,
        node_id="old-scrapy",
        spider="catalog_no_retry_hook",
        settings={"SPIDER_MODULES": "distcrawl.node.spiders,probe_spiders"},
    )
    try:
        assert node.wait(120) != 0
    finally:
        node.kill()
    assert "does not have: RetryMiddleware._retry(request, reason)" in node.log()
