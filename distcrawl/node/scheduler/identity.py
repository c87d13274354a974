"""A node's identity: its id, the claim that makes one live process its owner, the refusal
of a second one, and the leases an earlier run under the same id left behind."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.base.processes import pid_alive
from distcrawl.frontier.store import CrawlFormatError

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.store import FrontierStore

__all__ = [
    "NodeIdInUse",
    "NodeRefused",
    "claim_node_id",
    "default_node_id",
    "owner_record",
    "refused_starts",
    "rejoin",
]

logger = logging.getLogger(__name__)

#: seconds between two reads of the other owner's heartbeat while the claim watches it
_WATCH_POLL = 0.2


class NodeRefused(RuntimeError):
    """A node that does not start: its spider closes at once with :attr:`reason` as its finish
    reason (no traceback), and ``scrapy crawl`` says so with its exit status."""

    reason = "refused"


#: node id -> why it did not start, for ``scrapy crawl``'s exit status (one process, one crawl)
_REFUSED: dict[str, str] = {}


def refused_starts() -> dict[str, str]:
    """Node id -> the refusal of the nodes of this process that did not start."""
    return dict(_REFUSED)


def refuse(node_id: str, refusal: str) -> None:
    """Record that *node_id* did not start (its one log line is the refusal's own)."""
    _REFUSED[node_id] = refusal


class NodeIdInUse(NodeRefused):
    """Another live process heart-beats under this node's id."""

    reason = reasons.NODE_ID_IN_USE

    def __init__(self, node_id: str, host: Any, pid: Any, age: float) -> None:
        super().__init__(
            f"node id {node_id!r} is in use by a live process: pid {pid} on host {host} "
            f"(heart-beat {age:.1f}s ago and still beating); give every process its own "
            f"DISTCRAWL_NODE_ID, or stop that one first"
        )


def default_node_id() -> str:
    """``host-pid``: the id of a node started without ``DISTCRAWL_NODE_ID``."""
    return f"{socket.gethostname()}-{os.getpid()}"


def owner_record(run_id: str) -> str:
    """The owner of a node id as the claim stores it: this host, this pid, this run."""
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "run": run_id})


async def claim_node_id(
    store: FrontierStore,
    *,
    node_id: str,
    run_id: str,
    heartbeat_timeout: float,
    watch: float,
) -> None:
    """Claim ``node_id`` for this process, or raise :class:`NodeIdInUse` while another live
    process heart-beats under it (and the frontier's ``CrawlFormatError`` when the crawl is
    stored in another format).

    Two processes with one id would take each other's leases at open and hand them back and
    forth. The claim is atomic (``claim`` in the script), so of two processes started at once
    with one id, one wins. A process that died is no obstacle: on this host its pid is gone;
    on another host its heartbeat stops advancing (watched for ``watch`` s, a few beats).
    """
    owner = owner_record(run_id)
    timeout_ms = int(heartbeat_timeout * 1000)
    try:
        claimed, other, age_ms = await store.claim(node_id, owner, timeout_ms)
    except CrawlFormatError as refused:
        logger.error("Node refuses to start: %s", refused)
        raise
    if int(claimed):
        return
    try:
        info = json.loads(other)
    except ValueError:
        info = {}
    host, pid = info.get("host"), info.get("pid")
    here = host == socket.gethostname() and isinstance(pid, int) and pid != os.getpid()
    if not (here and not pid_alive(int(pid or 0))):
        # alive here, or on another host: does it still beat?
        nodes = store.keys.nodes
        beat = await store.client.zscore(nodes, node_id)
        deadline = time.monotonic() + watch
        while time.monotonic() < deadline:
            await asyncio.sleep(_WATCH_POLL)
            now_beat = await store.client.zscore(nodes, node_id)
            if now_beat is not None and (beat is None or now_beat > beat):
                error = NodeIdInUse(node_id, host, pid, int(age_ms) / 1000)
                logger.error("Node refuses to start: %s", error)
                raise error
    logger.info("Node id %s was last used by pid %s on %s, which is gone", node_id, pid, host)
    await store.claim(node_id, owner, timeout_ms, force=True)


async def rejoin(store: FrontierStore, *, node_id: str, stats: StatsCollector) -> None:
    """Return what an earlier run of ``node_id`` held; the node stays a member, so from its
    first lease on a death is seen by recovery."""
    moved = await store.rejoin(node_id)
    if moved:
        logger.info("Returned %d requests leased by an earlier run of node %s", moved, node_id)
        stats.inc_value(stat_keys.RECLAIMED, int(moved))
