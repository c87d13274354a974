"""``distcrawl demo --incidents``: the shops' incidents (:mod:`distcrawl.demo.incidents`) and what
the crawl must have made of them: a finding naming the switched site and ``price``, an error
group of the new failure with the snapshot of its first occurrence, and one notice of each
(``finding``, ``crawl_finished``) at the webhook however many nodes saw them.

The switched site's products are stored without a price by design: the field check expects
exactly that of the products the shop last served in the switched template, and says how
many it found so (``incidents.stored_without_price``), rather than counting them wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from distcrawl.base.names import exits
from distcrawl.base.names import observe as words
from distcrawl.demo.incidents import DEFAULT_FAIL_STATUS
from distcrawl.frontier.store import FrontierStore
from distcrawl.ops.errors import Snapshot
from distcrawl.storage.observe import ObserveStore

if TYPE_CHECKING:
    from distcrawl.demo.shop import DemoShop
    from distcrawl.demo.webhook import WebhookReceiver
    from distcrawl.frontier.keys import FrontierKeys

__all__ = ["ALLOWED_EXITS", "expected_absent", "incident_summary", "shop_incidents"]

#: the field the template switch takes away
SWITCHED_FIELD = "price"
#: node exit statuses a demo with incidents expects: 0, or that of a crawl with findings
ALLOWED_EXITS = frozenset({0, exits.FINDINGS})
#: characters of a snapshot's body the summary shows
BODY_SHOWN = 300


def shop_incidents(index: int, products: int) -> dict[str, Any]:
    """The incidents of the demo's shop number *index*: the first switches its template after
    half its products, the second fails product pages with a new error after a third of them
    (for a twentieth of them, at least 3: their first request each), the others none."""
    if index == 0:
        return {"switch_template_after": max(1, products // 2)}
    if index == 1:
        return {"fail_after": max(1, products // 3), "fail_pages": max(3, products // 20)}
    return {}


def expected_absent(shops: list[DemoShop]) -> dict[str, set[str]]:
    """Product URL -> the fields it must be stored without (the switched template's)."""
    return {url: {SWITCHED_FIELD} for shop in shops for url in shop.incidents()["switched"]}


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def incident_summary(
    shops: list[DemoShop],
    client: Any,
    keys: FrontierKeys,
    mongo_uri: str,
    receiver: WebhookReceiver,
    stored_without: dict[str, list[str]],
) -> dict[str, Any]:
    """The summary's keys of a demo with incidents: ``findings``, ``error_groups`` (each with
    its snapshot), ``webhook_notices`` (by kind), ``incidents`` (what the shops did and what
    was stored of it) and ``incident_checks`` (each a boolean the run's success needs)."""
    store = FrontierStore(client, keys)
    findings, _ = store.read_findings()
    run = store.read_run()
    groups = store.error_groups()
    mongo = ObserveStore(mongo_uri, "catalog")
    try:
        kept = mongo.snapshots(keys.spider, run.id) if run is not None else {}
        bodies = {
            g.id: mongo.snapshot(keys.spider, run.id, g.id)
            for g in groups
            if run is not None and g.id in kept
        }
        report = mongo.last_report(keys.spider)
    finally:
        mongo.close()
    error_groups = []
    for group in groups:
        row = group.as_dict()
        doc = bodies.get(group.id)
        if doc:
            shot = Snapshot.of(doc).as_dict(body=False)
            shot["body_start"] = Snapshot.of(doc).text()[:BODY_SHOWN]
            row["snapshot"] = shot
        else:
            row["snapshot"] = None
        error_groups.append(row)
    switched, failing = _host(shops[0].url), _host(shops[1].url)
    truth = [shop.incidents() for shop in shops]
    notices = receiver.by_kind()
    new_failure = f"HTTP {DEFAULT_FAIL_STATUS} Bad Gateway"
    checks = {
        "finding_names_site_and_price": any(
            f.get("site") == switched and f.get("field") == SWITCHED_FIELD for f in findings
        ),
        "new_failure_grouped_with_snapshot": any(
            g["site"] == failing
            and g["template"] == new_failure
            and (g["snapshot"] or {}).get("status") == DEFAULT_FAIL_STATUS
            for g in error_groups
        ),
        "one_finding_notice": notices.get(words.FINDING) == 1,
        "one_crawl_finished_notice": notices.get(words.CRAWL_FINISHED) == 1,
    }
    return {
        "findings": findings,
        "error_groups": error_groups,
        "webhook_notices": notices,
        "webhook_attempts": receiver.attempts,
        "report_summary": report.get("summary") if report else None,
        "incidents": {
            "switched_site": switched,
            "switched_products": len(truth[0]["switched"]),
            "stored_without_price": len(stored_without.get(SWITCHED_FIELD, [])),
            "failing_site": failing,
            "failed_first_requests": len(truth[1]["failed"]),
        },
        "incident_checks": checks,
    }
