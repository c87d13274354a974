"""The bundled demo shop: a real HTTP server on loopback that knows its own ground truth.

It serves a deterministic catalog (``distcrawl.demo.catalog``), injects faults on demand
(latency, random 503s, 429s with Retry-After, products that always fail, hostile pages) and
keeps a log of every request, so tests and benchmarks can check a crawl against the truth.
On demand the catalog changes with time (``distcrawl.demo.changes``: prices and stock move,
products come and go) and pages answer ``ETag`` / ``Last-Modified`` and ``304 Not Modified``
as a real shop does.
The same controls are exposed over HTTP under ``/_shop/`` for a shop in another process, and
``distcrawl shop`` (or ``python -m distcrawl.demo.server``) serves one from the command line.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import enum
import functools
import hashlib
import ipaddress
import json
import logging
import math
import os
import random
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

from distcrawl.demo import pages
from distcrawl.demo.bootstrap import VARIANT as BOOTSTRAP_VARIANT
from distcrawl.demo.catalog import DEFAULT_PAGE_SIZE, DEFAULT_PRODUCTS, DEFAULT_SEED, Catalog
from distcrawl.demo.changes import CatalogAt, CatalogHistory, ChangePlan
from distcrawl.demo.templates import TEMPLATE_VARIANTS

if TYPE_CHECKING:
    from types import FrameType

    from distcrawl.demo.catalog import Listings, Product

__all__ = ["DemoShop", "ShopConfig", "add_arguments", "main", "run"]

logger = logging.getLogger(__name__)

#: the variants of product pages: schema.org JSON-LD, bespoke markup with no structured data,
#: the three markup families of :mod:`distcrawl.demo.templates` and the Bootstrap shop of
#: :mod:`distcrawl.demo.bootstrap` (no structured data)
VARIANTS = ("jsonld", "plain", *TEMPLATE_VARIANTS, BOOTSTRAP_VARIANT)
#: the shop binds here unless told otherwise (it only ever binds loopback addresses)
DEFAULT_HOST = "127.0.0.1"
#: port 0 lets the OS pick a free port; read it back from :attr:`DemoShop.url`
DEFAULT_PORT = 0
#: status of the random faults drawn with ``error_rate``
DEFAULT_ERROR_STATUS = 503
#: a changing shop refuses to start this many change epochs after its change_start
MAX_EPOCHS_BEHIND = 100_000
#: status of a removed product's page (404 is the other choice)
DEFAULT_GONE_STATUS = 410
#: the statuses a removed product's page may answer: 200 keeps serving it as last published,
#: so only the listings, which no longer link it, tell that it is gone
GONE_STATUSES = (200, 404, 410)
#: seconds announced in the Retry-After header of 429 and 503 answers
DEFAULT_RETRY_AFTER = 1
#: an idle keep-alive connection is closed after this many seconds (frees its thread)
DEFAULT_IDLE_TIMEOUT = 30.0
#: body size of the hostile ``/big`` page
BIG_PAGE_BYTES = 20 * 1024 * 1024
#: the largest body accepted by ``POST /_shop/faults``
_MAX_POST_BYTES = 64 * 1024
#: how often the accept loop checks for :meth:`DemoShop.stop` (seconds)
_POLL_INTERVAL = 0.05

_CONTENT_HTML = "text/html; charset=utf-8"
_CONTENT_JSON = "application/json"
_PRODUCT_PATH = re.compile(r"/p/(\d{1,9})-([a-z0-9-]+)\.html")
_IMAGE_PATH = re.compile(r"/img/(\d{1,9})-(\d)\.jpg")
_CALENDAR_PATH = re.compile(r"/calendar/(-?\d{1,7})/(\d{2})/")
# A Host header is echoed into canonical URLs: accept host[:port] characters only.
_SAFE_HOST = re.compile(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?")

# One 64 KiB chunk sent over and over: /big costs no memory and no rendering.
_BIG_CHUNK = (b"<p>" + b"All the products, all on one page. " * 14 + b"</p>\n") * 128
_BIG_REPEAT = BIG_PAGE_BYTES // len(_BIG_CHUNK)
_BINARY_BODY = bytes(range(256)) * 256
# Not a decodable picture: nothing in a crawl fetches images, they only need to exist.
_IMAGE_BODY = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32 + b"\xff\xd9"


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET


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
    ``retry_after`` is the Retry-After of 429 and 503 answers (``None``: no header).
    Faults never apply to ``/robots.txt`` or ``/_shop/*``.

    A shop that changes (:class:`~distcrawl.demo.changes.ChangePlan`): every
    ``change_interval`` seconds from ``change_start`` (default: when the shop is created), a
    ``change_rate`` share of the live products change price and/or availability,
    ``change_add`` products are added and ``change_remove`` removed (their page then answers
    ``gone_status``: 410, 404, or 200 to keep serving it so only the listings drop it), for
    ``change_cycles`` epochs (0: forever). ``conditional`` makes the home, category, listing
    and product pages answer ``ETag`` and ``Last-Modified``, and ``304`` to a matching
    ``If-None-Match`` / ``If-Modified-Since``; ``None`` (the default) turns it on exactly when
    the shop changes.
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
    retry_after: int | None = DEFAULT_RETRY_AFTER
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

    def __post_init__(self) -> None:
        self.change_plan()  # validates the change fields
        if self.gone_status not in GONE_STATUSES:
            raise ValueError(f"gone_status must be 200, 404 or 410, got {self.gone_status}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        # The control API under /_shop/ has no authentication: never expose it off-host.
        if self.host != "localhost" and not _is_loopback(self.host):
            raise ValueError(f"the demo shop binds loopback addresses only, got {self.host!r}")
        _Faults.from_config(self)  # validates the fault fields

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


@dataclass(frozen=True)
class _Faults:
    """The faults in force; replaced as a whole so a request sees one consistent set."""

    error_rate: float
    error_status: int
    fail_products: int
    latency_ms: float
    latency_jitter_ms: float
    rate_limit_429: float
    retry_after: int | None
    products: int = field(repr=False)

    @classmethod
    def from_config(cls, config: ShopConfig) -> _Faults:
        return cls(
            error_rate=config.error_rate,
            error_status=config.error_status,
            fail_products=config.fail_products,
            latency_ms=config.latency_ms,
            latency_jitter_ms=config.latency_jitter_ms,
            rate_limit_429=config.rate_limit_429,
            retry_after=config.retry_after,
            products=config.products,
        )

    def __post_init__(self) -> None:
        for name in ("error_rate", "rate_limit_429"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {value}")
        if self.error_rate + self.rate_limit_429 > 1.0:
            raise ValueError("error_rate + rate_limit_429 must not exceed 1")
        if self.latency_ms < 0 or self.latency_jitter_ms < 0:
            raise ValueError("latency_ms and latency_jitter_ms must be >= 0")
        if not 0 <= self.fail_products <= self.products:
            raise ValueError(f"fail_products must be within 0..{self.products}")
        if not 400 <= self.error_status <= 599:
            raise ValueError(f"error_status must be a 4xx or 5xx status, got {self.error_status}")
        if self.retry_after is not None and self.retry_after < 0:
            raise ValueError("retry_after must be >= 0 or None")

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        del data["products"]
        return data


@dataclass(slots=True)
class _Response:
    status: int
    body: bytes = b""
    content_type: str = _CONTENT_HTML
    headers: tuple[tuple[str, str], ...] = ()
    repeat: int = 1  # the body is sent this many times back to back (the oversized page)
    chunked: bool = False  # sent with Transfer-Encoding: chunked, its size not announced
    modified: float | None = None  # when the page last changed: it may answer 304


def _html(text: str, status: int = 200, modified: float | None = None) -> _Response:
    return _Response(status, text.encode(), modified=modified)


def _json(data: object, status: int = 200) -> _Response:
    return _Response(status, json.dumps(data).encode(), _CONTENT_JSON)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _error(status: int, headers: tuple[tuple[str, str], ...] = ()) -> _Response:
    page = pages.render_error(status, _phrase(status))
    return _Response(status, page.encode(), headers=headers)


class DemoShop:
    """A demo shop served from a background thread; use :meth:`start` and :meth:`stop`.

    Also a context manager: ``with DemoShop(ShopConfig(products=50)) as shop: ...``.
    A shop in another process is checked and steered over HTTP, with no fault or log entry:
    ``GET /_shop/truth`` (what :meth:`truth` returns), ``GET /_shop/log?since=T`` (what
    :meth:`request_log` returns), ``GET /_shop/faults`` and ``POST /_shop/faults`` (a JSON
    object with :meth:`set_faults` keyword arguments; answers the faults now in force) and
    ``GET /_shop/changes`` (what :meth:`changes` returns).

    *clock* gives the time the change epochs are counted in (default ``time.time``).
    """

    def __init__(
        self, config: ShopConfig | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config or ShopConfig()
        self.catalog = Catalog(
            self.config.products, seed=self.config.seed, page_size=self.config.page_size
        )
        self._clock = clock
        start = self.config.change_start
        self.history = CatalogHistory(
            self.catalog, self.config.change_plan(), start=clock() if start is None else start
        )
        self._changing = self.history.plan.active
        behind = self.history.epoch_at(clock())
        if behind > MAX_EPOCHS_BEHIND:
            raise ValueError(
                f"change_start is {behind} change epochs ago (at most {MAX_EPOCHS_BEHIND}): "
                "every epoch since would be computed; start later or set change_cycles"
            )
        self._validators = self.config.validators
        faults = _Faults.from_config(self.config)
        # Faults and the failing set they imply change together, as one tuple, so a request
        # reading them without the lock still sees a consistent pair.
        self._state = (faults, self.catalog.failing_ids(faults.fail_products))
        self._lock = threading.Lock()
        # Separate streams: turning latency jitter on does not change which requests fail.
        self._fault_rng = random.Random(f"distcrawl-demo-faults:{self.config.seed}")
        self._jitter_rng = random.Random(f"distcrawl-demo-jitter:{self.config.seed}")
        # (t, method, path, status, bytes) tuples: a third of the memory of dicts
        self._log: list[tuple[float, str, str, int, int]] = []
        self._active = 0  # requests being answered now (the control API excluded)
        self._peak = 0  # most of them at once since the last reset_peak_in_flight()
        self._server: _ShopHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base = ""
        self._port = 0

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> DemoShop:
        """Bind and serve in a background thread; returns the shop itself."""
        if self._server is not None:
            raise RuntimeError("the demo shop is already running")
        server = _ShopHTTPServer((self.config.host, self.config.port), self)
        host, port = server.server_address[:2]
        host = str(host)
        self._base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self._port = int(port)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"demo-shop-{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()  # joins the connection threads
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> DemoShop:
        return self.start() if self._server is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The home page, e.g. ``http://127.0.0.1:PORT/``: the seed of a crawl."""
        if not self._base:
            raise RuntimeError("the demo shop is not started")
        return self._base + "/"

    @property
    def port(self) -> int:
        """The bound port (the free one chosen when the config said 0)."""
        if not self._port:
            raise RuntimeError("the demo shop is not started")
        return self._port

    # -- ground truth ---------------------------------------------------------------------

    def epoch(self) -> int:
        """The change epoch now (always 0 for a shop that does not change)."""
        epoch = self.history.epoch_at(self._clock())
        self.history.advance(epoch)
        return epoch

    def _live_products(self) -> list[Product]:
        if not self._changing:
            return self.catalog.products()
        epoch = self.epoch()
        found = (self.history.product(p.id, epoch) for p in self.history.products_ever())
        return [p for p in found if p is not None]

    def expected_product_urls(self) -> set[str]:
        """Canonical URLs of every product a complete crawl must store (of a shop that
        changes: the products live now)."""
        base = self.url.rstrip("/")
        return {base + product.path for product in self._live_products()}

    def gone_product_urls(self) -> set[str]:
        """Products removed so far (their pages answer ``gone_status``)."""
        if not self._changing:
            return set()
        base, epoch = self.url.rstrip("/"), self.epoch()
        ever = self.history.products_ever()
        return {base + p.path for p in ever if self.history.removed(p.id, epoch)}

    def failing_product_urls(self) -> set[str]:
        """Products that answer 500 on every request (``fail_products`` of them)."""
        base = self.url.rstrip("/")
        failing = self._state[1]
        return {base + p.path for p in self._live_products() if p.id in failing}

    def recoverable_product_urls(self) -> set[str]:
        """Expected minus always-failing: what a crawl can store despite the faults."""
        return self.expected_product_urls() - self.failing_product_urls()

    def product_sku(self, url: str) -> str | None:
        """The SKU of the product the page at *url* (or a path) shows, as this shop routes it
        (query and fragment ignored, the host not looked at); None for any other page. Two
        URLs of one product have one SKU: the identity duplicate checks count by."""
        path = urlsplit(url).path
        match = _PRODUCT_PATH.fullmatch(path)
        if match is None:
            return None
        product = self.history.known(int(match[1]))
        return product.sku if product is not None and product.slug == match[2] else None

    def truth(self) -> dict[str, Any]:
        """The ground truth as served by ``GET /_shop/truth``; ``skus`` maps each product's
        path to its SKU (a product's identity, whatever URL it was reached by; of a shop that
        changes: every product ever published), ``gone`` lists the removed products."""
        ever = self.history.products_ever() if self._changing else self.catalog.products()
        return {
            "skus": {p.path: p.sku for p in ever},
            "expected": sorted(self.expected_product_urls()),
            "recoverable": sorted(self.recoverable_product_urls()),
            "failing": sorted(self.failing_product_urls()),
            "gone": sorted(self.gone_product_urls()),
            "products": self.config.products,
            "variant": self.config.variant,
            "seed": self.config.seed,
        }

    def changes(self) -> dict[str, Any]:
        """Every change made so far, as served by ``GET /_shop/changes``: for each product
        (by path) its ``timeline`` of ``{at, price, currency, availability}`` states,
        ``added_at`` and ``removed_at`` (unix times; ``None``: never removed), and the flat
        lists ``changes`` (``{url, path, sku, field, old, new, at}``, in time order),
        ``added`` and ``removed``; plus the plan (``start``, ``interval``, ``rate``, ``add``,
        ``remove``, ``cycles``) and the current ``epoch``. See :mod:`distcrawl.demo.changes`."""
        return self.history.ground_truth(self.epoch(), self.url.rstrip("/"))

    # -- request log and faults -----------------------------------------------------------

    def request_log(self, since: float | None = None) -> list[dict[str, Any]]:
        """Every request so far (``/_shop/*`` excluded), oldest first.

        Entries are ``{"t", "path", "status", "method", "bytes"}``; ``path`` includes the
        query string, ``t`` is when the answer was decided, so entries are in ``t`` order and
        ``since`` returns exactly those with ``t > since``, and ``bytes`` is the body size
        sent (0 for HEAD and 304 answers).
        """
        with self._lock:
            start = 0 if since is None else bisect.bisect_right(self._log, since, key=_time_of)
            entries = self._log[start:]
        return [
            {"t": t, "path": path, "status": status, "method": method, "bytes": size}
            for t, method, path, status, size in entries
        ]

    def clear_request_log(self) -> None:
        with self._lock:
            self._log.clear()

    def faults(self) -> dict[str, Any]:
        """The faults in force, with the keys :meth:`set_faults` takes."""
        return self._state[0].public()

    def set_faults(
        self,
        *,
        error_rate: float | None = None,
        fail_products: int | None = None,
        latency_ms: float | None = None,
        latency_jitter_ms: float | None = None,
        rate_limit_429: float | None = None,
        error_status: int | None = None,
        retry_after: int | Literal[_Unset.UNSET] | None = _UNSET,
    ) -> dict[str, Any]:
        """Change faults while serving (``None``: leave as is); returns the faults now."""
        changes: dict[str, Any] = {}
        if error_rate is not None:
            changes["error_rate"] = float(error_rate)
        if fail_products is not None:
            changes["fail_products"] = int(fail_products)
        if latency_ms is not None:
            changes["latency_ms"] = float(latency_ms)
        if latency_jitter_ms is not None:
            changes["latency_jitter_ms"] = float(latency_jitter_ms)
        if rate_limit_429 is not None:
            changes["rate_limit_429"] = float(rate_limit_429)
        if error_status is not None:
            changes["error_status"] = int(error_status)
        if retry_after is not _UNSET:
            changes["retry_after"] = None if retry_after is None else int(retry_after)
        with self._lock:
            faults = replace(self._state[0], **changes)  # validates before anything changes
            self._state = (faults, self.catalog.failing_ids(faults.fail_products))
        logger.info("demo shop faults now %s", faults.public())
        return faults.public()

    # -- answering requests ---------------------------------------------------------------

    def _respond(
        self,
        method: str,
        target: str,
        host: str | None,
        body: bytes = b"",
        conditions: tuple[str | None, str | None] = (None, None),
    ) -> _Response:
        """The answer to one request (called from the connection's thread); *conditions* are
        its ``If-None-Match`` and ``If-Modified-Since`` headers."""
        path, _, query = target.partition("?")
        if path.startswith("/_shop/"):
            return self._control(method, path, query, body)
        with self._lock:
            self._active += 1
            self._peak = max(self._peak, self._active)
        try:
            return self._answer(method, path, query, target, host, conditions)
        finally:
            with self._lock:
                self._active -= 1

    def peak_in_flight(self) -> int:
        """The most requests the shop was answering at once since the last
        :meth:`reset_peak_in_flight` (or its start): what a crawl's concurrency budget held."""
        with self._lock:
            return self._peak

    def reset_peak_in_flight(self) -> None:
        with self._lock:
            self._peak = self._active

    def _answer(
        self,
        method: str,
        path: str,
        query: str,
        target: str,
        host: str | None,
        conditions: tuple[str | None, str | None],
    ) -> _Response:
        faults, failing = self._state
        response: _Response | None = None
        if path != "/robots.txt":
            response = self._inject(faults)
        if response is None:
            try:
                response = self._route(method, path, query, host, failing, self.epoch())
                if self._validators and response.modified is not None:
                    response = _validated(response, *conditions)
            except Exception:
                logger.exception("demo shop failed to render %s", target)
                response = _error(500)
        size = 0 if method == "HEAD" else len(response.body) * response.repeat
        with self._lock:
            self._log.append((time.time(), method, target, response.status, size))
        return response

    def _inject(self, faults: _Faults) -> _Response | None:
        """Sleep the configured latency, then maybe answer with a random fault."""
        if faults.latency_ms or faults.latency_jitter_ms:
            delay = faults.latency_ms
            if faults.latency_jitter_ms:
                with self._lock:
                    delay += self._jitter_rng.uniform(0.0, faults.latency_jitter_ms)
            time.sleep(delay / 1000.0)
        if not (faults.rate_limit_429 or faults.error_rate):
            return None
        with self._lock:
            draw = self._fault_rng.random()
        retry_after: tuple[tuple[str, str], ...] = ()
        if faults.retry_after is not None:
            retry_after = (("Retry-After", str(faults.retry_after)),)
        if draw < faults.rate_limit_429:
            return _error(429, retry_after)
        if draw < faults.rate_limit_429 + faults.error_rate:
            return _error(faults.error_status, retry_after if faults.error_status == 503 else ())
        return None

    def _base_for(self, host: str | None) -> str:
        # Canonical URLs name the host the request came in on, as a real shop behind a
        # proxy would; a missing or odd Host header falls back to the bound address.
        if host and _SAFE_HOST.fullmatch(host):
            return "http://" + host
        return self._base

    def _route(
        self,
        method: str,
        path: str,
        query: str,
        host: str | None,
        failing: frozenset[int],
        epoch: int,
    ) -> _Response:
        if method not in ("GET", "HEAD"):
            return _error(405, (("Allow", "GET, HEAD"),))
        catalog, config, history = self.catalog, self.config, self.history
        if path == "/":
            home = pages.render_home(
                catalog, hostile=config.hostile, products=history.live_count(epoch)
            )
            return _html(home, modified=history.time_of(history.catalog_modified(epoch)))
        if path == "/robots.txt":
            return _Response(200, pages.ROBOTS_TXT.encode(), "text/plain; charset=utf-8")
        if path.startswith("/c/") and path.endswith("/"):
            parts = path[3:-1].split("/")
            if len(parts) == 1 and (top := catalog.top(parts[0])) is not None:
                return _html(pages.render_category(top), modified=history.start)
            if len(parts) == 2 and (leaf := catalog.leaf(parts[0], parts[1])) is not None:
                listings: Listings = history.at(epoch) if self._changing else catalog
                page = _page_number(query)
                if page is None or page > listings.page_count(leaf):
                    return _error(404)
                text = pages.render_listing(
                    listings,
                    leaf,
                    page,
                    hostile=config.hostile,
                    tracking_params=config.tracking_params,
                    variant=config.variant,
                )
                modified = 0
                if isinstance(listings, CatalogAt):
                    modified = listings.page_modified(leaf, page)
                return _html(text, modified=history.time_of(modified))
            return _error(404)
        if match := _PRODUCT_PATH.fullmatch(path):
            product_id = int(match[1])
            known = history.known(product_id)
            if known is None or known.slug != match[2]:
                return _error(404)
            if history.removed(product_id, epoch) and config.gone_status != 200:
                return _error(config.gone_status)
            product = history.product(product_id, epoch) or history.last_published(product_id)
            if product is None:
                return _error(404)  # not published yet
            if product.id in failing:
                return _error(500)
            leaf = catalog.leaf(product.top_slug, product.leaf_slug)
            assert leaf is not None
            text = pages.render_product(
                product, leaf, base_url=self._base_for(host), variant=config.variant
            )
            changed = history.product_modified(product_id, epoch)
            return _html(text, modified=history.time_of(changed))
        if match := _IMAGE_PATH.fullmatch(path):
            product = history.product(int(match[1]), epoch)
            if product is None or not 1 <= int(match[2]) <= product.images:
                return _error(404)
            return _Response(200, _IMAGE_BODY, "image/jpeg")
        if config.hostile:
            return self._route_hostile(path, query)
        return _error(404)

    def _route_hostile(self, path: str, query: str) -> _Response:
        if path == "/big":
            return _Response(200, _BIG_CHUNK, repeat=_BIG_REPEAT)
        if path == "/big-chunked":
            return _Response(200, _BIG_CHUNK, repeat=_BIG_REPEAT, chunked=True)
        if path == "/dense":
            return _Response(200, _dense_page())
        if path == "/file.bin":
            return _Response(200, _BINARY_BODY, "application/octet-stream")
        if path == "/p/broken-json.html":
            return _html(pages.render_broken_product())
        if path in ("/loop/a", "/loop/b"):
            other = "/loop/b" if path == "/loop/a" else "/loop/a"
            return _Response(302, b"", headers=(("Location", other),))
        if path == "/trap/":
            page = _page_number(query)
            return _html(pages.render_trap(page)) if page is not None else _error(404)
        if (match := _CALENDAR_PATH.fullmatch(path)) and 1 <= int(match[2]) <= 12:
            return _html(pages.render_calendar(int(match[1]), int(match[2])))
        if path == "/private/secret":
            return _html(pages.render_private())
        return _error(404)

    def _control(self, method: str, path: str, query: str, body: bytes) -> _Response:
        """The ``/_shop/*`` API: never logged, never faulted."""
        if path == "/_shop/truth" and method in ("GET", "HEAD"):
            return _json(self.truth())
        if path == "/_shop/log" and method in ("GET", "HEAD"):
            since_values = parse_qs(query).get("since")
            try:
                since = float(since_values[-1]) if since_values else None
            except ValueError:
                return _json({"error": "since must be a unix time"}, 400)
            return _json(self.request_log(since))
        if path == "/_shop/faults" and method in ("GET", "HEAD"):
            return _json(self.faults())
        if path == "/_shop/changes" and method in ("GET", "HEAD"):
            return _json(self.changes())
        if path == "/_shop/faults" and method == "POST":
            try:
                changes = json.loads(body or b"{}")
                if not isinstance(changes, dict):
                    raise TypeError("the body must be a JSON object")
                return _json(self.set_faults(**changes))
            except (TypeError, ValueError) as exc:
                return _json({"error": str(exc)}, 400)
        if path in ("/_shop/truth", "/_shop/log", "/_shop/faults", "/_shop/changes"):
            return _json({"error": "method not allowed"}, 405)
        return _json({"error": "not found"}, 404)


