"""The log lines an operator reads for a whole Redis outage, however many retries: one when it
starts, one when it is over, and one when Redis comes to name a cause an operator must mend.
(What is an outage: tests/frontier/test_outages.py.)"""

from __future__ import annotations

import logging

import pytest
import redis
from redis._parsers.base import BaseParser
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.node.scheduler.outage import RedisOutage


def stats() -> MemoryStatsCollector:
    collector = MemoryStatsCollector(get_crawler())
    collector.open_spider()
    return collector


def test_an_outage_is_one_line_when_it_starts_and_one_when_it_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.outage")
    collector = stats()
    outage = RedisOutage("n1", collector, heartbeat_timeout=30, settle=0.0)
    oom = redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    for _ in range(1000):
        outage.failed(oom, waiting="3 acks, 7 links")
    outage.failed(redis.ConnectionError("connection refused"), waiting="3 acks, 9 links")
    assert outage.answered() is True  # the first success: the caller guards recovery
    assert outage.answered() is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("Redis unavailable (OOM, out of memory: command not allowed")
    assert lines[0].endswith("; free memory or raise maxmemory")
    assert "Redis is back after" in lines[1]
    assert "OOM x1000, unreachable x1" in lines[1]
    assert "with what waited: 3 acks, 9 links" in lines[1]
    assert collector.get_value("frontier/redis_errors") == 1001
    assert collector.get_value("frontier/outages") == 1


def test_an_outage_that_comes_and_goes_is_one_outage(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.outage")
    collector = stats()
    outage = RedisOutage("n1", collector, heartbeat_timeout=30, settle=3600.0)
    oom = redis.exceptions.OutOfMemoryError("command not allowed")
    for _ in range(5):  # Redis takes one call and refuses the next: not settled yet
        outage.failed(oom)
        assert outage.answered() is True
    assert [r.getMessage()[:17] for r in caplog.records] == ["Redis unavailable"]
    outage.finish()  # the node stops while Redis serves it: the outage is logged as over
    assert "Redis is back" in caplog.records[-1].getMessage()
    assert collector.get_value("frontier/outages") == 1


def test_an_outage_that_comes_to_name_a_cause_to_mend_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="distcrawl.node.scheduler.outage")
    collector = stats()
    outage = RedisOutage("n1", collector, heartbeat_timeout=30, settle=0.0)
    # a server restarted with another password: out of reach, loading, then WRONGPASS
    for reply in ("unreachable", "LOADING x", "WRONGPASS x", "LOADING x", "WRONGPASS x") * 50:
        exc = redis.ConnectionError("refused") if reply == "unreachable" else None
        outage.failed(exc or BaseParser.parse_error(reply))
    outage.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("Redis unavailable (unreachable: refused)")
    assert lines[1].startswith("Redis still unavailable to node n1, now WRONGPASS, refuses")
    assert (
        "a password rotated" in lines[1]
        and "check the user and password in REDIS_URL" in (lines[1])
    )
    assert "LOADING x100, WRONGPASS x100, unreachable x50" in lines[2]
    assert collector.get_value("frontier/outages") == 1
