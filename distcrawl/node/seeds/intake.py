"""Seed intake: raw entries of the start list made into requests, or refused with a reason.

A refused seed (not a URL, a host that is not allowed, a spider that would not make a request
of it) is logged with its reason, counted as ``frontier/seeds/refused/<reason>`` and kept as a
rejection record (the control slot's rejected list), so that nothing is silently dropped.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import reasons
from distcrawl.base.names import stats as stat_keys
from distcrawl.node.seeds.parse import BadSeed, parse_seed, refusal_hint
from distcrawl.node.seeds.sources import seed_requests

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

__all__ = ["SeedIntake", "rejection_record"]

logger = logging.getLogger("distcrawl.node.scheduler")  # the node's log lines, as before

#: characters of a refused entry kept in its rejection record
MAX_REJECTED_RAW = 2048


def rejection_record(raw: bytes | str, reason: str, *, kind: str, node: str) -> str:
    """The JSON record of a refused seed or queue entry (``kind``) for the rejected list."""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    return json.dumps(
        {
            "kind": kind,
            "raw": text[:MAX_REJECTED_RAW],
            "reason": reason,
            "node": node,
            "at": time.time(),
        }
    )


class SeedIntake:
    """Makes the requests of raw seeds with the spider's ``make_request_from_seed`` (the
    catalog spider), or as scrapy-redis' ``make_request_from_data`` would (any other spider)."""

    def __init__(
        self,
        spider: Spider,
        *,
        node_id: str,
        allow_private: bool | frozenset[str],
        stats: StatsCollector,
    ) -> None:
        self.spider = spider
        self.node_id = node_id
        self.allow_private = allow_private
        self.stats = stats

    def read(self, raws: Iterable[bytes | str]) -> tuple[list[Request], list[str]]:
        """The requests the seeds make, in order, and the rejection records of those
        refused."""
        requests: list[Request] = []
        rejected: list[str] = []
        make: Any = getattr(self.spider, "make_request_from_seed", None)
        for raw in raws:
            try:
                if make is None:
                    requests += seed_requests(self.spider, raw, allow_private=self.allow_private)
                    continue
                seed = parse_seed(raw, allow_private=self.allow_private)
                try:
                    request = make(seed)
                except Exception as exc:
                    logger.exception("The spider could not make a request from seed %s", seed.url)
                    raise BadSeed(reasons.SPIDER_REFUSED, str(exc)[:100]) from None
                if request is None:
                    raise BadSeed(reasons.SPIDER_REFUSED)
            except BadSeed as exc:
                shown = (
                    raw[:200].decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
                )
                logger.warning("Refused seed %r: %s%s", shown, exc, refusal_hint(exc.reason))
                self.stats.inc_value(stat_keys.SEEDS_REFUSED(exc.reason))
                rejected.append(rejection_record(raw, exc.reason, kind="seed", node=self.node_id))
                continue
            requests.append(request)
        return requests, rejected
