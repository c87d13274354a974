"""A re-crawl against the changing demo shop's ground truth: which of its changes the store
recorded, how late, which recorded changes never happened, and which removals it noticed.

*truth* is :meth:`distcrawl.demo.shop.DemoShop.changes` (``GET /_shop/changes``); the
store's side is the change log (``{url, field, old, new, seen_at}`` documents) and the
product documents (``price_history``, ``gone_at``) of :mod:`distcrawl.storage.documents`.
Products are matched by URL path (the host a crawl reached the shop by does not matter).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["DEFAULT_SLACK", "check_changes"]

#: seconds a record may seem to precede the change it shows (clocks read a moment apart)
DEFAULT_SLACK = 1.0
#: the product fields the shop changes and the store logs
FIELDS = ("price", "currency", "availability")


def check_changes(
    truth: dict[str, Any],
    changes: Iterable[dict[str, Any]],
    products: Iterable[dict[str, Any]],
    *,
    clock_offset: float = 0.0,
    slack: float = DEFAULT_SLACK,
) -> dict[str, Any]:
    """Compare a store with the shop's changes.

    A change the shop made (one field of one product, from ``old`` to ``new`` at ``at``) is
    *detected* by the first change-log record of that product and field with the same new
    value seen at or after ``at`` (less *slack* seconds); its ``freshness_lag_s`` is the time
    from ``at`` to that record's ``seen_at``. A change never recorded is *missed* (among them
    changes overwritten before any visit could see them). A record that detects no change is
    a ``false_change``; a ``price_history`` entry whose state the product never had around
    its ``seen_at`` counts in ``history_false``. A removed product is ``gone_detected`` when
    its document has a ``gone_at`` not before its removal; ``gone_false`` counts documents
    marked gone that the shop never removed. *clock_offset* is the shop's clock minus the
    store's (0 when both read the same clock).

    Returns ``changes_made``, ``changes_detected``, ``changes_missed``, ``false_changes``,
    ``freshness_lag_s`` (``p50``, ``p95``, ``max``; ``None`` without detections),
    ``history_false``, ``gone_made``, ``gone_detected``, ``gone_false`` and a few
    ``missed_sample`` / ``false_sample`` entries.
    """
    made: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for change in truth["changes"]:
        made[(change["path"], change["field"])].append(change)
    detected: set[int] = set()
    lags: list[float] = []
    false_sample: list[dict[str, Any]] = []
    false_changes = 0
    for record in sorted(changes, key=lambda r: _seconds(r["seen_at"])):
        key = (_path(str(record.get("url") or "")), str(record.get("field")))
        seen = _seconds(record["seen_at"]) + clock_offset
        match = None
        for change in made.get(key, ()):
            if change["at"] - slack > seen:
                break
            if id(change) not in detected and _same(change["new"], record.get("new")):
                match = change
        if match is None:
            false_changes += 1
            if len(false_sample) < 5:
                false_sample.append(
                    {"url": record.get("url"), "field": key[1], "new": str(record.get("new"))}
                )
            continue
        detected.add(id(match))
        lags.append(max(0.0, seen - match["at"]))
    all_made = [change for group in made.values() for change in group]
    missed = [change for change in all_made if id(change) not in detected]

    timelines = {path: p["timeline"] for path, p in truth["products"].items()}
    removed = {r["path"]: r["at"] for r in truth["removed"]}
    history_false = gone_detected = gone_false = 0
    for doc in products:
        path = _path(str(doc.get("url") or ""))
        timeline = timelines.get(path)
        if timeline is None:
            continue
        for entry in doc.get("price_history") or ():
            seen = _seconds(entry["seen_at"]) + clock_offset
            states = (_state_at(timeline, seen), _state_at(timeline, seen - slack))
            if not any(state is not None and _matches(state, entry) for state in states):
                history_false += 1
        gone_at = doc.get("gone_at")
        if gone_at is not None:
            if path in removed and _seconds(gone_at) + clock_offset >= removed[path] - slack:
                gone_detected += 1
            elif path not in removed:
                gone_false += 1
    return {
        "changes_made": len(all_made),
        "changes_detected": len(detected),
        "changes_missed": len(missed),
        "false_changes": false_changes,
        "freshness_lag_s": _percentiles(lags),
        "history_false": history_false,
        "gone_made": len(removed),
        "gone_detected": gone_detected,
        "gone_false": gone_false,
        "missed_sample": [
            {k: c[k] for k in ("url", "field", "old", "new", "at")} for c in missed[:5]
        ],
        "false_sample": false_sample,
    }


def _path(url: str) -> str:
    return urlsplit(url).path or url


def _seconds(value: Any) -> float:
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return moment.timestamp()
    return float(value)


def _comparable(value: Any) -> Any:
    if hasattr(value, "to_decimal"):
        return value.to_decimal()
    if isinstance(value, str):
        try:
            return Decimal(value)
        except InvalidOperation:
            return value
    return value


def _same(want: Any, got: Any) -> bool:
    return bool(_comparable(want) == _comparable(got))


def _state_at(timeline: list[dict[str, Any]], when: float) -> dict[str, Any] | None:
    state = None
    for candidate in timeline:
        if candidate["at"] > when:
            break
        state = candidate
    return state


def _matches(state: dict[str, Any], entry: dict[str, Any]) -> bool:
    return all(_same(state[name], entry.get(name)) for name in FIELDS)


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def rank(share: float) -> float:
        return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 3)

    return {"p50": rank(0.5), "p95": rank(0.95), "max": round(ordered[-1], 3)}