@functools.lru_cache(maxsize=1)
def _dense_page() -> bytes:
    """The hostile ``/dense`` page, rendered once (~9 MiB)."""
    return pages.render_dense().encode()


def _time_of(entry: tuple[float, str, str, int, int]) -> float:
    return entry[0]


def _validated(
    response: _Response, if_none_match: str | None, if_modified_since: str | None
) -> _Response:
    """*response* with its ``ETag`` (a hash of the body: exact) and ``Last-Modified`` (when
    the page last changed, to the second), or a ``304`` when the request's validators say
    the client has this very page (RFC 9110: ``If-None-Match`` wins over
    ``If-Modified-Since``)."""
    assert response.modified is not None
    etag = '"' + hashlib.blake2b(response.body, digest_size=12).hexdigest() + '"'
    modified = math.floor(response.modified)
    headers = (
        *response.headers,
        ("ETag", etag),
        ("Last-Modified", formatdate(modified, usegmt=True)),
    )
    if _not_modified(etag, modified, if_none_match, if_modified_since):
        return _Response(304, b"", headers=headers)
    return replace(response, headers=headers)


def _not_modified(
    etag: str, modified: int, if_none_match: str | None, if_modified_since: str | None
) -> bool:
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag in tags  # the weak comparison GET uses
    if if_modified_since:
        try:
            since = parsedate_to_datetime(if_modified_since).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return False  # an unreadable date is ignored, as the RFC says
        return modified <= since
    return False


