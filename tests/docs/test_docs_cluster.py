"""The Redis Cluster page's examples: the demo on a local cluster, and a cluster started by
hand from the bundled valkey-server, crawled by two nodes with the seed list in the crawl's
hash tag."""

from __future__ import annotations

import random
import re
import socket
from pathlib import Path

import pytest
from docshell import Shell, block, free_port

pytestmark = pytest.mark.slow


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(n: int) -> list[int]:
    """n free ports whose cluster bus port (port + 10000) is free too."""
    chosen: list[int] = []
    rng = random.Random()
    while len(chosen) < n:
        port = rng.randrange(20000, 29000)
        if port not in chosen and _free(port) and _free(port + 10000):
            chosen.append(port)
    return chosen


def test_the_demo_on_a_local_cluster(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work")
    try:
        out = sh.run_ok(block("cluster-demo"), timeout=600).output
        assert '"lost": 0' in out and '"duplicates": 0' in out, out[-2000:]
        assert '"masters_used"' in out, out[-2000:]
    finally:
        sh.close()


def test_a_cluster_by_hand_crawled_by_two_nodes(tmp_path: Path) -> None:
    a, b, c = cluster_ports(3)
    ports = {"7000": str(a), "7001": str(b), "7002": str(c), "8000": str(free_port())}
    sh = Shell(tmp_path / "work", ports=ports)
    try:
        sh.run_ok(block("cluster-start"), timeout=180)
        out = sh.run_ok(block("cluster-crawl"), timeout=600).output
        assert re.search(r"stored products\s+100\b", out), out[-3000:] + sh.stderr()
        assert "drained" in out, out[-3000:]
    finally:
        sh.run(block("cluster-stop"), timeout=120)
        sh.close()
