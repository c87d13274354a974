"""Reconciling a node's leases with what Redis holds for it, after a round trip whose outcome
is unknown (a lost reply, a Redis outage) or a rewind of Redis."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from distcrawl.base.names import stats as stat_keys
from distcrawl.frontier.batch import Lease
from distcrawl.frontier.store import is_tombstone

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import Child
    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.scheduler.ready import ReadyQueue

__all__ = ["reconcile_leases", "report_rewind"]

logger = logging.getLogger(__name__)


async def reconcile_leases(
    store: FrontierStore,
    node_id: str,
    *,
    leased: dict[Request, Lease],
    acks: Callable[[], Iterable[Lease]],
    ready: ReadyQueue,
    stats: StatsCollector,
    own: Sequence[Child] = (),
) -> list[tuple[Child, Lease]]:
    """Return leases ``node_id`` holds in Redis but does not know about, and drop prefetched
    requests whose lease it no longer holds from ``ready``; returns the unknown leases that
    are ``own`` children waiting to be written (a failed round trip wrote them after all),
    each with its lease, instead of returning them (Scrapy has them already).

    A sync whose reply was lost with the connection (or that failed while its reply was
    handled) may still have leased requests on the server; unknown to the node, they would
    never be acked and would keep the crawl from draining. Known ones (started, prefetched:
    ``leased``; awaiting their ack: what ``acks()`` gives) stay. Requests dropped from
    ``ready`` leave ``leased`` too.
    """
    held = await store.held_leases(node_id)
    # both read once Redis answered: a request the engine finished meanwhile left ``leased``
    # for the acks (read before, it would be in neither, and its lease would go back)
    known = {(lease.shard, lease.rid) for lease in (*leased.values(), *acks())}
    unknown = [
        Lease(shard, rid, "")
        for shard, rids in held.items()
        for rid in rids
        if (shard, rid) not in known
    ]
    adopted: list[tuple[Child, Lease]] = []
    if unknown and own:
        unknown, adopted = await _own_among(store, node_id, unknown, own)
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
        return adopted
    dropped = set(gone)
    for request in gone:
        leased.pop(request, None)
    stats.inc_value(stat_keys.LEASES_LOST, len(gone))
    logger.warning(
        "Node %s dropped %d prefetched requests whose leases it no longer holds",
        node_id,
        len(gone),
    )
    kept = [r for r in ready if r not in dropped]
    ready.clear()
    ready.extend(kept)
    return adopted


async def _own_among(
    store: FrontierStore, node_id: str, unknown: list[Lease], own: Sequence[Child]
) -> tuple[list[Lease], list[tuple[Child, Lease]]]:
    """Split ``unknown`` leases into those to return and those that are ``own`` children (the
    same shard and payload), each with its lease."""
    lines = await store.held_values(node_id, unknown)
    waiting = list(own)
    rest: list[Lease] = []
    adopted: list[tuple[Child, Lease]] = []
    for lease in unknown:
        line = lines.get((lease.shard, lease.rid))
        # "<score>\t<rid>\t<value>"; the value is the payload, or "<site>\n<payload>"
        payload = line.split("\t", 2)[-1].rpartition("\n")[2] if line is not None else None
        match = next(
            (
                c
                for c in waiting
                if c.payload == payload and store.keys.shard_of(c.site) == lease.shard
            ),
            None,
        )
        if match is None:
            rest.append(lease)
        else:
            waiting.remove(match)
            adopted.append((match, Lease(lease.shard, lease.rid, match.site)))
    return rest, adopted


def report_rewind(
    found: bytes,
    *,
    node_id: str,
    heartbeat_timeout: float,
    forgotten: int,
    stats: StatsCollector,
) -> None:
    """Log and count that a shard lacked this node's last mark (``found`` instead).

    Either Redis came back without the node's last writes (restarted from older data, a
    failover to a lagging replica, a reset), or another node presumed this one dead and
    recovered its leases (the shard holds the recovery's tombstone). What the node remembers
    having pushed (``forgotten`` fingerprints) may be gone either way: it forgets it, takes a
    new rid tag, and reconciles its leases, a member again (a heartbeat) before it leases.
    """
    if is_tombstone(found):
        stats.inc_value(stat_keys.PRESUMED_DEAD)
        logger.warning(
            "Node %s was presumed dead and its leases were recovered by another node (its "
            "heartbeat was older than %.0fs: a long pause, or Redis out of its reach): it "
            "joins the cluster again, forgets %d pushed fingerprints and the spider's "
            "known links, and drops prefetched requests it no longer holds",
            node_id,
            heartbeat_timeout,
            forgotten,
        )
    else:
        stats.inc_value(stat_keys.REDIS_REWINDS)
        logger.warning(
            "Redis lost this node's last writes (its last mark is gone, found %r): node %s "
            "forgets %d pushed fingerprints and the spider's known links, and reconciles "
            "its leases",
            found.decode("utf-8", "backslashreplace") or "none",
            node_id,
            forgotten,
        )
