"""A node's local bookkeeping: finished requests, fingerprints already sent, site feedback."""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.base.recent import RecentKeys
from distcrawl.node.scheduler.tracking import InProgress, SiteFeedback, StartedTally


def test_in_progress_reports_each_request_the_engine_lets_go() -> None:
    done: list[str] = []
    inprogress = InProgress({"a"}, done.append)
    inprogress.add("b")
    inprogress.remove("a")
    inprogress.remove("b")
    assert done == ["a", "b"] and not inprogress


def test_recent_keys_are_bounded_and_forget_the_oldest() -> None:
    memory = RecentKeys(limit=4)
    for fp in "abcde":
        memory.add(fp)
    assert "e" in memory and "d" in memory
    assert "a" not in memory  # the oldest half went when the fifth arrived
    assert len(memory) == 3


def test_site_feedback_classifies_and_survives_a_failed_flush() -> None:
    now = [100.0]
    feedback = SiteFeedback(latency_target=2.0, clock=lambda: now[0])
    feedback.record("a.test", 200, False, 0.1)
    feedback.record("a.test", 429, False, 0.5, hold_ms=3000)
    feedback.record("a.test", 503, True, 0.1, hold_ms=1000)
    feedback.record("a.test", 503, False, 0.1)  # a plain 503 is an error, not a slow-down
    feedback.record("b.test", 200, False, 9.0)
    feedback.timed_out("c.test", 30.0)
    now[0] = 101.0
    taken = feedback.take()
    # newest: the ms since the newest throttled or slow answer's request was sent
    assert sorted(taken) == [
        ("a.test", 2, 2, 0, 1100, 3000),
        ("b.test", 0, 0, 1, 10000, 0),
        ("c.test", 0, 0, 1, 31000, 0),
    ]
    assert feedback.take() == []
    feedback.restore(taken)
    assert sorted(feedback.take()) == sorted(taken)


def test_started_tally_adds_its_count_to_the_stats_once() -> None:
    stats = MemoryStatsCollector(get_crawler())
    stats.inc_value("scheduler/dequeued", 2)  # from memory, counted at once
    tally = StartedTally(stats)
    for _ in range(5):
        tally.count += 1
    tally.add_to_stats()
    tally.add_to_stats()  # nothing more to add
    tally.count += 1
    tally.add_to_stats()
    assert stats.get_value("frontier/started") == 6
    assert stats.get_value("scheduler/dequeued/redis") == 6
    assert stats.get_value("scheduler/dequeued") == 8
    assert tally.count == 0
