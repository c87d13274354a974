"""The I/O loop's timing: how long a node keeps its writes before a round trip."""

from __future__ import annotations

from scrapy import Request

from distcrawl.frontier.batch import Child
from distcrawl.node.scheduler.loop import write_hold


def test_a_node_keeps_its_writes_only_while_it_has_work_and_its_links_can_wait() -> None:
    products = [Request(f"http://s.test/p/{i}", priority=0) for i in range(20)]
    product = Child(b"", 0, False, 0, "s.test", "{}")
    listing = Child(b"", 10, False, 0, "s.test", "{}")

    def hold(ready: list[Request], children: list[Child], idle: int = 0) -> float:
        return write_hold(
            ready=ready, low_water=8, children=children, idle_nodes=idle, until=5.0, now=4.0
        )

    assert hold(products, []) == 1.0  # acks alone wait for the deadline
    assert hold(products, [product]) == 1.0  # so do links no better than the work in hand
    assert hold(products[:8], []) == 0.0  # low water: flush (and lease) now
    assert hold(products, [product, listing]) == 0.0  # a link that outranks what it holds
    assert hold(products, [product], idle=1) == 0.0  # some node has nothing to do
    assert (
        write_hold(ready=products, low_water=8, children=[], idle_nodes=0, until=5.0, now=6.0) < 0
    )  # the deadline passed
