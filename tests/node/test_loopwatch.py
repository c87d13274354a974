"""The event loop's longest stall, as a node counts it: a callback that holds the loop delays the
watch's timer by as long."""

from __future__ import annotations

import asyncio
import time

import pytest
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.node.loopwatch import INTERVAL, LoopStallWatch


def test_a_callback_that_holds_the_loop_is_a_stall_in_the_stats(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = MemoryStatsCollector(get_crawler())
    stats.open_spider()

    async def run() -> None:
        watch = LoopStallWatch(stats)
        watch.start()
        try:
            await asyncio.sleep(3 * INTERVAL)
            time.sleep(1.2)  # a callback holding the loop (a hostile page parsed on it)
            while stats.get_value("node/loop_stalls") is None:
                await asyncio.sleep(INTERVAL)
        finally:
            watch.stop()

    asyncio.run(run())
    assert stats.get_value("node/loop_stall_max_ms") >= 1_000
    assert stats.get_value("node/loop_stalls") == 1
    assert "The event loop stalled for 1." in caplog.text
