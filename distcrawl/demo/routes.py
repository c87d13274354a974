"""The demo shop's pages by path: home, categories, listings, products and images, the
hostile pages, each rendered in the shop's page variant."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from distcrawl.demo import crowded, pages
from distcrawl.demo.changes import CatalogAt
from distcrawl.demo.incidents import render_switched
from distcrawl.demo.responses import Response, error_response, html_response

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Catalog, Listings
    from distcrawl.demo.changes import CatalogHistory
    from distcrawl.demo.config import ShopConfig
    from distcrawl.demo.incidents import Incidents

__all__ = ["BIG_PAGE_BYTES", "PRODUCT_PATH", "ShopRoutes"]

#: body size of the hostile ``/big`` page
BIG_PAGE_BYTES = 20 * 1024 * 1024
PRODUCT_PATH = re.compile(r"/p/(\d{1,9})-([a-z0-9-]+)\.html")
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


class ShopRoutes:
    """The answer to a page request, by path (a part of :class:`DemoShop`)."""

    catalog: Catalog
    config: ShopConfig
    history: CatalogHistory
    _changing: bool
    _base: str
    _incidents: Incidents | None

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
    ) -> Response:
        if method not in ("GET", "HEAD"):
            return error_response(405, (("Allow", "GET, HEAD"),))
        catalog, config, history = self.catalog, self.config, self.history
        if path == "/":
            home = pages.render_home(
                catalog, hostile=config.hostile, products=history.live_count(epoch)
            )
            return html_response(home, modified=history.time_of(history.catalog_modified(epoch)))
        if path == "/robots.txt":
            return Response(
                200, pages.render_robots(config.crawl_delay), "text/plain; charset=utf-8"
            )
        if path.startswith("/c/") and path.endswith("/"):
            parts = path[3:-1].split("/")
            if len(parts) == 1 and (top := catalog.top(parts[0])) is not None:
                return html_response(pages.render_category(top), modified=history.start)
            if len(parts) == 2 and (leaf := catalog.leaf(parts[0], parts[1])) is not None:
                listings: Listings = history.at(epoch) if self._changing else catalog
                page = _page_number(query)
                if page is None or page > listings.page_count(leaf):
                    return error_response(404)
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
                return html_response(text, modified=history.time_of(modified))
            return error_response(404)
        if match := PRODUCT_PATH.fullmatch(path):
            product_id = int(match[1])
            known = history.known(product_id)
            if known is None or known.slug != match[2]:
                return error_response(404)
            if history.removed(product_id, epoch) and config.gone_status != 200:
                return error_response(config.gone_status)
            product = history.product(product_id, epoch) or history.last_published(product_id)
            if product is None:
                return error_response(404)  # not published yet
            if product.id in failing:
                return error_response(500)
            incidents = self._incidents
            if incidents is not None and (failed := incidents.before_render(product.id)):
                return failed
            leaf = catalog.leaf(product.top_slug, product.leaf_slug)
            assert leaf is not None
            others = (
                [p for i in leaf.product_ids if (p := catalog.product(i)) is not None]
                if config.variant in crowded.VARIANTS
                else []
            )
            if incidents is not None and incidents.switched_now(product.id):
                text = render_switched(product, leaf, base_url=self._base_for(host))
            else:
                text = pages.render_product(
                    product,
                    leaf,
                    base_url=self._base_for(host),
                    variant=config.variant,
                    others=others,
                )
            changed = history.product_modified(product_id, epoch)
            return html_response(text, modified=history.time_of(changed))
        if match := _IMAGE_PATH.fullmatch(path):
            product = history.product(int(match[1]), epoch)
            if product is None or not 1 <= int(match[2]) <= product.images:
                return error_response(404)
            return Response(200, _IMAGE_BODY, "image/jpeg")
        if config.hostile:
            return self._route_hostile(path, query)
        return error_response(404)

    def _route_hostile(self, path: str, query: str) -> Response:
        if path == "/big":
            return Response(200, _BIG_CHUNK, repeat=_BIG_REPEAT)
        if path == "/big-chunked":
            return Response(200, _BIG_CHUNK, repeat=_BIG_REPEAT, chunked=True)
        if path == "/dense":
            return Response(200, _dense_page())
        if path == "/file.bin":
            return Response(200, _BINARY_BODY, "application/octet-stream")
        if path == "/p/broken-json.html":
            return html_response(pages.render_broken_product())
        if path in ("/loop/a", "/loop/b"):
            other = "/loop/b" if path == "/loop/a" else "/loop/a"
            return Response(302, b"", headers=(("Location", other),))
        if path == "/trap/":
            page = _page_number(query)
            return (
                html_response(pages.render_trap(page)) if page is not None else error_response(404)
            )
        if (match := _CALENDAR_PATH.fullmatch(path)) and 1 <= int(match[2]) <= 12:
            return html_response(pages.render_calendar(int(match[1]), int(match[2])))
        if path == "/private/secret":
            return html_response(pages.render_private())
        return error_response(404)


@functools.lru_cache(maxsize=1)
def _dense_page() -> bytes:
    """The hostile ``/dense`` page, rendered once (~9 MiB)."""
    return pages.render_dense().encode()


def _page_number(query: str) -> int | None:
    """The ``page`` query parameter (1 when absent); ``None`` when it is not a page."""
    values = parse_qs(query).get("page") if query else None
    if not values:
        return 1
    value = values[-1]
    if not value.isdigit() or int(value) < 1:
        return None
    return int(value)
