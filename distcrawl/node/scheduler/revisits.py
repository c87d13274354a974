"""Revisit hooks of a node: a leased page's conditional headers, its final answer, and the
ack that schedules its next visit (with the products a listing dropped since its last one)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from distcrawl.base.names import stats as stat_keys
from distcrawl.extract import canonicalize_url
from distcrawl.frontier.batch import Revisit
from distcrawl.node.revisit.schedule import (
    META_KEY,
    Outcome,
    conditional_headers,
    revisit_payload,
)
from distcrawl.node.revisit.unlisted import (
    LISTED_META,
    UNLISTED_META,
    UnlistedWatch,
    decode_links,
    encode_links,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

    from distcrawl.frontier.batch import Lease
    from distcrawl.frontier.store import FrontierStore
    from distcrawl.node.revisit.schedule import RevisitPolicy
    from distcrawl.node.scheduler.buffers import WriteBuffers

__all__ = ["RevisitHooks", "log_revisit_mode", "unlisted_watch"]

logger = logging.getLogger(__name__)


def log_revisit_mode(policy: RevisitPolicy) -> None:
    logger.info(
        "Revisit mode: %s (fixed rate, %.0f%% early; %s; URLs forgotten %.0f-%.0fs "
        "after their last visit)",
        ", ".join(f"{k} every {v:.0f}s" for k, v in policy.intervals.items())
        or "site profiles only",
        100 * policy.early,
        f"backoff x{policy.backoff:.2f} up to x{policy.max_backoff:.1f}"
        if policy.max_backoff > 1
        else "no backoff",
        policy.forget_ms / 1000,
        2 * policy.forget_ms / 1000,
    )


def unlisted_watch(
    policy: RevisitPolicy, key: str, *, enabled: bool, grace: float | None
) -> UnlistedWatch | None:
    """The watch of products in no listing (``DISTCRAWL_UNLISTED``, its ``grace`` from
    ``DISTCRAWL_UNLISTED_GRACE``, else twice the longest listing interval at full backoff), or
    None where no listing is revisited."""
    listing = policy.longest("listing")
    if listing is None or not enabled:
        return None
    grace_s = grace or 2 * listing * max(1.0, policy.max_backoff)
    logger.info("Products in no listing for %.0fs are marked gone", grace_s)
    return UnlistedWatch(key, grace_s)


class RevisitHooks:
    """In revisit mode: remembers each leased request's payload and final answer, and turns
    its ack into a :class:`Revisit` in ``writes`` when its kind is revisited."""

    def __init__(
        self,
        *,
        policy: RevisitPolicy,
        store: FrontierStore,
        leased: dict[Request, Lease],
        writes: WriteBuffers,
        fingerprint: Callable[[Request], bytes],
        stats: StatsCollector,
        unlisted: UnlistedWatch | None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.leased = leased
        self.writes = writes
        self.fingerprint = fingerprint
        self.stats = stats
        self.unlisted = unlisted
        self._payloads: dict[Request, bytes] = {}  # leased request -> the payload it came with
        self._outcomes: dict[Request, Outcome] = {}  # request -> its final answer
        self._no_revisit: set[Request] = set()  # dead-lettered: not scheduled again

    def send_conditional(self, request: Request, payload: bytes) -> None:
        """A request was leased: keep its payload, and ask for its page only if changed."""
        self._payloads[request] = payload
        headers = conditional_headers(request.meta.get(META_KEY))
        if headers:
            for name, value in headers.items():
                request.headers[name] = value
            self.stats.inc_value(stat_keys.REVISIT_CONDITIONAL)

    def answered(self, response: Any, request: Request, spider: Spider) -> None:
        """``response_received``: the answer that leaves the downloader middlewares (not one
        turned into a retry) is the page's final one."""
        if request in self.leased:
            self._outcomes[request] = Outcome.of(response)
            if response.status == 304:
                self.stats.inc_value(stat_keys.REVISIT_NOT_MODIFIED)
            unlisted = self.unlisted
            if (
                unlisted is not None
                and unlisted.gone
                and request.meta.get("page_kind") == "product"
                and canonicalize_url(response.url) in unlisted.gone
            ):
                # the product is in no listing: this visit marks it gone (freshness.py)
                request.meta[UNLISTED_META] = True

    def dead_lettered(self, request: Request) -> None:
        """A dead letter is not scheduled again."""
        if request in self.leased:
            self._no_revisit.add(request)

    def schedule(self, request: Request, lease: Lease) -> bool:
        """Ack ``request`` as a page to fetch again, if its kind is revisited and it got a
        final answer (not a retry, a redirect, a dead letter or a download error)."""
        payload = self._payloads.pop(request, None)
        outcome = self._outcomes.pop(request, None)
        if request in self._no_revisit:
            self._no_revisit.discard(request)
            return False
        if payload is None or outcome is None:
            return False
        kind = str(request.meta.get("page_kind") or "")
        old = request.meta.get(META_KEY)
        plan = self.policy.next_visit(
            request.url,
            kind,
            old,
            outcome,
            # due times travel between nodes: on Redis' clock, as every other frontier time
            self.store.server_time(),
            gone=bool(request.meta.get(UNLISTED_META)),
        )
        if plan is None:
            return False
        seconds, state, verdict = plan
        if self.unlisted is not None:
            self._listing_visited(request, old, outcome, state)
        try:
            new_payload = revisit_payload(payload, state)
        except (ValueError, UnicodeDecodeError) as exc:
            logger.warning(
                "Not revisiting %s: its payload cannot be rebuilt (%s)", request.url, exc
            )
            self.stats.inc_value(stat_keys.REVISIT_UNSCHEDULABLE)
            return False
        fp = self.fingerprint(request)[:16]
        self.writes.revisits.append(Revisit(lease, int(seconds * 1000), new_payload, fp))
        self.stats.inc_value(stat_keys.REVISIT_VERDICT(verdict))
        self.stats.inc_value(stat_keys.REVISIT_SCHEDULED)
        return True

    def _listing_visited(
        self, request: Request, old: Any, outcome: Outcome, state: dict[str, Any]
    ) -> None:
        """A listing page's product links go into its next state (``k``); the products it
        dropped since its last visit are unlisted, the ones it links listed again."""
        assert self.unlisted is not None
        before = decode_links(old.get("k")) if isinstance(old, dict) else None
        listed = request.meta.get(LISTED_META)
        if outcome.status == 304:
            links = before
        elif isinstance(listed, (list, tuple, set, frozenset)):
            links = {str(u) for u in listed}
        else:
            links = None
        if links is None:
            return
        if links:
            state["k"] = encode_links(links)
        dropped = self.unlisted.visited(links, before)
        if dropped:
            self.stats.inc_value(stat_keys.REVISIT_UNLISTED, dropped)

    async def before_flush(self, client: Any) -> None:
        """What listing visits found goes to Redis before their acks (which write the
        listings' new link sets): a crash in between repeats a visit, whose writes are
        idempotent, and never loses a product a listing dropped."""
        if self.unlisted is not None:
            await self.unlisted.tick(client, self.store.server_time())

    def forget_dropped(self) -> None:
        """Requests dropped from the node (their lease lost) forget their payload."""
        if self._payloads:
            for request in [r for r in self._payloads if r not in self.leased]:
                del self._payloads[request]
