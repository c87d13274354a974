"""The seed slot's keys: the hash tag of the seed list's slot (:func:`seed_slot_prefix`) and the
keys beside the seed list in it (:class:`SeedKeys`), part of the key schema of
:mod:`distcrawl.frontier.keys`."""

from __future__ import annotations

from dataclasses import dataclass

from distcrawl.base.identifiers import BadName, seed_list_problem
from distcrawl.frontier.schema import SEEDS, Key, KeyOf

__all__ = ["SeedKeys", "seed_slot_prefix"]


def seed_slot_prefix(start_key: str) -> str:
    """The hash tag that puts a key in the same slot as the seed list *start_key*, wherever
    that name hashes: its own hash tag if it has one (``{catalog}:start_urls``: ``{catalog}``),
    else the whole name (``catalog:start_urls``: ``{catalog:start_urls}``), as Redis Cluster
    hashes a key without one. :class:`BadName` for a name no seed list may have."""
    problem = seed_list_problem(start_key)
    if problem:
        raise BadName(problem)
    opening = start_key.find("{")
    if opening != -1:
        closing = start_key.find("}", opening + 1)
        if closing > opening + 1:
            return start_key[opening : closing + 1]
    return "{" + start_key + "}"


@dataclass(frozen=True)
class SeedKeys:
    """The keys beside the seed list, in its slot (``prefix``: see :func:`seed_slot_prefix`),
    so that a seed moves between them and the list atomically wherever the list hashes, the
    documented ``<spider>:start_urls`` on a Redis Cluster too. A seed leaves the list for a
    node's ``taken`` list; it leaves that list once its requests are in the crawl's shards."""

    SLOT = SEEDS

    prefix: str

    @classmethod
    def of(cls, start_key: str) -> SeedKeys:
        return cls(seed_slot_prefix(start_key))

    taken = KeyOf(
        "taken:<node>",
        "LIST",
        """raw seeds the node took from the seed list and has not put into the crawl yet (first
        taken first); dropped once the requests they make are in the shards""",
    )
    returned = Key(
        "returned",
        "LIST",
        """raw seeds given back by a node that stopped or died holding them: they may be in the
        crawl already, so they are taken first and their requests go through the dupefilter (a
        repeat is harmless)""",
    )
    staged = Key(
        "staged",
        "LIST",
        """seeds of a scrapy-redis set or sorted set (REDIS_START_URLS_AS_SET / _AS_ZSET) moved
        here first, so that a node killed while taking them loses none: the seed list then""",
    )
