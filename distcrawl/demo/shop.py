"""The demo shop, :class:`DemoShop`: served from a background thread, it knows its ground
truth, keeps a log of every request, and is steered over HTTP under ``/_shop/``."""

from __future__ import annotations

import bisect
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, urlsplit

from distcrawl.demo.catalog import Catalog
from distcrawl.demo.changes import CatalogHistory
from distcrawl.demo.config import ShopConfig
from distcrawl.demo.faults import UNSET, FaultInjection, Faults, Unset
from distcrawl.demo.httpd import ShopHTTPServer
from distcrawl.demo.incidents import Incidents
from distcrawl.demo.responses import Response, error_response, json_response, validated
from distcrawl.demo.routes import PRODUCT_PATH, ShopRoutes

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Product

__all__ = ["DemoShop"]

#: a changing shop refuses to start this many change epochs after its change_start
MAX_EPOCHS_BEHIND = 100_000
#: how often the accept loop checks for :meth:`DemoShop.stop` (seconds)
_POLL_INTERVAL = 0.05

logger = logging.getLogger(__name__)


class DemoShop(ShopRoutes, FaultInjection):
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
        plan = self.config.incident_plan()
        self._incidents = Incidents(plan) if plan.active else None
        faults = Faults.from_config(self.config)
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
        self._server: ShopHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base = ""
        self._port = 0

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> DemoShop:
        """Bind and serve in a background thread; returns the shop itself."""
        if self._server is not None:
            raise RuntimeError("the demo shop is already running")
        server = ShopHTTPServer((self.config.host, self.config.port), self)
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
        match = PRODUCT_PATH.fullmatch(path)
        if match is None:
            return None
        product = self.history.known(int(match[1]))
        return product.sku if product is not None and product.slug == match[2] else None

    def incidents(self) -> dict[str, Any]:
        """What the shop's incidents did so far (see :mod:`distcrawl.demo.incidents`): the
        products last served in the switched template (``switched``: their URLs), those served
        before it, and the product pages whose first request failed (``failed``)."""
        found = self._incidents
        if found is None:
            return {"switched": [], "plain": [], "failed": []}
        base = self.url.rstrip("/")
        with found._lock:
            ids = {"switched": set(found.switched), "plain": set(found.plain)}
            ids["failed"] = set(found.failed)
        paths = {p.id: p.path for p in self.catalog.products()}
        return {
            name: sorted(base + paths[i] for i in got if i in paths) for name, got in ids.items()
        }

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
            "incidents": self.incidents(),
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
        retry_after: int | str | Literal[Unset.UNSET] | None = UNSET,
        hang: bool | None = None,
        robots_fault: str | None = None,
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
        if retry_after is not UNSET:
            changes["retry_after"] = (
                retry_after
                if retry_after is None or isinstance(retry_after, str)
                else int(retry_after)
            )
        if hang is not None:
            changes["hang"] = bool(hang)
        if robots_fault is not None:
            changes["robots_fault"] = str(robots_fault)
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
    ) -> Response:
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
    ) -> Response:
        faults, failing = self._state
        response: Response | None = None
        if path != "/robots.txt":
            response = self._inject(faults)
        elif faults.robots_fault:
            response = _robots_fault(faults.robots_fault)
        if response is None:
            try:
                response = self._route(method, path, query, host, failing, self.epoch())
                if self._validators and response.modified is not None:
                    response = validated(response, *conditions)
            except Exception:
                logger.exception("demo shop failed to render %s", target)
                response = error_response(500)
        size = 0 if method == "HEAD" else len(response.body) * response.repeat
        with self._lock:
            self._log.append((time.time(), method, target, response.status, size))
        return response

    def _control(self, method: str, path: str, query: str, body: bytes) -> Response:
        """The ``/_shop/*`` API: never logged, never faulted."""
        if path == "/_shop/truth" and method in ("GET", "HEAD"):
            return json_response(self.truth())
        if path == "/_shop/log" and method in ("GET", "HEAD"):
            since_values = parse_qs(query).get("since")
            try:
                since = float(since_values[-1]) if since_values else None
            except ValueError:
                return json_response({"error": "since must be a unix time"}, 400)
            return json_response(self.request_log(since))
        if path == "/_shop/faults" and method in ("GET", "HEAD"):
            return json_response(self.faults())
        if path == "/_shop/changes" and method in ("GET", "HEAD"):
            return json_response(self.changes())
        if path == "/_shop/faults" and method == "POST":
            try:
                changes = json.loads(body or b"{}")
                if not isinstance(changes, dict):
                    raise TypeError("the body must be a JSON object")
                return json_response(self.set_faults(**changes))
            except (TypeError, ValueError) as exc:
                return json_response({"error": str(exc)}, 400)
        if path in ("/_shop/truth", "/_shop/log", "/_shop/faults", "/_shop/changes"):
            return json_response({"error": "method not allowed"}, 405)
        return json_response({"error": "not found"}, 404)


def _robots_fault(fault: str) -> Response:
    if fault.isdigit():
        return error_response(int(fault))
    return Response(0, action=fault)


def _time_of(entry: tuple[float, str, str, int, int]) -> float:
    return entry[0]
