"""The solo handshake in the control slot: which node may hand what it finds to Scrapy from
memory (``solo``: a node id), and how every other node or tool makes the crawl shared first.

The key moves one way only: absent -> a node id (``SET NX`` by a node opening a crawl that
had never held a request) -> "shared", or absent -> "shared". Only the solo node itself, once
it wrote every request it handed out from memory, or a node that found it no live member any
more (recovery took it out of the members), sets "shared" over its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from distcrawl.frontier.batch import text
from distcrawl.frontier.protocol.runner import Step, redis_command

if TYPE_CHECKING:
    from distcrawl.frontier.keys import ControlKeys

__all__ = ["SHARED", "Share", "SoloState", "claim_solo", "end_solo", "share", "solo_state"]

#: the value of ``solo`` once the crawl is shared for good
SHARED = "shared"


class SoloState(NamedTuple):
    """What the solo node reads each round trip: who holds ``solo`` ("" = nobody), and
    whether another node asked it to share the crawl."""

    holder: str
    end_asked: bool


class Share(NamedTuple):
    """The answer to :func:`share`: the crawl is shared (the caller may push and lease), else
    the solo node it waits for; ``took_over``: that node was no live member any more, and the
    caller shared the crawl itself."""

    shared: bool
    holder: str
    took_over: bool = False


def claim_solo(keys: ControlKeys, node: str) -> Step[bool]:
    """``node`` becomes the solo node if nobody claimed ``solo`` and nobody shared it."""
    [won] = yield [redis_command("SET", keys.solo, node, "NX")]
    return bool(won)


def solo_state(keys: ControlKeys) -> Step[SoloState]:
    holder, end = yield [redis_command("GET", keys.solo), redis_command("EXISTS", keys.solo_end)]
    return SoloState(text(holder) if holder is not None else "", bool(int(end)))


def end_solo(keys: ControlKeys) -> Step[None]:
    """The solo node wrote every request it handed out from memory: the crawl is shared."""
    yield [redis_command("SET", keys.solo, SHARED), redis_command("DEL", keys.solo_end)]


def share(keys: ControlKeys, node: str) -> Step[Share]:
    """Make the crawl shared before ``node`` pushes or leases anything: at once if nobody is
    solo; else ask the solo node to end (it shares the crawl after its next round trip) and
    answer whom the caller waits for, unless that node is no live member (not in ``nodes``:
    recovery took it out, or it is ``node`` itself, an earlier run of the same id)."""
    made, holder = yield [
        redis_command("SET", keys.solo, SHARED, "NX"),
        redis_command("GET", keys.solo),
    ]
    name = text(holder) if holder is not None else SHARED
    if made or name == SHARED:
        return Share(True, "")
    if name != node:
        [beat] = yield [redis_command("ZSCORE", keys.nodes, name)]
        if beat is not None:
            yield [redis_command("SET", keys.solo_end, node)]
            return Share(False, name)
    yield [redis_command("SET", keys.solo, SHARED)]
    return Share(True, name, took_over=True)
