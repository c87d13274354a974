"""A request given up on, as the dead letter the frontier keeps with its reason until an
operator re-queues or purges it."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from distcrawl.frontier.batch import DeadLetter
from distcrawl.node.requests import codec
from distcrawl.node.requests.values import json_safe

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from distcrawl.frontier.batch import Lease

__all__ = ["dead_letter"]

#: meta of the last try that a re-queued request must not inherit: it starts afresh
_RETRY_META = frozenset({"retry_times", "retry_first_attempt", "distcrawl_delay"})


def dead_letter(
    request: Request,
    reason: str,
    details: dict[str, Any],
    *,
    spider: Spider | None,
    node_id: str,
    fingerprint: bytes,
    lease: Lease | None,
) -> DeadLetter:
    """The dead letter of ``request``: the fresh request an operator would re-queue, with
    ``reason`` and the JSON-safe ``details``. With the ``lease`` it ends (fenced: written only
    while this node holds it); without one it is written as is."""
    meta = {k: v for k, v in request.meta.items() if k not in _RETRY_META}
    meta["distcrawl_dead_letter"] = reason  # counted as re-queued if an operator does so
    fresh = request.replace(meta=meta, dont_filter=True)
    record = {
        "request": codec.encode(fresh, spider, strict=False),
        "url": request.url,
        "priority": request.priority,
        "site": urlparse_cached(request).hostname or "",
        "reason": reason,
        "node": node_id,
        "at": time.time(),
        **{k: v for k, v in details.items() if json_safe(v)},
    }
    return DeadLetter(
        fingerprint.hex(), json.dumps(record, separators=(",", ":")), record["site"], lease
    )
