"""The ``bootstrap`` variant: a server-rendered shop in Bootstrap markup, no structured data.

Its product page prints, in this order: a breadcrumb, the name in an ``h1``, a star rating,
the price and the stock as plain paragraphs (``<p class="mb-0">Price: £57.06</p>``,
``<p class="mb-0">Out of stock</p>``), a "Product Description" heading and paragraph, and a
"Product Information" ``dl``: a 16-hex-digit code labelled "UPC" (the shop's own code, no
GTIN), Product Type, the price excluding and including tax, Tax, and on in-stock pages only an
Availability row ("In stock (7 available)"). About a quarter of the products are out of stock.
Listings are a grid of cards, each with its price and a stock line, and a numbered pager.

What a crawl must store for a product (its ground truth) is :func:`truth`.
"""

from __future__ import annotations

import hashlib
from html import escape
from typing import TYPE_CHECKING, Any

from distcrawl.demo.catalog import CURRENCY_SYMBOL

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Leaf, Listings, Product

__all__ = ["VARIANT", "availability", "render_listing", "render_product", "shop_code", "truth"]

#: the variant's name (``distcrawl demo --variant bootstrap``)
VARIANT = "bootstrap"
_STARS = ("One", "Two", "Three", "Four", "Five")


def shop_code(product: Product) -> str:
    """The 16 hex digits the shop prints as the product's "UPC" (its SKU; no valid GTIN)."""
    return hashlib.blake2b(
        f"{product.id}:{product.sku}".encode(), digest_size=8, person=b"demo-bootstrap"
    ).hexdigest()


def availability(product: Product) -> str:
    """``OutOfStock`` for about a quarter of the products, ``InStock`` for the rest."""
    return "OutOfStock" if int(shop_code(product), 16) % 4 == 0 else "InStock"


def _units(product: Product) -> int:
    return product.id * 7 % 22 + 1


def truth(product: Product) -> dict[str, Any]:
    """The product's fields as the page shows them: what a crawl must store."""
    return {
        "name": product.name,
        "price": product.price,
        "currency": product.currency,
        "sku": shop_code(product),
        "availability": availability(product),
        "description": product.description,
    }


def _money(product: Product, amount: str | None = None) -> str:
    return f"{CURRENCY_SYMBOL[product.currency]}{amount or product.price}"


def _page(title: str, body: str, head: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} | Demo Books &amp; More</title>"
        f'<link href="/static/bootstrap.min.css" rel="stylesheet">{head}</head>\n<body>'
        '<nav class="navbar navbar-expand-lg navbar-light bg-light"><div class="container">'
        '<a class="navbar-brand" href="/">Demo Books &amp; More</a>'
        '<ul class="navbar-nav"><li class="nav-item"><a class="nav-link" href="/basket/">'
        "Basket</a></li></ul></div></nav>\n"
        f'<div class="container mt-4">\n{body}\n</div>\n'
        '<footer class="footer mt-5 py-3 bg-light"><div class="container">'
        '<span class="text-muted">Prices include VAT where it applies.</span></div></footer>'
        "</body></html>\n"
    )


def _crumbs(leaf: Leaf, last: str | None) -> str:
    items = [
        '<li class="breadcrumb-item"><a href="/">Home</a></li>',
        f'<li class="breadcrumb-item"><a href="/c/{leaf.top_slug}/">{escape(leaf.top_name)}</a>'
        "</li>",
    ]
    if last is None:
        items.append(
            f'<li class="breadcrumb-item active" aria-current="page">{escape(leaf.name)}</li>'
        )
    else:
        items.append(
            f'<li class="breadcrumb-item"><a href="{leaf.path}">{escape(leaf.name)}</a></li>'
        )
        items.append(f'<li class="breadcrumb-item active" aria-current="page">{last}</li>')
    return f'<nav aria-label="breadcrumb"><ol class="breadcrumb">{"".join(items)}</ol></nav>'


