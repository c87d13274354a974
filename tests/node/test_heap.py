"""The start-up objects leave the garbage collector's full passes once the spider is open."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from distcrawl.node.heap import FreezeStartupObjects


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()  # as in a fresh process
    yield
    gc.unfreeze()  # the test process' collector as it was


def test_the_objects_of_start_up_are_frozen_once_the_spider_opens(unfrozen: None) -> None:
    crawler = get_crawler(Spider)
    ext = FreezeStartupObjects.from_crawler(crawler)
    assert gc.get_freeze_count() == 0
    ext.spider_opened(Spider("s"))
    assert crawler.stats is not None
    frozen = crawler.stats.get_value("gc/frozen_objects")
    assert frozen > 1000
    assert gc.get_freeze_count() > frozen / 2
    assert not any(x is ext for x in gc.get_objects())  # the collector no longer walks it
    # objects made afterwards are collected as before
    made: list[object] = []
    made.append(made)  # a cycle: only the collector frees it
    assert any(x is made for x in gc.get_objects(generation=0))


def test_the_setting_turns_it_off(unfrozen: None) -> None:
    crawler = get_crawler(Spider, {"DISTCRAWL_GC_FREEZE": False})
    with pytest.raises(NotConfigured):
        FreezeStartupObjects.from_crawler(crawler)
    assert gc.get_freeze_count() == 0


def test_a_second_crawl_in_the_same_process_freezes_nothing_more(unfrozen: None) -> None:
    first = get_crawler(Spider)
    FreezeStartupObjects.from_crawler(first).spider_opened(Spider("a"))
    frozen = gc.get_freeze_count()
    running: list[object] = []  # the first crawl's objects: requests, responses
    running.append(running)
    second = get_crawler(Spider)
    FreezeStartupObjects.from_crawler(second).spider_opened(Spider("b"))
    assert any(x is running for x in gc.get_objects())  # still the collector's to free
    assert gc.get_freeze_count() <= frozen
    assert second.stats is not None and second.stats.get_value("gc/frozen_objects") is None
