"""A node's local bookkeeping: finished requests, fingerprints already sent, site feedback."""

from __future__ import annotations

from distcrawl.base.recent import RecentKeys, RecentMap
from distcrawl.node.scheduler.tracking import InProgress, SiteFeedback


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
    feedback = SiteFeedback(latency_target=2.0)
    feedback.record("a.test", 200, False, 0.1)
    feedback.record("a.test", 429, False, 0.1)
    feedback.record("a.test", 503, True, 0.1)
    feedback.record("a.test", 503, False, 0.1)  # a plain 503 is an error, not a slow-down
    feedback.record("b.test", 200, False, 9.0)
    taken = feedback.take()
    assert sorted(taken) == [("a.test", 2, 2, 0), ("b.test", 0, 0, 1)]
    assert feedback.take() == []
    feedback.restore(taken)
    assert sorted(feedback.take()) == sorted(taken)


def test_recent_map_is_bounded_and_hands_each_value_back_once() -> None:
    kept: RecentMap[str, int] = RecentMap(limit=4)
    for n, key in enumerate("abcde"):
        kept.put(key, n)
    assert len(kept) == 3  # the oldest half went when the fifth arrived
    assert kept.pop("a") is None
    assert kept.pop("e") == 4 and kept.pop("e") is None


def test_a_nodes_site_rates_are_over_the_window_of_its_own_rates() -> None:
    from distcrawl.base.rates import OwnRates
    from distcrawl.node.scheduler.tracking import SiteActivity

    activity, own = SiteActivity(), OwnRates(window=60.0)
    assert own.update(0, {"response_received_count": 0}, activity.take()) is None
    assert own.sites(5) == []  # no rates before two heartbeats, no site rates either
    for _ in range(30):
        activity.record("a.test")
    activity.record("b.test")
    rates = own.update(15_000, {"response_received_count": 31}, activity.take())
    assert rates is not None and rates["pages"] == 124.0  # 31 pages in 15 s
    assert own.sites(5) == [["a.test", 120.0], ["b.test", 4.0]]  # the same 15 s: they add up
    activity.record("b.test")
    own.update(45_000, {"response_received_count": 32}, activity.take())
    assert own.sites(1) == [["a.test", 40.0]]  # 30 pages in 45 s
    # a minute on, the window holds only the last sample's 15 s before it: nothing happened
    rates = own.update(120_000, {"response_received_count": 32}, activity.take())
    assert rates == {"pages": 0.0, "products": 0.0, "acked": 0.0}
    assert own.sites(5) == []
