"""Sites and their shared budget as the status shows them: the limits in force (the site's own,
else the defaults the nodes lease with), the rate allowed now (the adaptive factor applied),
requests in flight and waiting, and responses per minute."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from distcrawl.base.durations import short_duration
from distcrawl.base.names import status as words
from distcrawl.base.rates import is_number
from distcrawl.frontier.keys import (
    SITE_CUT_CAUSE_FIELD,
    SITE_DELAY_SOURCE_FIELD,
    SITE_HOLD_CAUSE_FIELD,
)
from distcrawl.frontier.store import DEFAULT_SITE_RECOVERY, effective_factor
from distcrawl.ops.reads import Batch, Plan

if TYPE_CHECKING:
    from distcrawl.frontier.keys import FrontierKeys, ShardKeys

__all__ = [
    "DEFAULT_LIMIT",
    "SITE_LIMIT",
    "TOP_SITES",
    "SitesPage",
    "cut_of",
    "delay_of",
    "explain_cut",
    "explain_delay",
    "hold_of",
    "in_flight_reads",
    "published_site_rates",
    "site_budget",
    "site_rows",
    "slowest",
]

#: the status lists this many sites at most; per-site keys are read for these only
TOP_SITES = 20


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def in_flight_reads(batch: Batch, sites: Iterable[tuple[ShardKeys, str]]) -> None:
    """Add to *batch* the reads of the requests in flight of *sites*: one HMGET per shard's
    ``active`` hash (read back with :func:`in_flight_of`)."""
    by_shard: dict[str, list[str]] = {}
    for shard, site in sites:
        by_shard.setdefault(shard.active, []).append(site)
    for key, names in by_shard.items():
        batch.add(("active", key, tuple(names)), "hmget", key, names)


def in_flight_of(got: Mapping[Any, Any]) -> dict[str, Any]:
    """Site -> its requests in flight (raw), from the replies of :func:`in_flight_reads`."""
    out: dict[str, Any] = {}
    for name, values in got.items():
        if isinstance(name, tuple) and name[0] == "active":
            out.update(zip(name[2], values, strict=True))
    return out


def site_budget(fields: Any, active: Any) -> dict[str, str]:
    """A site's budget fields as :func:`site_rows` reads them: its budget hash, and
    ``active`` (its requests in flight, kept per shard)."""
    out = {_text(k): _text(v) for k, v in (fields or {}).items()}
    out["active"] = _text(active) if active is not None else "0"
    return out


def published_site_rates(infos: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Pages per minute per site, summed over what the live nodes' heartbeats publish
    (``info.sites``: their busiest sites as ``[site, pages per minute]``); a malformed entry is
    skipped."""
    rates: dict[str, float] = {}
    for info in infos:
        published = info.get("sites")
        for entry in published if isinstance(published, list) else []:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                continue
            if not is_number(entry[1]) or entry[1] <= 0:
                continue
            rates[entry[0]] = rates.get(entry[0], 0.0) + float(entry[1])
    return rates


def cut_of(fields: Mapping[str, str], factor: float, now_ms: float) -> dict[str, Any] | None:
    """Why a site runs below its rate, None when it does not: the cause of its latest cut
    (:data:`~distcrawl.base.names.status.CUT_CAUSES`), when it was cut, the factor now and the
    seconds until the cut has worn off at the latest (fine answers end it sooner, another
    push-back later), and one line saying all of it."""
    if factor >= 1.0:
        return None
    cause = fields.get(SITE_CUT_CAUSE_FIELD) or words.UNKNOWN_CAUSE
    if cause not in words.CUT_CAUSES:
        cause = words.UNKNOWN_CAUSE
    at = float(fields.get("cut_at") or fields.get("fts") or 0) or None
    recover_ms = float(fields.get("recover_ms") or DEFAULT_SITE_RECOVERY * 1000)
    cut: dict[str, Any] = {
        "cause": cause,
        "at_ms": int(at) if at is not None else None,
        "since_s": round(max(0.0, now_ms - at) / 1000, 1) if at is not None else None,
        "factor": round(factor, 3),
        "wears_off_in_s": round((1.0 - factor) * recover_ms / 1000, 1),
    }
    cut["why"] = explain_cut(cut)
    return cut


