"""Site budgets from Python: a token for a request outside the queue, per-site limits, what a
site's robots.txt asks (its Crawl-delay, a hold while it cannot be read), and a site's adaptive
factor as the library computes it."""

from __future__ import annotations

from typing import Any

from distcrawl.frontier.batch import SiteBudget
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.frontier.protocol.runner import Step, shard_call

__all__ = ["effective_factor", "set_site_limits", "set_site_robots", "take_token"]


def effective_factor(fields: dict[str, Any], now_ms: float) -> float:
    """A site's adaptive factor at server time *now_ms*, from its ``site:<site>`` hash
    (decoded): the stored cut, worn off linearly since it was set (``site_factor`` in the
    library; a factor without the time it was set or its recovery counts as over)."""
    factor, since, recover_ms = fields.get("factor"), fields.get("fts"), fields.get("recover_ms")
    if not factor or not since or not recover_ms:
        return 1.0
    cut = float(factor)
    if float(recover_ms) > 0:
        cut += (now_ms - float(since)) / float(recover_ms)
    return min(1.0, cut)


def take_token(keys: FrontierKeys, site: str, budget: SiteBudget, debt: bool) -> Step[int]:
    """A token of ``site`` for a request outside the queue: 0 (spent, go now) or the ms to wait
    before asking again (with ``debt``, a robots.txt fetch, only a Retry-After hold waits)."""
    call = shard_call(
        keys,
        keys.shard_of(site),
        "take_token",
        site=site,
        rate=budget.rate,
        burst=budget.burst,
        debt="1" if debt else "0",
    )
    [value] = yield [call]
    return int(value)


def set_site_robots(
    keys: FrontierKeys,
    site: str,
    *,
    delay_ms: int | None,
    source: str,
    hold_ms: int | None,
    why: str,
) -> Step[Any]:
    """What ``site``'s robots.txt asks: its Crawl-delay (0: none; None: unchanged) and where it
    came from; a hold of ``hold_ms`` for ``why`` (0: end a hold of that cause; None:
    unchanged)."""
    call = shard_call(
        keys,
        keys.shard_of(site),
        "set_site_robots",
        site=site,
        delay="" if delay_ms is None else int(delay_ms),
        source=source,
        hold="" if hold_ms is None else int(hold_ms),
        why=why,
    )
    [value] = yield [call]
    return value


def set_site_limits(
    keys: FrontierKeys, site: str, rate: float | None, concurrency: int | None
) -> Step[Any]:
    """Per-site limits that override the defaults for every node (None = remove)."""
    call = shard_call(
        keys,
        keys.shard_of(site),
        "set_site_limits",
        site=site,
        rate="" if rate is None else rate,
        conc="" if concurrency is None else concurrency,
    )
    [value] = yield [call]
    return value
