"""HTML for the demo shop's pages, built with plain string formatting.

No templating engine on purpose: benchmarks crawl the shop at hundreds of pages per second
and the shop must not be the bottleneck. The markup follows the shop's HTML spec exactly
(class names, link shapes, JSON-LD fields), because the spider's extraction and the site
profile of the ``plain`` variant are written against it.
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

from distcrawl.demo import bootstrap, crowded, templates
from distcrawl.demo.catalog import AVAILABILITY_TEXT, CURRENCY_SYMBOL

if TYPE_CHECKING:
    from collections.abc import Sequence

    from distcrawl.demo.catalog import Catalog, Leaf, Listings, Product, TopCategory

__all__ = [
    "DENSE_LINKS",
    "HOSTILE_LINKS",
    "ROBOTS_TXT",
    "render_broken_product",
    "render_calendar",
    "render_category",
    "render_dense",
    "render_error",
    "render_home",
    "render_listing",
    "render_private",
    "render_product",
    "render_robots",
    "render_trap",
]

#: the shop's robots.txt: everything is allowed except the control API and /private/
ROBOTS_TXT = "User-agent: *\nDisallow: /_shop/\nDisallow: /private/\n"


def render_robots(crawl_delay: float | None) -> bytes:
    """The shop's robots.txt, with a ``Crawl-delay`` line when it asks for one."""
    text = ROBOTS_TXT if crawl_delay is None else f"{ROBOTS_TXT}Crawl-delay: {crawl_delay:g}\n"
    return text.encode()


#: (path, text) of the hostile pages linked from home and listings when ``hostile`` is on
HOSTILE_LINKS: tuple[tuple[str, str], ...] = (
    ("/big", "Full catalogue (one page)"),
    ("/file.bin", "Price list download"),
    ("/p/broken-json.html", "Mystery product"),
    ("/loop/a", "Special offers"),
    ("/trap/", "All products, sorted"),
    ("/calendar/2026/11/", "Events calendar"),
    ("/private/secret", "Staff only"),
    ("/dense", "Every category (one page)"),
    ("/big-chunked", "Live stock feed"),
)
#: links on the hostile ``/dense`` page (~9 MiB of short category links, none of them real)
DENSE_LINKS = 400_000

#: the number of page links around the current one before pagination collapses to "…"
_PAGINATION_WINDOW = 2
#: a pagination with at most this many pages shows every page number
_PAGINATION_SHOW_ALL = 10


def _page(title: str, body: str, head: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} | distcrawl demo shop</title>{head}</head>\n"
        '<body><header><a class="logo" href="/">distcrawl demo shop</a></header>\n'
        f"<main>\n{body}\n</main></body></html>\n"
    )


def _crumbs(*links: tuple[str, str]) -> str:
    """The breadcrumb of category and listing pages (the same in both variants)."""
    parts = [
        '<a href="/">Home</a>',
        *(f'<a href="{href}">{escape(name)}</a>' for href, name in links),
    ]
    return '<nav class="breadcrumb">' + " &rsaquo; ".join(parts) + "</nav>"


def _hostile_block() -> str:
    links = "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in HOSTILE_LINKS)
    return f'<aside class="more"><ul>{links}</ul></aside>'


def display_price(product: Product) -> str:
    """The price as a shopper reads it in listings and on ``jsonld`` pages: ``$12.99``."""
    return f"{CURRENCY_SYMBOL[product.currency]}{product.price}"


def render_home(catalog: Catalog, *, hostile: bool = False, products: int | None = None) -> str:
    """The home page; *products* is the count it announces (default: the catalog's size)."""
    count = len(catalog) if products is None else products
    links = "".join(f'<a href="{top.path}">{escape(top.name)}</a>' for top in catalog.tops)
    body = (
        "<h1>Welcome to the distcrawl demo shop</h1>\n"
        f'<nav class="categories">{links}</nav>'
        f"<p>{count} products in {len(catalog.leaves())} categories.</p>"
    )
    if hostile:
        body += _hostile_block()
    return _page("Home", body)


def render_category(top: TopCategory) -> str:
    items = "".join(
        f'<li><a href="{leaf.path}">{escape(leaf.name)}</a></li>' for leaf in top.leaves
    )
    body = (
        f"{_crumbs((top.path, top.name))}\n<h1>{escape(top.name)}</h1>\n"
        f'<ul class="subcategories">{items}</ul>'
    )
    return _page(top.name, body)


