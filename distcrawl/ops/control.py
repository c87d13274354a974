"""Control of a whole crawl: pause and resume every node, or reset the crawl's state.

A reset deletes the queue, request payloads, dupefilter, parked retries, dead letters,
refused entries, node stats, site budgets and (unless kept) the seed list. It keeps the leases
and seeds of live nodes (so their acks stay consistent) unless forced, the id counter always
(a live node's late ack must never hit a new request), a pause and the crawl's frontier
format.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
from typing import TYPE_CHECKING, Any

from distcrawl.frontier.store import FrontierStore, LeasesKeptChanging

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["LeasesKeptChanging", "is_paused", "pause", "reset", "reset_plan", "resume"]


def pause(client: Any, keys: FrontierKeys) -> dict[str, Any]:
    """Pause every shard; the flag says who paused and when (read by nobody but people)."""
    who = {"at": time.time(), "by": f"{getpass.getuser()}@{socket.gethostname()}"}
    FrontierStore(client, keys).set_paused(json.dumps(who))
    return {"paused": True, **who}


def resume(client: Any, keys: FrontierKeys) -> dict[str, Any]:
    """Resume; idle nodes hear it on the wake channel and lease at once."""
    was_paused = is_paused(client, keys)
    FrontierStore(client, keys).set_paused(None)
    return {"paused": False, "was_paused": was_paused}


def is_paused(client: Any, keys: FrontierKeys) -> bool:
    return bool(client.exists(keys.paused))


def reset_plan(
    client: Any, keys: FrontierKeys, *, heartbeat_timeout: float, force: bool, keep_seeds: bool
) -> dict[str, Any]:
    """What :func:`reset` would delete now, and whose leases it would keep; deletes nothing."""
    return FrontierStore(client, keys).reset_plan(
        heartbeat_timeout=heartbeat_timeout, force=force, keep_seeds=keep_seeds
    )


def reset(
    client: Any,
    keys: FrontierKeys,
    *,
    heartbeat_timeout: float,
    force: bool = False,
    keep_seeds: bool = False,
) -> dict[str, Any]:
    """Delete the crawl's state (see the module docstring for what stays), through the
    frontier's reset: one MULTI/EXEC per shard that WATCHes the live nodes' leases, so a kept
    lease always keeps its payload. Raises :class:`LeasesKeptChanging` when they kept changing
    under every attempt."""
    outcome = FrontierStore(client, keys).reset(
        heartbeat_timeout=heartbeat_timeout, force=force, keep_seeds=keep_seeds
    )
    return {**outcome, "still_paused": is_paused(client, keys)}
