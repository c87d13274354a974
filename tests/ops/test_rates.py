"""Rates derived from successive snapshots: per node, for the cluster, and the backlog's trend."""

from __future__ import annotations

from distcrawl.ops.progress import progress_line
from distcrawl.ops.rates import RateTracker, backlog
from distcrawl.ops.snapshot import NodeRecord, Snapshot
from distcrawl.ops.status import build_status


def snapshot(at: int, beats: dict[str, tuple[int, int, int]], queued: int = 0) -> Snapshot:
    """A synthetic snapshot: node -> (heartbeat ms, pages, acked)."""
    return Snapshot(
        spider="catalog",
        at_ms=at,
        queued=queued,
        nodes={
            name: NodeRecord(
                heartbeat_ms=hb,
                info_heartbeat_ms=hb,
                info={
                    "stats": {
                        "response_received_count": pages,
                        "catalog/pages/product": pages,
                        "item_scraped_count": pages,
                        "frontier/acked": acked,
                    }
                },
            )
            for name, (hb, pages, acked) in beats.items()
        },
    )


def test_rates_come_from_heartbeats_and_give_the_time_to_drain() -> None:
    tracker = RateTracker(window=60)
    tracker.update(snapshot(10_000, {"a": (10_000, 0, 0), "b": (10_000, 0, 0)}, queued=1000))
    # a sample without a new heartbeat changes nothing
    tracker.update(snapshot(10_500, {"a": (10_000, 0, 0), "b": (10_000, 0, 0)}, queued=1000))
    assert tracker.node_rates("a") is None
    last = snapshot(40_000, {"a": (40_000, 100, 100), "b": (40_000, 50, 50)}, queued=700)
    tracker.update(last)
    status = build_status(last, tracker, heartbeat_timeout=1e9)
    assert status["totals"]["responses_per_min"] == 300.0  # (100 + 50) pages in 30 s
    assert status["totals"]["products_per_min"] == 300.0
    assert status["nodes"][0]["responses_per_min"] == 200.0
    assert status["eta_seconds"] == 140.0  # 700 left at 300 acks/min
    assert status["backlog_per_min"] == -600.0
    line = progress_line(status)
    assert "queued 700" in line and "300 products/min" in line and "nodes 2 live" in line


def test_a_node_restarted_under_the_same_id_starts_its_rates_again() -> None:
    tracker = RateTracker()
    tracker.update(snapshot(1_000, {"a": (1_000, 500, 500)}))
    tracker.update(snapshot(2_000, {"a": (2_000, 10, 10)}))
    assert tracker.node_rates("a") is None
    tracker.update(snapshot(3_000, {"a": (3_000, 20, 20)}))
    assert tracker.node_rates("a") == {"pages": 600.0, "products": 600.0, "acked": 600.0}


def test_the_backlog_counts_every_request_not_finished() -> None:
    snap = Snapshot(spider="catalog", at_ms=1, queued=5, waiting_total=4, parked=3, start_list=2)
    snap.nodes = {"a": NodeRecord(leases=7, seeding=1), "b": NodeRecord(leases=2)}
    assert backlog(snap) == 5 + 4 + 3 + 2 + 7 + 1 + 2
