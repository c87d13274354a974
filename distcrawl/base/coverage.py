"""Field coverage per site: how many of a site's stored products hold each field, over the
whole crawl and over its last products (a window), and the findings a fall of a share makes.

A site's figures are kept as running counts (products, and products holding each field) with
*marks*: the counts as they stood each time the products passed a multiple of a quarter of the
window. The counts since the newest mark at least a window back are the window's; the counts
at that mark are everything before it. Figures of that shape come from any number of nodes
adding their counts in any order: the frontier keeps one per site, and every reader derives
the same shares from it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distcrawl.base.names import observe as words

__all__ = [
    "MIN_Z",
    "Baseline",
    "Finding",
    "SiteFigures",
    "judge",
    "present_fields",
    "step_of",
]


#: a fall is a finding only this many standard errors deep too: a share measured on a quarter
#: window of products moves by chance (a 50 % field: +-7 points at 1 standard error on 50)
MIN_Z = 4.0


def step_of(window: int) -> int:
    """Products between two marks: a quarter of the window."""
    return max(1, window // 4)


def _filled(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, (str, bytes, list, tuple, dict, set)):
        return bool(value.strip() if isinstance(value, str) else value)
    return True


def present_fields(item: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    """The *fields* that *item* holds a value for (not None, not blank, not empty)."""
    return [name for name in fields if _filled(item.get(name))]


def _counts(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, (int, float))}


@dataclass
class SiteFigures:
    """A site's running counts: ``products`` and ``fields`` (field -> products holding it),
    and the ``marks`` (products, field counts) they passed, oldest first."""

    products: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    marks: list[tuple[int, dict[str, int]]] = field(default_factory=list)

    @classmethod
    def from_json(cls, raw: str | bytes | None) -> SiteFigures:
        """The figures the frontier keeps (``{"n": .., "f": {..}, "m": [[n, {..}], ..]}``);
        empty ones for anything else."""
        try:
            data = json.loads(raw) if raw else {}
        except (ValueError, TypeError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        marks = []
        for mark in data.get("m") or ():
            if isinstance(mark, list) and len(mark) == 2 and isinstance(mark[0], (int, float)):
                marks.append((int(mark[0]), _counts(mark[1])))
        n = data.get("n")
        return cls(int(n) if isinstance(n, (int, float)) else 0, _counts(data.get("f")), marks)

    def shares(self) -> dict[str, float]:
        """Each field's share of the site's products over the crawl."""
        return _shares(self.fields, self.products)

    def split(self, window: int) -> tuple[tuple[int, dict[str, int]], tuple[int, dict[str, int]]]:
        """(products, field counts) of the last products, from the newest mark at least
        *window* products back (all of them when there is none), and of those before."""
        start: tuple[int, dict[str, int]] = (0, {})
        for mark in self.marks:
            if mark[0] <= self.products - window and mark[0] >= start[0]:
                start = mark
        n0, before = start
        last = {k: v - before.get(k, 0) for k, v in self.fields.items()}
        return (self.products - n0, last), (n0, dict(before))

    def window(self, window: int) -> dict[str, Any]:
        """The window's figures, JSON-ready: ``products`` and ``shares``."""
        (n, counts), _ = self.split(window)
        return {"products": n, "shares": _shares(counts, n)}


def _shares(counts: Mapping[str, int], n: int) -> dict[str, float]:
    if n <= 0:
        return {}
    return {name: round(max(0, min(n, c)) / n, 4) for name, c in sorted(counts.items())}


@dataclass(frozen=True)
class Baseline:
    """A site's figures in its last completed crawl: its products and each field's share."""

    products: int
    shares: Mapping[str, float]


def _deep(was: float, share: float, n0: int, n: int) -> bool:
    """Whether the fall from *was* (on *n0* products) to *share* (on *n*) is beyond chance."""
    pooled = (was * n0 + share * n) / (n0 + n)
    spread = math.sqrt(max(0.0, pooled * (1 - pooled)) * (1 / n0 + 1 / n))
    return spread == 0 or (was - share) / spread >= MIN_Z


@dataclass(frozen=True)
class Finding:
    """A field whose share on a site's last ``products`` products fell from ``was`` to
    ``share`` (``baseline``: what it is compared with, a word of
    :data:`~distcrawl.base.names.observe.BASELINES`)."""

    site: str
    field: str
    share: float
    was: float
    products: int
    baseline: str

    @property
    def key(self) -> str:
        """One finding per site and field in a crawl."""
        return f"{self.site}\t{self.field}"

    @property
    def message(self) -> str:
        return (
            f"{self.site}: {self.field} on {self.share:.0%} of the last {self.products} "
            f"products (was {self.was:.0%})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "field": self.field,
            "share": round(self.share, 4),
            "was": round(self.was, 4),
            "products": self.products,
            "baseline": self.baseline,
            "message": self.message,
        }


def judge(
    site: str,
    figures: SiteFigures,
    *,
    fields: Iterable[str],
    window: int,
    drop: float,
    last_crawl: Baseline | None = None,
) -> list[Finding]:
    """The fields whose share on the site's last products fell by *drop* or more below its
    share in *last_crawl* (the site's last completed crawl), or, without one, below its
    share on the site's products before those (none until a quarter of a window is on each
    side), and by :data:`MIN_Z` standard errors (not by chance). Judged once at least a
    quarter of a window of products is in."""
    step = step_of(window)
    (n, counts), (n0, before) = figures.split(window)
    if n < step:
        return []
    if last_crawl is not None and last_crawl.products > 0:
        baseline, n0 = words.LAST_CRAWL, last_crawl.products
    elif n0 >= step:
        baseline = words.EARLIER
    else:
        return []
    found = []
    for name in fields:
        share = max(0, min(n, counts.get(name, 0))) / n
        if baseline == words.LAST_CRAWL:
            assert last_crawl is not None
            was = last_crawl.shares.get(name)
            if was is None:
                continue
        else:
            was = before.get(name, 0) / n0
        if was > 0 and was - share >= drop - 1e-9 and _deep(was, share, n0, n):
            found.append(Finding(site, name, share, float(was), n, baseline))
    return found
