"""The cluster progress extension (distcrawl.ops.progress) on a real Redis: a node that closes
at once (one that refuses to start does) closes it, whenever the close lands."""

from __future__ import annotations

import asyncio

from scrapy import Spider
from scrapy.utils.test import get_crawler

from distcrawl.ops.progress import ClusterProgress


def test_a_close_right_after_the_open_ends_the_progress_loop(redis_url: str) -> None:
    """A cancellation that lands while redis-py connects may be swallowed by it: the loop
    must end anyway, or the node never closes. Closes land at every moment of the first
    sample over the rounds, so a loop that relied on the cancellation alone would stay."""
    crawler = get_crawler(Spider, {"REDIS_URL": redis_url, "DISTCRAWL_PROGRESS_INTERVAL": 3600})
    spider = Spider("catalog")

    async def rounds() -> int:
        ended = 0
        for i in range(200):
            progress = ClusterProgress.from_crawler(crawler)
            progress.spider_opened(spider)
            for _ in range(i % 20):
                await asyncio.sleep(0)  # the close lands a little later each round
            closing = asyncio.ensure_future(progress.spider_closed(spider))
            # a guard against a hang, not a measure: one round takes milliseconds
            done, _ = await asyncio.wait({closing}, timeout=60)
            assert closing in done, f"round {i}: the progress loop outlived the close"
            assert progress._task is not None and progress._task.done()
            ended += 1
        return ended

    assert asyncio.run(rounds()) == 200
