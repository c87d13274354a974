"""Revisit mode: when a fetched page comes back, and what its next visit sends.

A crawl with ``DISTCRAWL_REVISIT`` keeps itself fresh: every page whose kind has an interval
is scheduled again when its request is acked (``revisit`` in ``frontier/keys.py``, shared by all
nodes), and its next visit sends ``If-None-Match`` / ``If-Modified-Since`` from what the page
answered last. That state travels in the request's own meta (``distcrawl_revisit``, compact:
``e`` ETag, ``l`` Last-Modified, ``h`` content hash, ``x`` backoff factor), so the due entry
holds it and no other key grows per URL.

The schedule is fixed-rate: a page's visits are ``period = interval * (1 - early) * x`` apart,
counted from the time its previous visit was *due* (state ``d``, ms), not from when the crawl
got round to it, so a crawl that runs behind by a queueing delay does not drift later at every
visit: ``next_due = max(previous_due + period, now + period / 4)`` (the floor keeps a crawl that
fell more than most of a period behind from fetching a page twice in a row; it starts a new
phase). ``early`` (``DISTCRAWL_REVISIT_EARLY``, 0.1) makes the interval an upper bound on the
time between two fetches of a page, with room for the crawl's queueing jitter: a value that
lives one interval is fetched at least once.

The backoff rule (off by default): an answer that shows the page unchanged (a 304, or a body of
the same hash) multiplies ``x`` by ``DISTCRAWL_REVISIT_BACKOFF`` (1.5) up to
``DISTCRAWL_REVISIT_MAX_BACKOFF`` (default 1: no backoff, every page keeps its interval); a
changed page resets ``x`` to 1, so it comes back at its interval again. With a cap ``c > 1`` a
page unchanged for a while may be up to ``c`` intervals stale when it changes: fewer requests
for less freshness (a 304 already costs little). A page that answers 404 or 410 is gone: it
comes back on a slow schedule (the ``gone`` interval when one is set, else
``interval * max(4, cap)``) in case it returns.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcrawl.base.config import SETTINGS

if TYPE_CHECKING:
    from distcrawl.extract import SiteProfile


__all__ = [
    "META_KEY",
    "Outcome",
    "RevisitPolicy",
    "revisit_payload",
]

#: a gone page (404/410) comes back after interval * max(this, the backoff cap)
GONE_FACTOR = 4.0
#: seconds the default dupefilter generation adds to twice the longest wait: room for a dead
#: node's leases to come back (DISTCRAWL_HEARTBEAT_TIMEOUT) and for an outage, during which a
#: scheduled page is not recorded again
DEFAULT_FORGET_MARGIN = 600.0
#: the request meta key of a page's revisit state
META_KEY = "distcrawl_revisit"
#: the kind an interval for every other page kind is given under
ANY_KIND = "*"
#: statuses that say a page is gone
GONE_STATUSES = frozenset({404, 410})
#: the headers a revisit sets from the state (never carried in a payload's headers)
CONDITIONAL_HEADERS = ("If-None-Match", "If-Modified-Since")


@dataclass(frozen=True)
class Outcome:
    """What a page answered, as its next visit needs it."""

    status: int
    etag: str | None
    last_modified: str | None
    digest: str | None  # the body's hash (None for a 304 or an empty body)

    @classmethod
    def of(cls, response: Any) -> Outcome:
        headers = response.headers

        def header(name: bytes) -> str | None:
            raw = headers.get(name)
            return raw.decode("latin-1")[:200] if raw else None

        body = response.body if response.status != 304 else b""
        digest = hashlib.blake2b(body, digest_size=8).hexdigest() if body else None
        return cls(response.status, header(b"ETag"), header(b"Last-Modified"), digest)


@dataclass(frozen=True, kw_only=True)
class RevisitPolicy:
    """The revisit schedule of a crawl. Settings: ``DISTCRAWL_REVISIT`` (``kind:interval`` list),
    ``DISTCRAWL_REVISIT_BACKOFF``, ``DISTCRAWL_REVISIT_MAX_BACKOFF``, ``DISTCRAWL_REVISIT_EARLY``,
    ``DISTCRAWL_REVISIT_GRACE``, ``DISTCRAWL_REVISIT_FORGET``; site profiles' ``[revisit]``
    tables override per site."""

    intervals: dict[str, float] = field(default_factory=dict)
    #: per site (a profile's domains): {kind: seconds}, over ``intervals``
    sites: tuple[tuple[SiteProfile, dict[str, float]], ...] = ()
    #: an unchanged page's interval grows by this factor at each visit
    backoff: float
    #: most an interval grows: interval * this (1: no backoff; the interval is the promise)
    max_backoff: float
    #: the crawl is drained when nothing falls due within this many seconds
    grace: float
    #: share of the interval a revisit is scheduled early (0 <= early < 1): room for the
    #: crawl's queueing jitter, so that two fetches of a page are at most one interval apart
    early: float
    #: seconds of one dupefilter generation (0 = longest interval * max_backoff)
    forget: float = 0.0

    @classmethod
    def from_settings(
        cls, settings: Any, profiles: Iterable[SiteProfile] = ()
    ) -> RevisitPolicy | None:
        """The policy, or None when revisit mode is off (no interval anywhere)."""
        intervals = SETTINGS.value(settings, "DISTCRAWL_REVISIT")
        sites = tuple((p, dict(p.revisit)) for p in profiles if getattr(p, "revisit", None))
        if not intervals and not sites:
            return None
        return cls(
            intervals=intervals,
            sites=sites,
            backoff=SETTINGS.value(settings, "DISTCRAWL_REVISIT_BACKOFF"),
            max_backoff=SETTINGS.value(settings, "DISTCRAWL_REVISIT_MAX_BACKOFF"),
            grace=SETTINGS.value(settings, "DISTCRAWL_REVISIT_GRACE"),
            early=SETTINGS.value(settings, "DISTCRAWL_REVISIT_EARLY"),
            forget=SETTINGS.value(settings, "DISTCRAWL_REVISIT_FORGET") or 0.0,
        )

    @property
    def forget_ms(self) -> int:
        """The forgetting dupefilter's generation (ms): a URL is new again 1 to 2 of them after
        it was last recorded; by default twice the longest a revisit waits plus
        :data:`DEFAULT_FORGET_MARGIN`, so a URL is not forgotten while its revisits come, even
        when they run up to that long late. (A revisit acked later than that after the previous
        one may meet a link to its page pushed as new: a second entry.)"""
        if self.forget > 0:
            return int(self.forget * 1000)
        longest = max(
            [*self.intervals.values(), *(s for _, k in self.sites for s in k.values())],
            default=3600.0,
        )
        slowest = max(self.max_backoff, GONE_FACTOR)
        return int((2 * longest * slowest + DEFAULT_FORGET_MARGIN) * 1000)

    def longest(self, kind: str) -> float | None:
        """The longest interval of ``kind`` over the crawl and its site profiles (None: that
        kind is revisited nowhere)."""
        tables = (self.intervals, *({**self.intervals, **own} for _, own in self.sites))
        values = [v for v in (t.get(kind, t.get(ANY_KIND)) for t in tables) if v is not None]
        return max(values) if values else None

    def base_interval(self, url: str, kind: str) -> float | None:
        """Seconds between visits of a page of ``kind`` at ``url`` (None: not revisited)."""
        intervals = self.intervals
        if self.sites:
            from distcrawl.extract import SiteProfile

            profile = SiteProfile.match([p for p, _ in self.sites], url)
            for p, own in self.sites:
                if p is profile:
                    intervals = {**intervals, **own}
        found = intervals.get(kind)
        if found is None:
            found = intervals.get(ANY_KIND)
        return found

    def next_visit(
        self,
        url: str,
        kind: str,
        state: Mapping[str, Any] | None,
        outcome: Outcome,
        now: float | None = None,
        *,
        gone: bool = False,
    ) -> tuple[float, dict[str, Any], str] | None:
        """(seconds until the next visit, the new state, ``changed`` | ``unchanged`` | ``gone``
        | ``first``) after ``outcome`` at unix time ``now``, or None when the page is not
        revisited. The new state's ``d`` is the next visit's due time (ms): the anchor of the
        fixed-rate schedule. ``gone``: the page is gone whatever it answered (a product no
        listing links any more)."""
        base = self.base_interval(url, kind)
        if base is None:
            return None
        now = time.time() if now is None else now
        state = state if isinstance(state, Mapping) else {}
        factor = state.get("x", 1.0)
        factor = float(factor) if isinstance(factor, (int, float)) else 1.0
        new: dict[str, Any] = {}
        if gone or outcome.status in GONE_STATUSES:
            slow = self.base_interval(url, "gone")
            new["x"] = max(self.max_backoff, GONE_FACTOR)
            if "h" in state:
                new["h"] = state["h"]
            wait = slow or base * new["x"]
            new["d"] = round((now + wait) * 1000)
            return wait, new, "gone"
        if outcome.status == 304:
            verdict = "unchanged"
            digest = state.get("h")
            etag, modified = state.get("e"), state.get("l")
            etag = outcome.etag or etag
            modified = outcome.last_modified or modified
        else:
            digest = outcome.digest
            etag, modified = outcome.etag, outcome.last_modified
            if "h" not in state:
                verdict = "first"
            else:
                verdict = "unchanged" if digest == state.get("h") else "changed"
        factor = min(self.max_backoff, factor * self.backoff) if verdict == "unchanged" else 1.0
        if etag:
            new["e"] = etag
        if modified:
            new["l"] = modified
        if digest:
            new["h"] = digest
        if factor != 1.0:
            new["x"] = round(factor, 4)
        period = base * (1 - self.early) * factor
        due = now + period
        previous = state.get("d")
        if isinstance(previous, (int, float)) and not isinstance(previous, bool) and previous > 0:
            # fixed rate: from when the previous visit was due, not from now
            due = max(previous / 1000 + period, now + period / 4)
        new["d"] = round(due * 1000)
        return due - now, new, verdict


def revisit_payload(payload: bytes | str, state: Mapping[str, Any]) -> str:
    """The payload of a page's next visit: the one it was leased with, its revisit state
    replaced and no conditional header of an earlier visit carried over. (Nothing else of the
    fetch, such as download meta Scrapy added, goes into it.)"""
    text = payload.decode("utf-8") if isinstance(payload, bytes) else payload
    data = json.loads(text)
    meta = dict(data.get("mt") or {})
    meta.pop(META_KEY, None)
    meta["~v"] = dict(state)
    data["mt"] = meta
    headers = data.get("h")
    if isinstance(headers, dict):
        kept = {k: v for k, v in headers.items() if k.title() not in CONDITIONAL_HEADERS}
        if kept:
            data["h"] = kept
        else:
            data.pop("h")
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def conditional_headers(state: Any) -> dict[str, str]:
    """The headers a revisit sends from its state."""
    if not isinstance(state, Mapping):
        return {}
    out = {}
    etag, modified = state.get("e"), state.get("l")
    if isinstance(etag, str) and etag:
        out["If-None-Match"] = etag
    if isinstance(modified, str) and modified:
        out["If-Modified-Since"] = modified
    return out
