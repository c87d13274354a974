"""Accepted seeds are logged as counts, at most a line per interval, whatever their number and
pace (Hypothesis); refused ones a line each; a node taking 1,500 seeds writes a few lines."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from crawl_nodes import Node, stats_of
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request

from distcrawl.node.scheduler.seeds import AcceptedSeeds

LOGGER = "distcrawl.node.scheduler.seeds"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counted(lines: list[str]) -> int:
    """The seeds the lines account for."""
    total = 0
    for line in lines:
        many = re.match(r"Seeds accepted: (\d+), taken again: (\d+) ", line)
        if many:
            total += int(many[1]) + int(many[2])
        else:
            assert line.startswith(("Seed accepted: ", "Seed taken again: ")), line
            total += 1
    return total


#: (seconds since the last batch, seeds in the batch, of which taken again)
batches = st.lists(
    st.tuples(st.floats(0, 30, allow_nan=False), st.integers(0, 3000), st.integers(0, 3000)).map(
        lambda b: (b[0], b[1], min(b[1], b[2]))
    ),
    max_size=60,
)


@settings(deadline=None)
@given(batches=batches)
def test_seed_lines_are_bounded_by_the_time_and_account_for_every_seed(
    batches: list[tuple[float, int, int]],
) -> None:
    logger = logging.getLogger(LOGGER)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        clock = Clock()
        log = AcceptedSeeds("n1", interval=10.0, clock=clock)
        request = Request("http://shop.test/", priority=5)
        for gap, size, again in batches:
            clock.now += gap
            for i in range(size):
                log.add(request, again=i < again)
            log.report()
            # the first seeds are told at once, not only once the node stops
            assert bool(records) == bool(log.total)
        log.report(finish=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    seeds = sum(size for _, size, _ in batches)
    assert counted(records) == seeds  # every seed accounted for, none twice
    elapsed = sum(gap for gap, _, _ in batches)
    assert len(records) <= elapsed / 10.0 + 2  # the first at once, one per interval, the rest


@pytest.mark.slow
def test_a_node_taking_many_seeds_logs_their_count_and_each_refused_one(
    redis_url: str, mongo_uri: str, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=20)
    r = redis.Redis.from_url(redis_url)
    accepted = [f"{shop.url}search?q={i}" for i in range(1500)]
    refused = ["javascript:alert(1)", "file:///etc/passwd", "http://"]
    r.lpush("catalog:start_urls", *accepted, *refused)
    node = Node(
        redis_url=redis_url,
        mongo_uri=mongo_uri,
        log_dir=tmp_path,
        node_id="seeds",
        settings={"CONCURRENT_REQUESTS": "16", "ROBOTSTXT_OBEY": "0", "DEPTH_LIMIT": "1"},
    )
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    log = node.log()
    lines = [line.split("] INFO: ", 1)[1] for line in log.splitlines() if "] INFO: Seed" in line]
    assert counted(lines) == len(accepted)
    assert len(lines) < 30, lines  # a line per interval, not 1,500
    assert log.count("Refused seed") == len(refused)  # a line each
    assert stats_of(log)["frontier/seeds/accepted"] == len(accepted)
    r.close()
