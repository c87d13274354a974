"""The Scrapy scheduler of a node: a local window onto the shared, lossless Redis frontier.

``next_request()`` and ``enqueue_request()`` never touch the network. A background task on
the asyncio reactor (the I/O loop) does all Redis I/O in one script call per flush (``sync``):
it pushes the children discovered since the last flush, acknowledges the requests Scrapy has
finished with, and leases the next batch, sized to the node's free slots.

A request is acknowledged only when Scrapy is done with it for good: its response was parsed,
every item it produced went through the item pipelines (which complete only once an item is
durable), and every child request is in the same flush, ahead of the ack. Requests the node
never started are returned to the queue on a clean stop; a node that dies is recovered by any
live node once its heartbeat is older than ``DISTCRAWL_HEARTBEAT_TIMEOUT``.

The parts, one job each: ``adapter`` (the scheduler Scrapy names: its open and close),
``state`` (its settings and local window), ``window`` (requests in and out), ``refusal`` (a
node that refuses to start), ``hooks`` (the engine's hooks and Scrapy's signals), ``loop`` (the
I/O loop: round trips, write holding, backoff), ``buffers`` (what waits to be written),
``leases`` (leased payloads into requests), ``identity`` (node id claim and refusal),
``membership`` (heartbeats, recovery of dead nodes), ``drain`` (drain detection), ``seeds``
(seed intake), ``reconcile`` (leases after a failed round trip or a rewind), ``outage`` (Redis
out of reach or refusing writes), ``memory`` (Redis' memory and eviction policy), ``revisits``
(revisit mode's hooks), ``sites`` (per-site budgets), ``tracking`` (the engine's in-progress
set, site feedback), ``crawlwide`` (the crawl-wide settings, recorded by the crawl's first node
and checked by every later one).
"""

from __future__ import annotations

from distcrawl.node.scheduler.adapter import FrontierScheduler, unreturned_leases
from distcrawl.node.scheduler.identity import NodeIdInUse
from distcrawl.node.scheduler.loop import DEFAULT_IDLE_MAX_WAIT, LEASE_WINDOW

__all__ = [
    "DEFAULT_IDLE_MAX_WAIT",
    "LEASE_WINDOW",
    "FrontierScheduler",
    "NodeIdInUse",
    "unreturned_leases",
]