def _stars(product: Product) -> str:
    n = product.id % 5
    return (
        f'<div class="mb-2 text-warning star-rating {_STARS[n]}" title="{n + 1} out of 5">'
        f"{'★' * (n + 1)}{'☆' * (4 - n)}</div>"
    )


def render_product(product: Product, leaf: Leaf, *, base_url: str) -> str:
    """A product page (see the module docstring)."""
    name = escape(product.name)
    in_stock = availability(product) == "InStock"
    stock = "In stock" if in_stock else "Out of stock"
    info = [
        ("UPC", shop_code(product)),
        ("Product Type", escape(leaf.name)),
        ("Price (excl. tax)", _money(product)),
        ("Price (incl. tax)", _money(product)),
        ("Tax", _money(product, "0.00")),
    ]
    if in_stock:
        info.append(("Availability", f"In stock ({_units(product)} available)"))
    rows = "".join(
        f'<dt class="col-sm-3">{label}</dt><dd class="col-sm-9">{value}</dd>'
        for label, value in info
    )
    body = (
        f"{_crumbs(leaf, name)}\n"
        '<div class="row">'
        f'<div class="col-md-6"><img src="{product.image_paths()[0]}" class="img-fluid"'
        f' alt="{name}"></div>'
        f'<div class="col-md-6"><h1 class="h3">{name}</h1>{_stars(product)}'
        f'<p class="mb-0">Price: {_money(product)}</p>'
        f'<p class="mb-0">{stock}</p></div></div>\n'
        '<h2 class="h5 mt-4">Product Description</h2>'
        f"<p>{escape(product.description)}</p>\n"
        '<h2 class="h5 mt-4">Product Information</h2>'
        f'<dl class="row">{rows}</dl>'
    )
    head = f'<link rel="canonical" href="{base_url}{product.path}">'
    return _page(product.name, body, head)


def render_listing(catalog: Listings, leaf: Leaf, page: int) -> str:
    """Page *page* of a leaf's listing: a grid of cards and a numbered pager."""
    pages = catalog.page_count(leaf)
    cards = "".join(
        '<div class="col"><div class="card h-100">'
        f'<img src="{p.image_paths()[0]}" class="card-img-top" alt="{escape(p.name)}">'
        f'<div class="card-body"><h3 class="h6 card-title"><a href="{p.path}">'
        f"{escape(p.name)}</a></h3>"
        f'<p class="card-text mb-0">{_money(p)}</p>'
        f'<p class="card-text small">'
        f"{'In stock' if availability(p) == 'InStock' else 'Out of stock'}</p>"
        "</div></div></div>"
        for p in catalog.listing_page(leaf, page)
    )
    items = []
    if page > 1:
        items.append(
            f'<li class="page-item"><a class="page-link" href="?page={page - 1}">Previous</a></li>'
        )
    for n in range(1, pages + 1):
        if n == page:
            items.append(
                f'<li class="page-item active" aria-current="page"><span class="page-link">{n}'
                "</span></li>"
            )
        else:
            items.append(
                f'<li class="page-item"><a class="page-link" href="?page={n}">{n}</a></li>'
            )
    if page < pages:
        items.append(
            f'<li class="page-item"><a class="page-link" href="?page={page + 1}">Next</a></li>'
        )
    pager = (
        f'<nav aria-label="Page navigation"><ul class="pagination">{"".join(items)}</ul></nav>'
        if pages > 1
        else ""
    )
    empty = "" if cards else '<p class="text-muted">No products in this category yet.</p>'
    body = (
        f'{_crumbs(leaf, None)}\n<h1 class="h3">{escape(leaf.name)}</h1>{empty}'
        f'<div class="row row-cols-2 row-cols-md-4 g-3">{cards}</div>{pager}'
    )
    title = leaf.name if page == 1 else f"{leaf.name} (page {page})"
    return _page(title, body)