def hold_of(fields: Mapping[str, str], now_ms: float) -> dict[str, Any] | None:
    """Why no request of a site starts now, None when it is not held: the cause of its hold
    (:data:`~distcrawl.base.names.status.HOLD_CAUSES`), the seconds it still lasts, and one
    line saying it."""
    until = float(fields.get("hold_until") or 0)
    if until <= now_ms:
        return None
    cause = fields.get(SITE_HOLD_CAUSE_FIELD) or words.UNKNOWN_CAUSE
    if cause not in words.HOLD_CAUSES:
        cause = words.UNKNOWN_CAUSE
    left = round((until - now_ms) / 1000, 1)
    return {
        "cause": cause,
        "ends_in_s": left,
        "why": f"held ({cause}): {short_duration(left)} left",
    }


def delay_of(fields: Mapping[str, str]) -> tuple[float | None, str | None]:
    """The Crawl-delay in force for a site (seconds; None: none) and where it came from
    (:data:`~distcrawl.base.names.status.DELAY_SOURCES`)."""
    delay = float(fields.get("delay_ms") or 0) / 1000
    if delay <= 0:
        return None, None
    source = fields.get(SITE_DELAY_SOURCE_FIELD) or words.ROBOTS_TXT_DELAY
    return delay, source


def explain_delay(delay: float, source: str) -> str:
    """``Crawl-delay 2s (robots_txt): one request at a time, 2s after the last``."""
    return (
        f"Crawl-delay {delay:g}s ({source}): one request at a time for the cluster, "
        f"{delay:g}s after the last"
    )


def explain_cut(cut: Mapping[str, Any]) -> str:
    """``throttled 1m20s ago: rate at 47%, full again within 4m10s``."""
    when = "" if cut["since_s"] is None else f" {short_duration(cut['since_s'])} ago"
    return (
        f"{cut['cause']}{when}: rate at {cut['factor']:.0%}, full again within "
        f"{short_duration(cut['wears_off_in_s'])}"
    )


#: where a site's limit in force comes from: its own (``DISTCRAWL_SITE_LIMITS``), or the
#: defaults the live nodes lease with (``DISTCRAWL_SITE_RATE``, ``DISTCRAWL_SITE_CONCURRENCY``)
SITE_LIMIT, DEFAULT_LIMIT = "site", "default"


def _in_force(own: str | None, default: float | None) -> tuple[float | None, str | None]:
    """A limit in force and where it comes from; (None, None): no limit."""
    if own:
        return float(own), SITE_LIMIT
    if default:
        return float(default), DEFAULT_LIMIT
    return None, None


