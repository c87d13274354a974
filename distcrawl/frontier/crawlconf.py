"""The crawl's record of its crawl-wide settings: written by the first node that starts (a
hash in the control slot, :attr:`~distcrawl.frontier.keys.FrontierKeys.config`), compared by
every later node and by the operator commands that depend on it.

The record maps a setting's name to its value as text (the registry's form; ``-`` for a
setting not in effect, such as the Bloom filter's size on an exact dupefilter). Fields whose
name starts with ``_`` describe the record (``_by``: the node that wrote it; ``_started``: when,
in ms of that node's clock, the clock its products' ``last_seen`` is written in: the start of
this crawl, from which ``status`` counts the products it stored). It is written
once per crawl: one HSETNX per field, then HGETALL, in one pipeline on one key (one slot on
a Redis Cluster). Each field keeps the first value written to it, and every node compares
every field it has, so no two nodes ever run with different values, even when two start at
the same moment (both may then refuse, if they differ). No MULTI: redis-py's asyncio cluster
client cannot run a pipeline after a transaction. ``control reset`` deletes the record with
the rest of the crawl when no live node remains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from distcrawl.base.names.commands import RESET_CRAWL

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys

__all__ = [
    "BY",
    "NOT_IN_EFFECT",
    "STARTED",
    "Mismatch",
    "differences",
    "layout",
    "read",
    "record",
    "refusal",
    "started_ms",
]

#: the recorded value of a crawl-wide setting that does not apply to the crawl
NOT_IN_EFFECT = "-"
#: the record's field naming the node that wrote it
BY = "_by"
#: the record's field saying when it was written (ms): when the crawl's first node started
STARTED = "_started"


class Mismatch(NamedTuple):
    """A crawl-wide setting whose value here differs from the crawl's record."""

    name: str
    here: str
    crawl: str


def differences(recorded: Mapping[str, str], mine: Mapping[str, str]) -> list[Mismatch]:
    """The settings of *mine* that the record holds with another value, in *mine*'s order."""
    return [
        Mismatch(name, value, recorded[name])
        for name, value in mine.items()
        if not name.startswith("_") and name in recorded and recorded[name] != value
    ]


def refusal(mismatch: Mismatch, keys: FrontierKeys, recorded: Mapping[str, str]) -> str:
    """One line saying which setting differs, both values, and the two ways out."""
    name, here, crawl = mismatch
    by = recorded.get(BY)
    where = f"recorded by node {by} in {keys.config}" if by else f"recorded in {keys.config}"
    mine = "is not in effect here" if here == NOT_IN_EFFECT else f"is {_shown(here)} here"
    if crawl == NOT_IN_EFFECT:
        theirs, fix = f"it is not in effect in crawl {keys.spider}", f"leave {name} out here"
    else:
        theirs = f"crawl {keys.spider} runs with {_shown(crawl)}"
        fix = f"set {name}={crawl} here"
    return (
        f"{name} {mine}, but {theirs} ({where}): {fix}, or stop every node and "
        f"`{RESET_CRAWL.line(spider=keys.spider)}` to start the crawl over"
    )


def _shown(value: str) -> str:
    return value if value else "empty"


async def record(
    client: Any, keys: FrontierKeys, values: Mapping[str, str], *, by: str, at_ms: int
) -> dict[str, str]:
    """Record *values* where the crawl has none yet (the first node's win), with the node's
    name and the time (*at_ms*); the record."""
    pipe = client.pipeline(transaction=False)
    for name, value in {**values, BY: by, STARTED: str(at_ms)}.items():
        pipe.hsetnx(keys.config, name, value)
    pipe.hgetall(keys.config)
    replies = await pipe.execute()
    return _text(replies[-1])


def read(client: Any, keys: FrontierKeys) -> dict[str, str]:
    """The crawl's record (empty before its first node started), with a blocking client."""
    return _text(client.hgetall(keys.config))


def started_ms(value: Any) -> int | None:
    """The record's start time (ms) from its raw field, None when absent or not a number."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _text(reply: Mapping[Any, Any]) -> dict[str, str]:
    def text(v: Any) -> str:
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)

    return {text(k): text(v) for k, v in reply.items()}


def layout(keys: FrontierKeys) -> dict[str, str]:
    """The crawl-wide settings an operator command depends on: where the crawl's keys are."""
    return {"DISTCRAWL_SHARDS": str(keys.shards), "DISTCRAWL_START_URLS_KEY": keys.start_urls}
