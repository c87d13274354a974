"""Per-site budgets shared by the cluster: the limits a node publishes at its start, and the
adaptive cuts and recoveries the frontier reports back."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import SiteEvent
    from distcrawl.frontier.store import FrontierStore

__all__ = ["log_site_events", "publish_site_limits", "site_limits"]

logger = logging.getLogger(__name__)


def site_limits(
    profiles: Iterable[Any], settings_limits: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per-site limits from site profiles' ``[politeness]``, overridden by
    ``DISTCRAWL_SITE_LIMITS``."""
    limits: dict[str, dict[str, Any]] = {}
    for profile in profiles:
        if profile.politeness:
            for domain in profile.domains:
                limits[domain] = dict(profile.politeness)
    for site, limit in settings_limits.items():
        limits[site] = dict(limit)
    return limits


async def publish_site_limits(
    store: FrontierStore, limits: Mapping[str, Mapping[str, Any]]
) -> None:
    """Write each site's rate and concurrency limit where every node reads it."""
    for site, limit in limits.items():
        rate, conc = limit.get("rate"), limit.get("concurrency")
        await store.set_site_limits(
            site,
            rate=float(rate) if rate is not None else None,
            concurrency=int(conc) if conc is not None else None,
        )
        logger.info("Site budget for %s: rate %s/s, concurrency %s", site, rate, conc)


def log_site_events(events: list[SiteEvent], *, recovery: float, stats: StatsCollector) -> None:
    """One line per adaptive cut of a site's shared rate, and per cut worn off (a cut wears off
    within ``recovery`` s, ``DISTCRAWL_SITE_RECOVERY``)."""
    for site, kind, before, after, detail in events:
        if kind == "cut":
            why = "answered 429/503" if detail == "throttled" else "answered slowly"
            logger.warning(
                "Site %s %s: its shared rate is cut for every node, factor %.3f -> %.3f "
                "(wears off within %.0fs)",
                site,
                why,
                before,
                after,
                (1 - after) * recovery,
            )
            stats.inc_value(stat_keys.SITE_CUTS(detail))
        else:
            logger.info(
                "Site %s is back at its full shared rate (factor was %.3f, cut %.0fs ago)",
                site,
                before,
                float(detail) / 1000,
            )
            stats.inc_value(stat_keys.SITE_RECOVERIES)
