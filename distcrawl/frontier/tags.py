"""Where a crawl's shards lie in a Redis Cluster's hash slots: each shard's hash tag, chosen so
that the shards spread evenly over equal slot ranges (every node and tool computes the same)."""

from __future__ import annotations

import binascii
from functools import lru_cache

__all__ = ["CLUSTER_SLOTS", "shard_tags"]

#: hash slots of a Redis Cluster (a key's slot: CRC16 of its hash tag, modulo this)
CLUSTER_SLOTS = 16384


#: digits of the suffix that places a shard's hash tag on its slot
_SUFFIX_DIGITS = 5


@lru_cache(maxsize=64)
def shard_tags(spider: str, shards: int) -> tuple[str, ...]:
    """The hash tags of the ``shards`` shards of ``spider``'s crawl, spread evenly over the
    hash slots: shard k's tag is ``spider:k.ddddd``, the five digits chosen so that its slot
    (CRC16 % 16384, as Redis Cluster computes it) is the middle of the k-th of ``shards``
    equal slot ranges (or the slot nearest it that a suffix reaches).

    A cluster whose M masters hold equal slot ranges (as ``redis-cli --cluster create`` and
    :class:`~distcrawl.servers.cluster.LocalRedisCluster` assign them) so holds S // M or
    S // M + 1 shards on every master (plain ``spider:k`` tags put 8 of 16 shards on one of
    3 masters). Every node and tool computes the same tags; a one-shard crawl has the control
    slot's tag, ``spider``."""
    if shards == 1:
        return (spider,)
    table = _suffix_table()
    zeros = bytes(_SUFFIX_DIGITS)
    tags = []
    for k in range(shards):
        base = f"{spider}:{k}."
        # CRC16 is linear: crc(base + x) = crc(x) ^ crc(zeros, from the register after base)
        shift = binascii.crc_hqx(
            zeros, binascii.crc_hqx(base.encode("utf-8", "surrogateescape"), 0)
        )
        middle = (2 * k + 1) * CLUSTER_SLOTS // (2 * shards)
        tags.append(base + _nearest(table, middle, shift))
    return tuple(tags)


def _nearest(table: dict[int, str], slot: int, shift: int) -> str:
    """The suffix whose tag's slot is ``slot``, else the nearest one reached."""
    for d in range(CLUSTER_SLOTS):
        for target in (slot + d, slot - d):
            suffix = table.get((target % CLUSTER_SLOTS) ^ (shift % CLUSTER_SLOTS))
            if suffix is not None:
                return suffix
    raise AssertionError("the suffix table reaches no slot")  # pragma: no cover


@lru_cache(maxsize=1)
def _suffix_table() -> dict[int, str]:
    """The low 14 bits of the CRC16 of each five-digit suffix -> the least such suffix (covers
    98 % of the 16,384 values)."""
    # CRC16 from register 0 is linear in the message: a suffix's CRC is the XOR of what each
    # of its digits gives at its position with zero bytes elsewhere (100,000 XORs, not CRCs)
    crcs = [0]
    for position in range(_SUFFIX_DIGITS):
        digits = [
            binascii.crc_hqx(bytes(position) + d + bytes(_SUFFIX_DIGITS - position - 1), 0)
            for d in (str(i).encode() for i in range(10))
        ]
        crcs = [c ^ d for c in crcs for d in digits]
    table: dict[int, str] = {}
    for n, crc in enumerate(crcs):
        table.setdefault(crc % CLUSTER_SLOTS, f"{n:0{_SUFFIX_DIGITS}d}")
    return table
