"""Page kinds in the queue: each kind's band of priorities, the band of a priority (a queue's
levels), and the order scores of a band (a site's waiting room)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from distcrawl.base.config import SETTINGS
from distcrawl.frontier.protocol.spec import SCORE_SPAN

__all__ = ["DEFAULT_PAGE_PRIORITIES", "Band", "band_of", "priority_bands", "score_range"]

#: queue priority per page kind: the default of the setting ``PAGE_PRIORITIES``
DEFAULT_PAGE_PRIORITIES: Mapping[str, int] = SETTINGS.default("PAGE_PRIORITIES")
#: ``(page kind, lowest priority, highest priority + 1)``; None: open on that side
Band = tuple[str, int | None, int | None]


def priority_bands(page_priorities: Mapping[str, int]) -> list[Band]:
    """Each page kind's band of priorities, highest first.

    A kind's band reaches halfway to its neighbours, so a retry (priority lowered by
    ``RETRY_PRIORITY_ADJUST``) or a JSON seed with its own priority still counts under the
    nearest kind; the top band is open above and the bottom one open below (``None``).
    """
    kinds = sorted(page_priorities.items(), key=lambda kv: -kv[1])
    bands: list[Band] = []
    upper: int | None = None
    for i, (kind, prio) in enumerate(kinds):
        if i + 1 < len(kinds):
            lower: int | None = math.ceil((prio + kinds[i + 1][1]) / 2)
        else:
            lower = None
        bands.append((kind, lower, upper))
        upper = lower
    return bands


def band_of(bands: list[Band], priority: int) -> str:
    """The page kind whose band holds ``priority``."""
    for kind, low, high in bands:
        if (low is None or priority >= low) and (high is None or priority < high):
            return kind
    raise ValueError(f"no band holds priority {priority}")  # pragma: no cover - bands cover all


def score_range(low: int | None, high: int | None) -> tuple[str, str]:
    """ZCOUNT bounds of the queue entries whose priority p satisfies ``low <= p < high``.

    With score = -p * SCORE_SPAN + seq and 0 < seq < SCORE_SPAN,
    ``floor(score / SCORE_SPAN) == -p``.
    """
    span = int(SCORE_SPAN)
    top = "+inf" if low is None else f"({-(low - 1) * span}"
    bottom = "-inf" if high is None else f"({-(high - 1) * span}"
    return bottom, top
