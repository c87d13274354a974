"""The local Redis Cluster the demo and the tests start: it forms even when Redis drops a
handshake (a node introduced once and never met is introduced again)."""

from __future__ import annotations

from pathlib import Path

from distcrawl.servers.cluster import SLOTS, LocalRedisCluster


def test_nodes_never_introduced_are_introduced_until_the_cluster_forms(tmp_path: Path) -> None:
    cluster = LocalRedisCluster(tmp_path, masters=3)
    try:
        # every node up and its slots assigned, but no MEET: what a dropped handshake leaves
        for node in cluster.nodes:
            node.start()
        n = len(cluster.masters)
        for i, node in enumerate(cluster.masters):
            node.cluster("ADDSLOTSRANGE", i * SLOTS // n, (i + 1) * SLOTS // n - 1)
        assert not cluster.ready()
        cluster.wait_ready()
        assert cluster.ready()
        for node in cluster.nodes:
            assert cluster._known(node) == 3
    finally:
        cluster.stop()
