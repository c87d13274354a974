"""Plans of Redis reads: a generator yields batches of named reads and gets their replies back
by name; one driver runs a plan on a blocking client, one on a ``redis.asyncio`` client.

A plan is written once and runs the same on both, so the status and the dead-letter pages read
Redis one way whether a command, a node's reactor or the dashboard asks.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable
from typing import Any, TypeVar

from distcrawl.frontier.connection import is_cluster_client

__all__ = ["Batch", "Plan", "arun", "read", "run"]

T = TypeVar("T")


class Batch:
    """Reads sent in one pipelined round trip, each under a name of the plan's choosing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.names: list[Hashable] = []
        #: the key whose master answers TIME (on a cluster), when the batch is a clock read
        self.clock_of: str | None = None

    def add(self, name: Hashable, command: str, *args: Any, **options: Any) -> None:
        """Read *name* with the redis-py method *command* (``zcard``, ``hgetall``, ...)."""
        self.calls.append((command, args, options))
        self.names.append(name)

    @classmethod
    def clock(cls, key: str) -> Batch:
        """The server time of the slot of *key* (on a cluster, the master that holds it),
        answered under the name ``"time"`` as ``(seconds, microseconds)``."""
        batch = cls()
        batch.clock_of = key
        batch.names.append("time")
        return batch

    def __bool__(self) -> bool:
        return bool(self.names)

    def named(self, replies: list[Any]) -> dict[Hashable, Any]:
        return dict(zip(self.names, replies, strict=True))


#: a plan: yields batches, is sent each batch's replies by name, returns its result
Plan = Generator[Batch, dict[Hashable, Any], T]


def _time_target(client: Any, key: str) -> dict[str, Any]:
    """On a cluster, TIME goes to the master of *key*'s slot (it times the heartbeats)."""
    if is_cluster_client(client):
        return {"target_nodes": client.get_node_from_key(key)}
    return {}


def _one(batch: Batch) -> Plan[dict[Hashable, Any]]:
    got = yield batch
    return got


def read(client: Any, batch: Batch) -> dict[Hashable, Any]:
    """The replies of one batch, by name, with a blocking client."""
    return run(client, _one(batch))


def run(client: Any, plan: Plan[T]) -> T:
    """Run *plan* with a blocking redis-py client (or ``RedisCluster``)."""
    batch = next(plan)
    while True:
        if batch.clock_of is not None:
            replies = [client.time(**_time_target(client, batch.clock_of))]
        elif batch:
            pipe = client.pipeline(transaction=False)
            for command, args, options in batch.calls:
                getattr(pipe, command)(*args, **options)
            replies = pipe.execute()
        else:
            replies = []
        try:
            batch = plan.send(batch.named(replies))
        except StopIteration as done:
            result: T = done.value
            return result


async def arun(client: Any, plan: Plan[T]) -> T:
    """Run *plan* with a ``redis.asyncio`` client (never blocks the event loop)."""
    batch = next(plan)
    while True:
        if batch.clock_of is not None:
            if is_cluster_client(client):
                await client.initialize()  # the slot map, to find the key's master
            replies = [await client.time(**_time_target(client, batch.clock_of))]
        elif batch:
            pipe = client.pipeline(transaction=False)
            for command, args, options in batch.calls:
                getattr(pipe, command)(*args, **options)
            replies = await pipe.execute()
        else:
            replies = []
        try:
            batch = plan.send(batch.named(replies))
        except StopIteration as done:
            result: T = done.value
            return result
