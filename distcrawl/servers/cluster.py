"""A real Redis Cluster on loopback, from the bundled ``valkey-server``: for tests, benchmarks
and the demo.

Each master is a :class:`ClusterNodeServer` (``--cluster-enabled yes``, its own append-only
file and ``nodes.conf``, so a restarted master comes back with its data and its place in the
cluster). :meth:`LocalRedisCluster.start` assigns the 16,384 slots in equal ranges
(``CLUSTER ADDSLOTSRANGE``), introduces the nodes to each other (``CLUSTER MEET``) and waits
until every node says ``cluster_state:ok``; with ``replicas=1`` each master gets a replica
(``CLUSTER REPLICATE``). :meth:`LocalRedisCluster.stop` stops every server it started.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import redis

from distcrawl.base.processes import free_port
from distcrawl.servers.process import RedisServer, ServiceError

__all__ = ["SLOTS", "ClusterNodeServer", "LocalRedisCluster"]

#: hash slots of a Redis Cluster
SLOTS = 16384
#: milliseconds of silence after which the other nodes consider a node failed
DEFAULT_NODE_TIMEOUT_MS = 3000
#: seconds to wait for the cluster to say ``cluster_state:ok``
DEFAULT_READY_TIMEOUT = 60.0
#: seconds between two introductions of the nodes that do not know every node yet
REMEET_AFTER = 5.0


class ClusterNodeServer(RedisServer):
    """valkey-server as one node of a Redis Cluster (cluster bus on a port of its own)."""

    name = "redis-cluster-node"

    def __init__(self, *, node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bus_port = free_port(self.host)
        self.node_timeout_ms = node_timeout_ms

    def choose_ports(self) -> None:
        super().choose_ports()
        self.bus_port = free_port(self.host)

    def ports_text(self) -> str:
        return f"{self.host}:{self.port}, cluster bus {self.bus_port}"

    def command(self) -> list[str]:
        return [
            *super().command(),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(self.data_dir / "nodes.conf"),
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--cluster-port", str(self.bus_port),
            # answer reads on a slot another node owns with a redirect, never serve stale data
            "--cluster-require-full-coverage", "yes",
        ]  # fmt: skip

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, socket_timeout=10)

    def cluster(self, *args: Any) -> Any:
        """``CLUSTER <args>`` on this node."""
        c = self.client()
        try:
            return c.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]
        finally:
            c.close()

    def cluster_info(self) -> dict[str, str]:
        raw = self.cluster("INFO")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return dict(line.split(":", 1) for line in text.split() if ":" in line)


class LocalRedisCluster:
    """*masters* masters (and *replicas* replicas of each) on 127.0.0.1, data under *home*."""

    def __init__(
        self,
        home: Path,
        *,
        masters: int = 3,
        replicas: int = 0,
        node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS,
    ) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        self.home = Path(home)
        self.masters = [self._node(f"m{i}", node_timeout_ms) for i in range(masters)]
        self.replicas = [
            self._node(f"r{i}-{j}", node_timeout_ms)
            for i in range(masters)
            for j in range(replicas)
        ]
        self.replicas_per_master = replicas

    def _node(self, name: str, node_timeout_ms: int) -> ClusterNodeServer:
        base = self.home / name
        return ClusterNodeServer(
            data_dir=base / "data", log_path=base / "valkey.log", node_timeout_ms=node_timeout_ms
        )

    @property
    def nodes(self) -> list[ClusterNodeServer]:
        return [*self.masters, *self.replicas]

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every master as a seed node."""
        seeds = ",".join(f"{n.host}:{n.port}" for n in self.masters)
        return f"redis+cluster://{seeds}/0"

    def start(self, timeout: float = DEFAULT_READY_TIMEOUT) -> LocalRedisCluster:
        try:
            for node in self.nodes:
                node.start()
            if not (self.masters[0].data_dir / "nodes.conf").exists() or not self._formed():
                self._form()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _formed(self) -> bool:
        with contextlib.suppress(redis.RedisError, OSError):
            return int(self.masters[0].cluster_info().get("cluster_slots_assigned", 0)) == SLOTS
        return False

    def _form(self) -> None:
        n = len(self.masters)
        for i, node in enumerate(self.masters):
            first, last = i * SLOTS // n, (i + 1) * SLOTS // n - 1
            node.cluster("ADDSLOTSRANGE", first, last)
        for node in self.nodes[1:]:
            self.masters[0].cluster("MEET", node.host, node.port, node.bus_port)
        if self.replicas:
            everyone = len(self.nodes)
            self._wait_meeting(lambda: all(self._known(r) == everyone for r in self.nodes), 30)
            for i, master in enumerate(self.masters):
                master_id = self._myid(master)
                for j in range(self.replicas_per_master):
                    replica = self.replicas[i * self.replicas_per_master + j]
                    replica.cluster("REPLICATE", master_id)

    @staticmethod
    def _myid(node: ClusterNodeServer) -> str:
        raw = node.cluster("MYID")
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    @staticmethod
    def _known(node: ClusterNodeServer) -> int:
        return int(node.cluster_info().get("cluster_known_nodes", 0))

    def _wait(self, condition: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, OSError):
                if condition():
                    return
            time.sleep(0.1)
        raise ServiceError(f"the Redis Cluster under {self.home} did not form in {timeout:g} s")

    def ready(self) -> bool:
        """Every running node says ``cluster_state:ok`` and knows every node."""
        for node in self.nodes:
            info = node.cluster_info()
            if info.get("cluster_state") != "ok" or int(info["cluster_known_nodes"]) != len(
                self.nodes
            ):
                return False
        return True

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        self._wait_meeting(self.ready, timeout)

    def _wait_meeting(self, condition: Any, timeout: float) -> None:
        """``condition()`` within ``timeout`` s. A node that has not met every other node yet
        is introduced again every few seconds: a handshake that outlasts the node timeout (a
        loaded machine) is dropped by Redis and never tried again on its own."""
        next_meet = time.monotonic() + REMEET_AFTER

        def met_or_meet() -> bool:
            nonlocal next_meet
            if condition():
                return True
            if time.monotonic() >= next_meet:
                next_meet = time.monotonic() + REMEET_AFTER
                self._meet()
            return False

        self._wait(met_or_meet, timeout)

    def _meet(self) -> None:
        """Introduce every node to the first master (one that knows a node already just
        completes one more handshake)."""
        for node in self.nodes[1:]:
            with contextlib.suppress(redis.RedisError, OSError):
                if self._known(node) < len(self.nodes):
                    self.masters[0].cluster("MEET", node.host, node.port, node.bus_port)

    def replicas_in_sync(self) -> bool:
        """Every running replica has its master's link up (it took the initial sync)."""
        for node in self.replicas:
            if not node.running:
                continue
            c = node.client()
            try:
                info = c.info("replication")
            finally:
                c.close()
            if info.get("role") != "slave" or info.get("master_link_status") != "up":
                return False
        return True

    def wait_replicas_in_sync(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        self._wait(self.replicas_in_sync, timeout)

    def replica_of(self, master: ClusterNodeServer) -> ClusterNodeServer:
        """The first replica started for ``master`` (by :meth:`start`)."""
        i = self.masters.index(master)
        if not self.replicas_per_master:
            raise ValueError("this cluster has no replicas")
        return self.replicas[i * self.replicas_per_master]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def flushall(self) -> None:
        """Empty every master (a test of its own on the same cluster)."""
        for node in self.masters:
            c = node.client()
            try:
                c.flushall()
            finally:
                c.close()

    def masters_info(self, section: str) -> list[dict[str, Any]]:
        """``INFO section`` of every master, in order."""
        out = []
        for node in self.masters:
            c = node.client()
            try:
                out.append(dict(c.info(section)))
            finally:
                c.close()
        return out