def _page_number(query: str) -> int | None:
    """The ``page`` query parameter (1 when absent); ``None`` when it is not a page."""
    values = parse_qs(query).get("page") if query else None
    if not values:
        return 1
    value = values[-1]
    if not value.isdigit() or int(value) < 1:
        return None
    return int(value)


class _ShopHTTPServer(ThreadingHTTPServer):
    """One thread per connection, keep-alive, and a way to drop every connection at stop."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], shop: DemoShop) -> None:
        self.shop = shop
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _ShopHandler)

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Wake every connection thread: a stopped shop must not keep serving keep-alives."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (Scrapy cancelling /big) is normal, not a bug.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        super().handle_error(request, client_address)


class _ShopHandler(BaseHTTPRequestHandler):
    """Reads requests with the standard library, writes answers in one ``send`` each."""

    protocol_version = "HTTP/1.1"
    timeout = DEFAULT_IDLE_TIMEOUT
    server: _ShopHTTPServer

    def setup(self) -> None:
        super().setup()
        # Header and body leave in one write, so Nagle only adds delay on keep-alive.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.untrack(self.connection)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_POST_BYTES:
            self.send_error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return
        self._answer("POST", self.rfile.read(length))

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the shop keeps its own request log; stderr lines would cost throughput

    def _answer(self, method: str, body: bytes = b"") -> None:
        conditions = (self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since"))
        response = self.server.shop._respond(
            method, self.path, self.headers.get("Host"), body, conditions
        )
        lines = [f"HTTP/1.1 {response.status} {_phrase(response.status)}"]
        if response.status != 304:  # a 304 has no body, so neither type nor length
            lines.append(f"Content-Type: {response.content_type}")
            if response.chunked:
                lines.append("Transfer-Encoding: chunked")
            else:
                lines.append(f"Content-Length: {len(response.body) * response.repeat}")
        lines.extend(f"{name}: {value}" for name, value in response.headers)
        if self.close_connection:
            lines.append("Connection: close")
        elif self.request_version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if method == "HEAD" or not response.body:
                self.wfile.write(head + (b"0\r\n\r\n" if response.chunked else b""))
                return
            if response.chunked:
                chunk = b"%x\r\n%s\r\n" % (len(response.body), response.body)
                self.wfile.write(head + chunk)
                for _ in range(response.repeat - 1):
                    self.wfile.write(chunk)
                self.wfile.write(b"0\r\n\r\n")
                return
            self.wfile.write(head + response.body)
            for _ in range(response.repeat - 1):
                self.wfile.write(response.body)
        except OSError:
            self.close_connection = True  # the client went away mid-answer


# -- the ``distcrawl shop`` sub-command ---------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--products", type=int, default=DEFAULT_PRODUCTS, help="catalog size")
    parser.add_argument(
        "--variant", choices=VARIANTS, default="jsonld", help="page markup (default: jsonld)"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="a loopback address")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="random seed of the catalog (same seed, same shop)",
    )
    parser.add_argument(
        "--page-size", type=int, default=DEFAULT_PAGE_SIZE, help="products per listing page"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="MS", help="delay of every answer"
    )
    parser.add_argument(
        "--latency-jitter",
        type=float,
        default=0.0,
        metavar="MS",
        help="plus a random delay of up to MS",
    )
    parser.add_argument(
        "--error-rate",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of requests answered with --error-status",
    )
    parser.add_argument(
        "--error-status",
        type=int,
        default=DEFAULT_ERROR_STATUS,
        help=f"HTTP status of the random errors (default: {DEFAULT_ERROR_STATUS})",
    )
    parser.add_argument(
        "--fail-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products that always answer 500 (chosen from --seed)",
    )
    parser.add_argument(
        "--rate-limit-429",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of requests answered 429 with Retry-After",
    )
    parser.add_argument(
        "--retry-after",
        type=int,
        default=DEFAULT_RETRY_AFTER,
        metavar="SECONDS",
        help="the Retry-After of 429 and 503 answers",
    )
    parser.add_argument("--hostile", action="store_true", help="add the hostile pages")
    parser.add_argument(
        "--no-tracking-params",
        dest="tracking_params",
        action="store_false",
        help="link every product without ?utm_source=..&ref=..",
    )
    changes = parser.add_argument_group(
        "a shop that changes",
        "Every --change-interval seconds (a change epoch), prices and stock change, products "
        "are added and removed, deterministically from --seed and the time; "
        "GET /_shop/changes lists every change and when it was made.",
    )
    changes.add_argument(
        "--change-interval",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="length of a change epoch (default 0: the catalog never changes)",
    )
    changes.add_argument(
        "--change-rate",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of the live products whose price and/or stock change in each epoch",
    )
    changes.add_argument(
        "--add-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products added in each epoch",
    )
    changes.add_argument(
        "--remove-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products removed in each epoch (their pages answer --gone-status)",
    )
    changes.add_argument(
        "--change-cycles",
        type=int,
        default=0,
        metavar="EPOCHS",
        help="stop changing after this many epochs (default 0: never stop)",
    )
    changes.add_argument(
        "--change-start",
        type=float,
        default=None,
        metavar="UNIX_TIME",
        help="when epoch 0 began (default: when the shop starts); equal starts, equal shops",
    )
    changes.add_argument(
        "--gone-status",
        type=int,
        choices=GONE_STATUSES,
        default=DEFAULT_GONE_STATUS,
        help=f"status of a removed product's page (default {DEFAULT_GONE_STATUS}; 200: the page "
        "stays as last published and only the listings drop it)",
    )
    changes.add_argument(
        "--conditional",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="answer ETag / Last-Modified and 304 Not Modified on home, category, listing "
        "and product pages (default: on when the shop changes)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT, after printing ``{"url": ..., "pid": ...}``."""
    try:
        config = ShopConfig(
            products=args.products,
            variant=args.variant,
            seed=args.seed,
            page_size=args.page_size,
            host=args.host,
            port=args.port,
            latency_ms=args.latency,
            latency_jitter_ms=args.latency_jitter,
            error_rate=args.error_rate,
            error_status=args.error_status,
            fail_products=args.fail_products,
            rate_limit_429=args.rate_limit_429,
            retry_after=args.retry_after,
            hostile=args.hostile,
            tracking_params=args.tracking_params,
            change_interval=args.change_interval,
            change_rate=args.change_rate,
            change_add=args.add_products,
            change_remove=args.remove_products,
            change_cycles=args.change_cycles,
            change_start=args.change_start,
            gone_status=args.gone_status,
            conditional=args.conditional,
        )
    except ValueError as exc:
        print(f"distcrawl shop: {exc}", file=sys.stderr)
        return 2
    stopping = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    try:
        shop = DemoShop(config)
    except ValueError as exc:
        print(f"distcrawl shop: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    shop.start()
    try:
        print(json.dumps({"url": shop.url, "pid": os.getpid()}), flush=True)
        while not stopping.wait(0.2):
            pass
    finally:
        shop.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distcrawl.demo.server", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