def site_rows(
    budgets: Mapping[str, Mapping[str, str]],
    waiting: Mapping[str, int],
    rates: Mapping[str, float] | None = None,
    now_ms: float | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each busy site's shared budget: its limits in force (its own, else the nodes'
    *defaults*, as :func:`~distcrawl.ops.status.site_defaults` gives them; ``limit_rate_from``
    and ``limit_concurrency_from`` say which), the rate it is allowed now (the rate limit, or
    for a site without one the rate its cut applies to, times the adaptive factor, cut when
    the site pushes back and wearing off with time), requests in flight and waiting, and
    responses per minute; the top :data:`TOP_SITES`, most waiting first.

    A cut wears off with time: it is read at *now_ms*, the snapshot's server time (a reader
    that has none uses its own clock, near enough for a display).
    """
    rates = rates or {}
    defaults = defaults or {}
    now = now_ms if now_ms is not None else time.time() * 1000
    out: list[dict[str, Any]] = []
    for site in sorted(set(budgets) | set(waiting)):
        fields = budgets.get(site, {})
        factor = effective_factor(dict(fields), now)
        limit, limit_from = _in_force(fields.get("limit_rate"), defaults.get("rate"))
        conc, conc_from = _in_force(fields.get("limit_conc"), defaults.get("concurrency"))
        base = limit if limit is not None else float(fields.get("base_rate") or 0) or None
        if factor >= 1.0 and limit is None:
            base = None  # no limit and no cut: as fast as the site answers
        in_flight = int(fields.get("active") or 0)
        queued = int(waiting.get(site, 0))
        rate = float(rates.get(site, 0.0))
        hold = hold_of(fields, now)
        if not (in_flight or queued or rate or factor < 1.0 or hold):
            continue  # not busy
        delay, source = delay_of(fields)
        out.append(
            {
                "cut": cut_of(fields, factor, now),
                "hold": hold,
                "crawl_delay_s": delay,
                "delay_source": source,
                "slower_because": _slower(cut_of(fields, factor, now), hold, delay, source),
                "site": site,
                "limit_rate": limit,
                "limit_rate_from": limit_from,
                "limit_concurrency": int(conc) if conc is not None else None,
                "limit_concurrency_from": conc_from,
                "factor": round(factor, 3),
                "allowed_rate": round(base * factor, 2) if base is not None else None,
                "in_flight": in_flight,
                "waiting": queued,
                "responses_per_min": round(rate, 1),
            }
        )
    out.sort(key=lambda s: (-s["waiting"], -s["in_flight"], -s["responses_per_min"]))
    return out[:TOP_SITES]


def _slower(
    cut: Mapping[str, Any] | None,
    hold: Mapping[str, Any] | None,
    delay: float | None,
    source: str | None,
) -> str:
    """Every reason a site runs slower than its limit, in one line ("" for none)."""
    parts = [hold["why"]] if hold else []
    if delay is not None and source is not None:
        parts.append(explain_delay(delay, source))
    if cut:
        parts.append(cut["why"])
    return "; ".join(parts)


class SitesPage:
    """One page of the sites waiting for their budget, the one waiting longest first."""

    def __init__(self, total: int, rows: list[dict[str, Any]]) -> None:
        self.total = total
        self.rows = rows


def slowest(
    keys: FrontierKeys, page: int, per_page: int, *, defaults: Mapping[str, Any] | None = None
) -> Plan[SitesPage]:
    """Page *page* (from 0) of every site waiting for its budget, longest waiting first:
    each shard's longest-waiting sites down to this page, merged (a bounded read); *defaults*
    as :func:`site_rows` takes them."""
    shards = keys.all_shards()
    batch = Batch()
    for shard in shards:
        batch.add(("sites", shard.index), "zcard", shard.waiting)
        batch.add(("top", shard.index), "zrevrange", shard.waiting, 0, (page + 1) * per_page - 1,
                  withscores=True)  # fmt: skip
    got = yield batch
    total = sum(int(got[("sites", shard.index)]) for shard in shards)
    ranked = sorted(
        (
            (float(score), _text(site))
            for shard in shards
            for site, score in got[("top", shard.index)]
        ),
        reverse=True,
    )
    sites = [site for _, site in ranked[page * per_page : (page + 1) * per_page]]
    if not sites:
        return SitesPage(total, [])
    batch = Batch()
    for site in sites:
        batch.add(("budget", site), "hgetall", keys.site(site))
        batch.add(("waiting", site), "zcard", keys.wait(site))
    in_flight_reads(batch, ((keys.site_keys(site), site) for site in sites))
    got = yield batch
    in_flight = in_flight_of(got)
    budgets = {site: site_budget(got[("budget", site)], in_flight.get(site)) for site in sites}
    waiting = {site: int(got[("waiting", site)]) for site in sites}
    rows = site_rows(budgets, waiting, defaults=defaults)
    order = {site: i for i, site in enumerate(sites)}
    rows.sort(key=lambda r: order.get(r["site"], 0))
    return SitesPage(total, rows)
