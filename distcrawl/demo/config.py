"""What a demo shop is: :class:`ShopConfig`, its defaults, and the page variants it serves."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from distcrawl.demo.bootstrap import VARIANT as BOOTSTRAP_VARIANT
from distcrawl.demo.catalog import DEFAULT_PAGE_SIZE, DEFAULT_PRODUCTS, DEFAULT_SEED
from distcrawl.demo.changes import ChangePlan
from distcrawl.demo.crowded import VARIANTS as CROWDED_VARIANTS
from distcrawl.demo.faults import Faults
from distcrawl.demo.incidents import IncidentPlan
from distcrawl.demo.templates import TEMPLATE_VARIANTS

__all__ = [
    "DEFAULT_ERROR_STATUS",
    "DEFAULT_GONE_STATUS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_RETRY_AFTER",
    "GONE_STATUSES",
    "VARIANTS",
    "ShopConfig",
]

#: the variants of product pages: schema.org JSON-LD, bespoke markup with no structured data,
#: the three markup families of :mod:`distcrawl.demo.templates`, the Bootstrap shop of
#: :mod:`distcrawl.demo.bootstrap` (no structured data) and the pages crowded with other
#: products' prices and codes of :mod:`distcrawl.demo.crowded`
VARIANTS = ("jsonld", "plain", *TEMPLATE_VARIANTS, BOOTSTRAP_VARIANT, *CROWDED_VARIANTS)
#: the shop binds here unless told otherwise (it only ever binds loopback addresses)
DEFAULT_HOST = "127.0.0.1"
#: port 0 lets the OS pick a free port; read it back from :attr:`DemoShop.url`
DEFAULT_PORT = 0
#: status of the random faults drawn with ``error_rate``
DEFAULT_ERROR_STATUS = 503
#: status of a removed product's page (404 is the other choice)
DEFAULT_GONE_STATUS = 410
#: the statuses a removed product's page may answer: 200 keeps serving it as last published,
#: so only the listings, which no longer link it, tell that it is gone
GONE_STATUSES = (200, 404, 410)
#: seconds announced in the Retry-After header of 429 and 503 answers
DEFAULT_RETRY_AFTER = 1


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost: it may resolve anywhere


@dataclass(frozen=True)
class ShopConfig:
    """Everything about one demo shop; the fault fields are its faults at start.

    ``latency_ms`` delays every response, plus a uniform random ``0..latency_jitter_ms``.
    ``error_rate`` and ``rate_limit_429`` are the fractions of requests answered
    ``error_status`` and 429 at random (one seeded draw per request, so they add up).
    ``fail_products`` products, chosen deterministically from ``seed``, always answer 500.
    ``retry_after`` is the Retry-After of 429 and 503 answers (``None``: no header; a text is
    sent as it is, an HTTP date say). ``hang``: no page is ever answered (the connection stays
    open until the shop stops). Faults never apply to ``/robots.txt`` or ``/_shop/*``, except
    ``robots_fault``: robots.txt answers 404 or 503, never answers (``hang``) or closes the
    connection unanswered (``close``). ``crawl_delay`` adds a ``Crawl-delay`` line to robots.txt.

    A shop that changes (:class:`~distcrawl.demo.changes.ChangePlan`): every
    ``change_interval`` seconds from ``change_start`` (default: when the shop is created), a
    ``change_rate`` share of the live products change price and/or availability,
    ``change_add`` products are added and ``change_remove`` removed (their page then answers
    ``gone_status``: 410, 404, or 200 to keep serving it so only the listings drop it), for
    ``change_cycles`` epochs (0: forever). ``conditional`` makes the home, category, listing
    and product pages answer ``ETag`` and ``Last-Modified``, and ``304`` to a matching
    ``If-None-Match`` / ``If-Modified-Since``; ``None`` (the default) turns it on exactly when
    the shop changes.

    Incidents (:mod:`distcrawl.demo.incidents`): after ``switch_template_after`` product pages
    were served, product pages keep their price out of the structured data (``jsonld`` only);
    after ``fail_after``, the first request of each of the next ``fail_pages`` product pages
    fails with a 502 of its own.
    """

    products: int = DEFAULT_PRODUCTS
    variant: str = "jsonld"
    seed: int = DEFAULT_SEED
    page_size: int = DEFAULT_PAGE_SIZE
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    latency_ms: float = 0.0
    latency_jitter_ms: float = 0.0
    error_rate: float = 0.0
    error_status: int = DEFAULT_ERROR_STATUS
    fail_products: int = 0
    rate_limit_429: float = 0.0
    retry_after: int | str | None = DEFAULT_RETRY_AFTER
    hang: bool = False
    robots_fault: str = ""
    crawl_delay: float | None = None
    hostile: bool = False
    tracking_params: bool = True
    change_interval: float = 0.0
    change_rate: float = 0.0
    change_add: int = 0
    change_remove: int = 0
    change_cycles: int = 0
    change_start: float | None = None
    gone_status: int = DEFAULT_GONE_STATUS
    conditional: bool | None = None
    switch_template_after: int = 0
    fail_after: int = 0
    fail_pages: int = 0

    def __post_init__(self) -> None:
        self.change_plan()  # validates the change fields
        if self.gone_status not in GONE_STATUSES:
            raise ValueError(f"gone_status must be 200, 404 or 410, got {self.gone_status}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        # The control API under /_shop/ has no authentication: never expose it off-host.
        if self.host != "localhost" and not _is_loopback(self.host):
            raise ValueError(f"the demo shop binds loopback addresses only, got {self.host!r}")
        Faults.from_config(self)  # validates the fault fields
        if self.incident_plan().switch_after and self.variant != "jsonld":
            raise ValueError("only jsonld product pages switch their template")

    def incident_plan(self) -> IncidentPlan:
        return IncidentPlan(
            switch_after=self.switch_template_after,
            fail_after=self.fail_after,
            fail_pages=self.fail_pages,
        )

    def change_plan(self) -> ChangePlan:
        return ChangePlan(
            interval=self.change_interval,
            rate=self.change_rate,
            add=self.change_add,
            remove=self.change_remove,
            cycles=self.change_cycles,
        )

    @property
    def validators(self) -> bool:
        """Whether pages answer ETag / Last-Modified / 304 (``conditional``, else: changes)."""
        return self.change_interval > 0 if self.conditional is None else self.conditional
