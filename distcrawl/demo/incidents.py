"""Incidents a demo shop can stage while it is crawled (``distcrawl demo --incidents``): what an
operator of a catalog crawl fears most, played out on a schedule, with the ground truth of
what happened.

- A template switch: after ``switch_after`` product pages were served, the shop's product
  pages move their price out of the structured data into markup the extraction does not read
  (a client-side rendered amount). Products keep arriving, without a price.
- A new failure: after ``fail_after`` product pages were served, the first request of each of
  the next ``fail_pages`` product pages fails with ``fail_status`` and an error page of its own
  (a gateway that lost its upstream); their retries succeed.

Only ``jsonld`` pages switch. The counters are the shop's, over every node's requests.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from distcrawl.demo import pages
from distcrawl.demo.responses import Response

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Leaf, Product

__all__ = ["DEFAULT_FAIL_STATUS", "IncidentPlan", "Incidents", "render_switched"]

#: the status of the new failure (a gateway that lost its upstream)
DEFAULT_FAIL_STATUS = 502


@dataclass(frozen=True)
class IncidentPlan:
    """When the incidents start, counted in product pages served (0: never)."""

    switch_after: int = 0
    fail_after: int = 0
    fail_pages: int = 0
    fail_status: int = DEFAULT_FAIL_STATUS

    def __post_init__(self) -> None:
        if min(self.switch_after, self.fail_after, self.fail_pages) < 0:
            raise ValueError("incident counts must be >= 0")
        if not 500 <= self.fail_status <= 599:
            raise ValueError(f"fail_status must be a 5xx status, got {self.fail_status}")

    @property
    def active(self) -> bool:
        return bool(self.switch_after or (self.fail_after and self.fail_pages))


def render_switched(product: Product, leaf: Leaf, *, base_url: str) -> str:
    """The ``jsonld`` product page after the template switch: the offer in the JSON-LD has no
    price any more, and the page shows it only through a script that fills an empty element
    from its data attributes."""
    page = pages.render_product(product, leaf, base_url=base_url, variant="jsonld")
    structured = json.dumps({"price": product.price}, ensure_ascii=False)[1:-1] + ", "
    shown = f'<p class="price">{pages.display_price(product)}</p>'
    if structured not in page or shown not in page:  # the jsonld page changed shape
        raise AssertionError("the jsonld product page no longer has the price this switches")
    cents = int(Decimal(product.price) * 100)
    markup = (
        f'<p class="price" data-amount-cents="{cents}" data-currency="{product.currency}"></p>'
        "<script>for (const e of document.querySelectorAll('[data-amount-cents]')) "
        "e.textContent = (e.dataset.amountCents / 100).toFixed(2) + ' ' + e.dataset.currency"
        "</script>"
    )
    return page.replace(structured, "", 1).replace(shown, markup, 1)


def failure_page(status: int, request_id: str) -> bytes:
    return (
        "<!DOCTYPE html>\n<html><head><title>Bad gateway</title></head><body>"
        "<h1>Bad gateway</h1><p>The catalog service did not answer in time (upstream "
        f"catalog-db, request {request_id}).</p></body></html>\n"
    ).encode()


@dataclass
class Incidents:
    """The state of a shop's incidents (thread-safe: the shop answers on many threads)."""

    plan: IncidentPlan
    served: int = 0
    #: ids of the products served (200) after the switch, and of those served before it
    switched: set[int] = field(default_factory=set)
    plain: set[int] = field(default_factory=set)
    #: ids of the product pages whose first request failed
    failed: set[int] = field(default_factory=set)
    _asked: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def before_render(self, product_id: int) -> Response | None:
        """The new failure for this request (its page's first request once the failures
        began, while their budget lasts), else None."""
        plan = self.plan
        with self._lock:
            first = product_id not in self._asked
            self._asked.add(product_id)
            failing = plan.fail_pages and plan.fail_after and self.served >= plan.fail_after
            if not (first and failing and len(self.failed) < plan.fail_pages):
                return None
            self.failed.add(product_id)
        body = failure_page(plan.fail_status, secrets.token_hex(8))
        return Response(plan.fail_status, body, headers=(("X-Upstream", "catalog-db"),))

    def switched_now(self, product_id: int) -> bool:
        """Whether this product's page is served in the switched template; counts it served
        (its latest answer decides what the crawl should store)."""
        with self._lock:
            self.served += 1
            switched = bool(self.plan.switch_after) and self.served > self.plan.switch_after
            (self.switched if switched else self.plain).add(product_id)
            (self.plain if switched else self.switched).discard(product_id)
            return switched
