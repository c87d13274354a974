"""Page kinds in the queue: each kind's band of priorities and its order scores."""

from __future__ import annotations

from distcrawl.ops.bands import priority_bands, score_range

PRIORITIES = {"seed": 1000, "category": 300, "listing": 200, "product": 100}


def test_bands_reach_halfway_to_the_neighbours() -> None:
    assert priority_bands(PRIORITIES) == [
        ("seed", 650, None),
        ("category", 250, 650),
        ("listing", 150, 250),
        ("product", None, 150),
    ]
    assert score_range(None, None) == ("-inf", "+inf")
