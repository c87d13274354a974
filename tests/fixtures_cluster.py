"""A real 3-master Redis Cluster on loopback (valkey-server, ``--cluster-enabled yes``), started
once per test module by :class:`distcrawl.servers.cluster.LocalRedisCluster` and stopped after it.

- ``redis_cluster``: the running :class:`~distcrawl.servers.cluster.LocalRedisCluster`
  (``.masters``, ``.url``, ``.wait_ready()``, per node ``.kill()`` / ``.start()``).
- ``redis_cluster_url``: its ``redis+cluster://`` URL, every master running and emptied.
- ``redis_cluster_with_replicas``: a fresh cluster of 3 masters with a replica each (for a
  failover test), its replicas in sync, stopped after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from distcrawl.servers.cluster import LocalRedisCluster


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisCluster]:
    cluster = LocalRedisCluster(tmp_path_factory.mktemp("redis-cluster"), masters=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_url(redis_cluster: LocalRedisCluster) -> str:
    """The URL of the running, empty cluster (a test that stopped a master gets it back)."""
    for node in redis_cluster.nodes:
        if not node.running:
            node.start()
    redis_cluster.wait_ready()
    redis_cluster.flushall()
    return redis_cluster.url


@pytest.fixture
def redis_cluster_with_replicas(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    cluster = LocalRedisCluster(tmp_path / "redis-cluster-replicas", masters=3, replicas=1)
    cluster.start()
    try:
        cluster.wait_replicas_in_sync()
        yield cluster
    finally:
        cluster.stop()