def _page_numbers(page: int, pages: int) -> list[int | None]:
    """Page numbers to link, ``None`` where a run of pages is left out."""
    if pages <= _PAGINATION_SHOW_ALL:
        return list(range(1, pages + 1))
    keep = {1, pages, *range(page - _PAGINATION_WINDOW, page + _PAGINATION_WINDOW + 1)}
    numbers: list[int | None] = []
    for n in range(1, pages + 1):
        if n in keep:
            numbers.append(n)
        elif numbers[-1] is not None:
            numbers.append(None)
    return numbers


def render_listing(
    catalog: Listings,
    leaf: Leaf,
    page: int,
    *,
    hostile: bool = False,
    tracking_params: bool = True,
    variant: str = "jsonld",
) -> str:
    """Page ``page`` of a leaf's listing (the caller checks that the page exists)."""
    if variant in templates.TEMPLATE_VARIANTS:
        return templates.render_listing(catalog, leaf, page, variant=variant)
    if variant == bootstrap.VARIANT:
        return bootstrap.render_listing(catalog, leaf, page)
    pages = catalog.page_count(leaf)
    cards = []
    for position, product in enumerate(catalog.listing_page(leaf, page), start=1):
        href = product.path
        if tracking_params and catalog.tracked_link(product.id):
            href += f"?utm_source=listing&amp;ref=card{position}"
        cards.append(
            f'<li class="product-card"><a class="product-link" href="{href}">'
            f"{escape(product.name)}</a>"
            f'<span class="card-price">{display_price(product)}</span></li>\n'
        )
    head = ""
    nav = ""
    if pages > 1:
        links = []
        if page > 1:
            links.append(f'<a class="prev" rel="prev" href="?page={page - 1}">Previous</a>')
            head += f'<link rel="prev" href="{leaf.path}?page={page - 1}">'
        for n in _page_numbers(page, pages):
            if n is None:
                links.append('<span class="gap">…</span>')
            elif n == page:
                links.append(f'<a class="current" aria-current="page" href="?page={n}">{n}</a>')
            else:
                links.append(f'<a href="?page={n}">{n}</a>')
        if page < pages:
            links.append(f'<a class="next" rel="next" href="?page={page + 1}">Next</a>')
            head += f'<link rel="next" href="{leaf.path}?page={page + 1}">'
        nav = '<nav class="pagination">' + " ".join(links) + "</nav>"
    empty = "" if cards else '<p class="empty">No products in this category yet.</p>'
    title = leaf.name if page == 1 else f"{leaf.name} (page {page})"
    body = (
        f"{_crumbs((f'/c/{leaf.top_slug}/', leaf.top_name), (leaf.path, leaf.name))}\n"
        f"<h1>{escape(leaf.name)}</h1>\n{empty}"
        f'<ul class="products">\n{"".join(cards)}</ul>\n{nav}'
    )
    if hostile:
        body += _hostile_block()
    return _page(title, body, head)


