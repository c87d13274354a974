"""A node's crawl-wide settings as the crawl records them, and the check at start: the first
node records them (:mod:`distcrawl.frontier.crawlconf`); a later node that differs refuses to
start, naming the setting and both values."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.config import SETTINGS
from distcrawl.base.config.kinds import show_duration
from distcrawl.frontier import crawlconf
from distcrawl.frontier.crawlconf import NOT_IN_EFFECT, Mismatch

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys
    from distcrawl.frontier.store import Dupefilter
    from distcrawl.node.revisit.schedule import RevisitPolicy
    from distcrawl.node.scheduler.outage import StartWait

__all__ = [
    "REFUSED_REASON",
    "CrawlSettingsDiffer",
    "admit",
    "check_crawl_settings",
    "crawl_wide_values",
]

logger = logging.getLogger(__name__)

#: the close reason (and ``finish_reason``) of a node that refused to start
REFUSED_REASON = "crawl_settings_differ"

_BLOOM = ("DISTCRAWL_BLOOM_CAPACITY", "DISTCRAWL_BLOOM_ERROR_RATE")
_REVISIT = (
    "DISTCRAWL_REVISIT_MAX_BACKOFF",
    "DISTCRAWL_REVISIT_BACKOFF",
    "DISTCRAWL_REVISIT_EARLY",
    "DISTCRAWL_REVISIT_FORGET",
)


#: a setting -> the settings in effect only with one of its values (revisit mode, a Bloom
#: filter): where it differs, theirs differ because of it, and are not told apart
_DEPENDS = {"DISTCRAWL_REVISIT": _REVISIT, "DISTCRAWL_DUPEFILTER": _BLOOM}


def explained(differ: list[Mismatch]) -> list[Mismatch]:
    """*differ* without the differences another one explains: a node in revisit mode in a
    crawl without it differs in the revisit mode, not in the revisit backoff it never set."""
    follows = {name for m in differ for name in _DEPENDS.get(m.name, ())}
    return [m for m in differ if not (m.name in follows and NOT_IN_EFFECT in (m.here, m.crawl))]


class CrawlSettingsDiffer(RuntimeError):
    """This node's crawl-wide settings differ from the crawl's record."""


def crawl_wide_values(
    settings: Any,
    keys: FrontierKeys,
    dupefilter: Dupefilter,
    revisit: RevisitPolicy | None,
) -> dict[str, str]:
    """Every crawl-wide setting as this node runs it, as text: the shards and seed list of
    *keys*, the *dupefilter* and *revisit* policy in effect (``-`` for what is not)."""
    values = {s.name: SETTINGS.shown(settings, s.name) for s in SETTINGS.crawl_wide()}
    values["DISTCRAWL_SHARDS"] = str(keys.shards)
    values["DISTCRAWL_START_URLS_KEY"] = keys.start_urls
    values["DISTCRAWL_DUPEFILTER"] = dupefilter.kind
    if dupefilter.kind == "bloom":
        values["DISTCRAWL_BLOOM_CAPACITY"] = str(dupefilter.capacity)
        values["DISTCRAWL_BLOOM_ERROR_RATE"] = f"{dupefilter.error_rate:g}"
    else:
        values.update(dict.fromkeys(_BLOOM, NOT_IN_EFFECT))
    if revisit is None:
        values["DISTCRAWL_REVISIT"] = NOT_IN_EFFECT
        values.update(dict.fromkeys(_REVISIT, NOT_IN_EFFECT))
    else:
        values["DISTCRAWL_REVISIT_MAX_BACKOFF"] = f"{revisit.max_backoff:g}"
        values["DISTCRAWL_REVISIT_BACKOFF"] = f"{revisit.backoff:g}"
        values["DISTCRAWL_REVISIT_EARLY"] = f"{revisit.early:g}"
        values["DISTCRAWL_REVISIT_FORGET"] = show_duration(revisit.forget_ms / 1000)
    return values


async def check_crawl_settings(
    client: Any, keys: FrontierKeys, values: dict[str, str], *, node_id: str
) -> None:
    """Record *values* if this node is the crawl's first; else compare them with the record.
    A difference is logged (one ERROR line per setting) and raised."""
    at_ms = int(time.time() * 1000)  # the clock the node's products' last_seen is in
    recorded = await crawlconf.record(client, keys, values, by=node_id, at_ms=at_ms)
    differ = explained(crawlconf.differences(recorded, values))
    for mismatch in differ:
        logger.error("Node refuses to start: %s", crawlconf.refusal(mismatch, keys, recorded))
    if differ:
        raise CrawlSettingsDiffer(", ".join(m.name for m in differ))


async def admit(
    client: Any,
    keys: FrontierKeys,
    settings: Any,
    dupefilter: Dupefilter,
    revisit: RevisitPolicy | None,
    *,
    node_id: str,
    start: StartWait,
) -> bool:
    """Whether the node may join the crawl: its crawl-wide settings recorded (the crawl's
    first node) or equal to the record; False, with the ERROR lines logged, when they differ.
    Redis out of reach is waited out within the node's *start*, as every call at start is."""
    values = crawl_wide_values(settings, keys, dupefilter, revisit)
    try:
        await start.run(lambda: check_crawl_settings(client, keys, values, node_id=node_id))
    except CrawlSettingsDiffer:
        return False
    return True
