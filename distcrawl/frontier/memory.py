"""Redis' memory as the frontier sees it: how much is used of ``maxmemory``, and whether its
``maxmemory-policy`` may evict the frontier's keys. Read from ``INFO memory`` (one command per
server; ``CONFIG`` may be refused by a managed Redis, ``INFO`` is not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distcrawl.frontier.connection import is_cluster_client

__all__ = [
    "DEFAULT_MEMORY_WARN",
    "EVICTION_COST",
    "RedisMemory",
    "evicts_frontier",
    "fullest",
    "memory_of",
    "read_memory",
    "read_memory_async",
]

#: a share of ``maxmemory`` used above which nodes and ``status`` warn
DEFAULT_MEMORY_WARN = 0.8
#: what eviction does to a crawl, for the message that refuses it
EVICTION_COST = (
    "evicted queues, leases and dead letters lose requests, and an evicted dupefilter makes "
    "the nodes fetch pages again"
)


def evicts_frontier(policy: str) -> bool:
    """Whether ``maxmemory-policy`` *policy* may evict the frontier's keys: the ``allkeys-*``
    policies. ``noeviction`` refuses writes instead (an outage the nodes wait out), and the
    ``volatile-*`` ones evict only keys with a time to live (a shared robots.txt, a departed
    node's last stats), never a queue, a lease or the dupefilter."""
    return policy.startswith("allkeys")


@dataclass(frozen=True)
class RedisMemory:
    """One server's memory (bytes; ``maxmemory`` 0: no limit); of a cluster, the fullest
    master's."""

    used: int
    maxmemory: int
    policy: str
    server: str = ""

    @property
    def share(self) -> float | None:
        """The share of ``maxmemory`` in use (None without a limit)."""
        return self.used / self.maxmemory if self.maxmemory > 0 else None

    @property
    def evicting(self) -> bool:
        return evicts_frontier(self.policy)

    def as_dict(self) -> dict[str, Any]:
        return {
            "used_bytes": self.used,
            "maxmemory_bytes": self.maxmemory,
            "used_share": None if self.share is None else round(self.share, 4),
            "policy": self.policy,
        }


def memory_of(info: Any) -> list[RedisMemory]:
    """``INFO memory`` as redis-py returns it (one dict, or one per node of a cluster)."""
    if isinstance(info, dict) and "used_memory" in info:
        return [_one(info, "")]
    if isinstance(info, dict):
        return [_one(v, str(k)) for k, v in info.items() if isinstance(v, dict)]
    return []


def _one(info: dict[str, Any], server: str) -> RedisMemory:
    policy = info.get("maxmemory_policy", "noeviction")
    if isinstance(policy, bytes):
        policy = policy.decode()
    return RedisMemory(
        used=int(info.get("used_memory", 0)),
        maxmemory=int(info.get("maxmemory", 0)),
        policy=str(policy),
        server=server,
    )


def fullest(servers: list[RedisMemory]) -> RedisMemory | None:
    """The server nearest its limit (an evicting one first: it decides the refusal)."""
    if not servers:
        return None
    return max(servers, key=lambda m: (m.evicting, m.share or 0.0, m.used))


def _info_args(client: Any) -> dict[str, Any]:
    # every master of a cluster, named: each holds its own slots, under its own policy
    return {"target_nodes": client.get_primaries()} if is_cluster_client(client) else {}


def read_memory(client: Any) -> RedisMemory | None:
    """The memory of the Redis behind a blocking client (of a cluster: the fullest master)."""
    return fullest(memory_of(client.info("memory", **_info_args(client))))


async def read_memory_async(client: Any) -> RedisMemory | None:
    """:func:`read_memory` for an asyncio client."""
    if is_cluster_client(client):
        await client.initialize()  # the slot map, to know the masters
    return fullest(memory_of(await client.info("memory", **_info_args(client))))