def _json_script(data: dict[str, Any]) -> str:
    # "</" would end the <script> element early; "<\/" means the same to a JSON parser.
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def render_product(
    product: Product,
    leaf: Leaf,
    *,
    base_url: str,
    variant: str,
    others: Sequence[Product] = (),
) -> str:
    """A product page; ``base_url`` (``http://host:port``) makes the absolute URLs. *others*
    are the products of its category, which the ``crowded`` variants show beside it."""
    if variant in crowded.VARIANTS:
        return crowded.render_product(
            product, leaf, base_url=base_url, variant=variant, others=others
        )
    if variant in templates.TEMPLATE_VARIANTS:
        return templates.render_product(product, leaf, base_url=base_url, variant=variant)
    if variant == bootstrap.VARIANT:
        return bootstrap.render_product(product, leaf, base_url=base_url)
    canonical = base_url + product.path
    head = f'<link rel="canonical" href="{canonical}">'
    name = escape(product.name)
    top_path = f"/c/{leaf.top_slug}/"
    if variant == "plain":
        # Deliberately non-standard: no JSON-LD, microdata or OpenGraph, a localised price
        # text, and class names only a hand-written site profile knows.
        amount = product.price.replace(".", ",") if product.currency == "EUR" else product.price
        images = "".join(f'<img src="{src}" alt="{name}">' for src in product.image_paths())
        body = (
            '<ol class="trail"><li><a href="/">Home</a></li>'
            f'<li><a href="{top_path}">{escape(leaf.top_name)}</a></li>'
            f'<li><a href="{leaf.path}">{escape(leaf.name)}</a></li></ol>\n'
            f'<div class="pdp"><h2 class="pdp-name">{name}</h2>'
            f'<div class="pdp-cost" data-amount="{product.price}" data-cur="{product.currency}">'
            f"{CURRENCY_SYMBOL[product.currency]}{amount}</div>"
            f'<div class="pdp-stock">{AVAILABILITY_TEXT[product.availability]}</div>'
            f'<div class="pdp-code">SKU: {product.sku}</div>'
            f'<div class="pdp-desc">{escape(product.description)}</div>'
            f'<div class="pdp-gallery">{images}</div></div>'
        )
        return _page(product.name, body, head)

    ld_product = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": product.name,
        "sku": product.sku,
        "gtin13": product.gtin13,
        "brand": {"@type": "Brand", "name": product.brand},
        "description": product.description,
        "image": [base_url + src for src in product.image_paths()],
        "offers": {
            "@type": "Offer",
            "price": product.price,
            "priceCurrency": product.currency,
            "availability": f"https://schema.org/{product.availability}",
            "url": canonical,
        },
    }
    ld_crumbs = {
        "@context": "https://schema.org",
        "@type": "BreadcrumbList",
        "itemListElement": [
            {"@type": "ListItem", "position": i, "name": crumb_name, "item": base_url + path}
            for i, (crumb_name, path) in enumerate(
                (("Home", "/"), (leaf.top_name, top_path), (leaf.name, leaf.path)), start=1
            )
        ],
    }
    images = "".join(f'<img src="{src}" alt="{name}">' for src in product.image_paths())
    body = (
        f"{_crumbs((top_path, leaf.top_name), (leaf.path, leaf.name))}\n"
        f'<article class="product"><h1>{name}</h1>'
        f'<p class="price">{display_price(product)}</p>'
        f'<p class="stock">{AVAILABILITY_TEXT[product.availability]}</p>'
        f'<p class="brand">{escape(product.brand)}</p>'
        f'<p class="description">{escape(product.description)}</p>'
        f'<div class="gallery">{images}</div></article>\n'
        f"{_json_script(ld_product)}\n{_json_script(ld_crumbs)}"
    )
    return _page(product.name, body, head)


def render_broken_product() -> str:
    """Malformed HTML with truncated JSON-LD: a parser must survive it, not store it."""
    return (
        "<html><head><title>Mystery product</head><body>\n"
        '<script type="application/ld+json">{"@context": "https://schema.org", '
        '"@type": "Product", "name": "Mystery product", "offers": {"price": "9.99", '
        '"priceCurrency": </script>\n'
        '<script type="application/ld+json">{"@type": "Product",, }</script>\n'
        "<div><h1>Mystery <b>product</i></h1><p>Price: <span class=price>9.99\n"
        "<table><tr><td>unclosed <a href='/'>home\n"
    )


def render_trap(page: int) -> str:
    """An endless pagination: every page links the next one."""
    body = (
        f"<h1>All products, page {page}</h1>"
        f'<nav class="pagination"><a class="next" rel="next" href="?page={page + 1}">Next</a>'
        "</nav>"
    )
    return _page(f"All products (page {page})", body)


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = digits[d] + out
        if not n:
            return out


def render_dense(links: int = DENSE_LINKS) -> str:
    """A page of *links* short category links in its navigation (each one a 404): what a
    node must parse without stalling, and must not queue whole."""
    nav = "".join(f'<a href="/c/{_base36(i)}/">.</a>' for i in range(links))
    return _page("Every category", f"<h1>Every category</h1><nav>{nav}</nav>")


def render_calendar(year: int, month: int) -> str:
    """A calendar month that links the months before and after it, forever."""
    prev_y, prev_m = (year, month - 1) if month > 1 else (year - 1, 12)
    next_y, next_m = (year, month + 1) if month < 12 else (year + 1, 1)
    body = (
        f"<h1>Events in {year}-{month:02d}</h1><p>No events.</p>"
        f'<a class="prev" href="/calendar/{prev_y}/{prev_m:02d}/">Previous month</a> '
        f'<a class="next" href="/calendar/{next_y}/{next_m:02d}/">Next month</a>'
    )
    return _page(f"Events {year}-{month:02d}", body)


def render_private() -> str:
    return _page("Staff only", "<h1>Staff only</h1><p>robots.txt asked you not to come here.</p>")


def render_error(status: int, reason: str) -> str:
    return _page(f"{status} {reason}", f'<h1 class="error">{status} {reason}</h1>')
