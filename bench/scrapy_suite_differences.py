"""Scrapy tests whose outcome with the frontier differs from Scrapy's by design, each with its
reason: ``bench/scrapy_suite.py`` reports them apart, neither as passes nor as regressions."""

from __future__ import annotations

__all__ = ["EXPECTED_DIFFERENCES"]

_PERSISTENT_DUPEFILTER = (
    "a persistent dupefilter: the frontier's seen URLs live in Redis beyond one crawl (as "
    "scrapy-redis' with SCHEDULER_PERSIST), so the test's second crawl of the same spider on "
    "the same Redis finds every link seen by the first and fetches only its start URL; on "
    "Scrapy the dupefilter lives in memory for one crawl"
)
_FIFO_WITHIN_PRIORITY = (
    "priority order across nodes: the frontier keeps one first-in-first-out queue per priority "
    "for every node, so Scrapy's last-in-first-out queues (SCHEDULER_MEMORY_QUEUE, "
    "SCHEDULER_START_MEMORY_QUEUE) are not honoured, and this test's expected order is LIFO "
    "within a priority"
)

#: test id (as pytest names it, from Scrapy's sdist root) -> why the frontier differs
EXPECTED_DIFFERENCES: dict[str, str] = {
    "tests/test_crawl.py::TestCrawl::test_fixed_delay": _PERSISTENT_DUPEFILTER,
    "tests/test_crawl.py::TestCrawl::test_randomized_delay": _PERSISTENT_DUPEFILTER,
    # its four crawls are of spiders of one name: the second one on finds every URL seen
    "tests/test_engine.py::TestEngine::test_crawler": _PERSISTENT_DUPEFILTER,
    "tests/test_engine_loop.py::TestRequestSendOrder::test_lifo_start": _FIFO_WITHIN_PRIORITY,
    "tests/test_engine_loop.py::TestRequestSendOrder::test_shared_queues": _FIFO_WITHIN_PRIORITY,
    "tests/test_engine_close_spider.py::test_exception_scheduler": (
        "the test deletes a private attribute of Scrapy's own Scheduler (dqs) to make its "
        "close fail; the frontier's scheduler has no such attribute, so the test fails before "
        "it tests anything"
    ),
}
