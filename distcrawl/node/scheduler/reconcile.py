"""Reconciling a node's leases with what Redis holds for it, after a round trip whose outcome
is unknown (a lost reply, a Redis outage, a rewind)."""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

from distcrawl.frontier.batch import Lease

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore

__all__ = ["reconcile_leases"]

logger = logging.getLogger("distcrawl.node.scheduler")  # the node's log lines, as before


async def reconcile_leases(
    store: FrontierStore,
    node_id: str,
    *,
    leased: dict[Request, Lease],
    acks: Iterable[Lease],
    ready: deque[Request],
    stats: StatsCollector,
) -> deque[Request]:
    """Return leases ``node_id`` holds in Redis but does not know about, and drop prefetched
    requests whose lease it no longer holds; returns what is left of ``ready``.

    A sync whose reply was lost with the connection (or that failed while its reply was
    handled) may still have leased requests on the server; unknown to the node, they would
    never be acked and would keep the crawl from draining. Known ones (started, prefetched:
    ``leased``; awaiting their ack: ``acks``) stay. Requests dropped from ``ready`` leave
    ``leased`` too.
    """
    held = await store.held_leases(node_id)
    known = {(lease.shard, lease.rid) for lease in (*leased.values(), *acks)}
    unknown = [
        Lease(shard, rid, "")
        for shard, rids in held.items()
        for rid in rids
        if (shard, rid) not in known
    ]
    if unknown:
        await store.release(node_id, unknown)
        logger.warning("Returned %d leases whose grant was lost with Redis", len(unknown))
    # prefetched requests whose lease this node lost (it was presumed dead, or Redis lost
    # the grant): they are back in the frontier for another node; not sending them here
    # saves a second fetch (started ones finish, their acks are fenced off as stale)
    holding = {(shard, rid) for shard, rids in held.items() for rid in rids}

    def lost(request: Request) -> bool:
        lease = leased.get(request)
        return lease is None or (lease.shard, lease.rid) not in holding

    gone = [r for r in ready if lost(r)]
    if not gone:
        return ready
    dropped = set(gone)
    for request in gone:
        leased.pop(request, None)
    stats.inc_value("frontier/leases/lost", len(gone))
    logger.warning(
        "Node %s dropped %d prefetched requests whose leases it no longer holds",
        node_id,
        len(gone),
    )
    return deque(r for r in ready if r not in dropped)
