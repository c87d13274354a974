"""Shop templates without structured data: three markup families, as different real shops are.

Each variant has its own product page, listing and pager, and none of them has JSON-LD,
microdata, RDFa or OpenGraph, nor the class names a site profile would key on. They are
what the generic extraction must read with no profile:

* ``dlist``: a "product information" definition list (``dt``/``dd``: product code, EAN,
  brand, stock count), an ARIA breadcrumb, a disabled "Add to basket" button when sold out;
  listings as a grid of tiles, a numbered pager in ``nav[aria-label=Pagination]`` whose
  next link is a bare ``&rsaquo;`` with ``aria-label="Next page"``.
* ``specs``: a specifications table (``th``/``td``: SKU, manufacturer, stock), the amount
  and the currency code in separate spans ("12,99 EUR"), an ``ol.breadcrumb``; listings as
  a table with one row per product, a pager of "Seite N" links and a "Weiter" link, no
  ``rel`` and no pagination class.
* ``text``: plain paragraphs with labels ("Our price: £12.99", "Item number: …",
  "Availability: …"), a sale price with the list price struck through, a buy form; listings
  as an ordered list "name — price", a "Page 2 of 5" line with "Next page →".
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from distcrawl.demo.catalog import CURRENCY_SYMBOL

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Leaf, Listings, Product

__all__ = ["TEMPLATE_VARIANTS", "list_price", "render_listing", "render_product", "stock_count"]

#: the variants rendered here
TEMPLATE_VARIANTS: tuple[str, ...] = ("dlist", "specs", "text")

#: per variant, the stock wording of each schema.org availability the catalog uses
_STOCK_TEXT: dict[str, dict[str, str]] = {
    "dlist": {
        "InStock": "In stock ({n} available)",
        "OutOfStock": "Out of stock (0 available)",
        "PreOrder": "Pre-order: ships next month",
    },
    "specs": {"InStock": "Available", "OutOfStock": "Sold out", "PreOrder": "Pre-order"},
    "text": {
        "InStock": "In stock, ships in 2 days",
        "OutOfStock": "Currently unavailable",
        "PreOrder": "Available for pre-order",
    },
}


def stock_count(product: Product) -> int:
    """Units in stock the ``dlist`` pages show: 2..51, round tens among them."""
    return (product.id * 13) % 50 + 2


def _money(product: Product, amount: str | None = None) -> str:
    """The price the way each shop prints a symbol first: "$12.99", "€12,99"."""
    amount = amount or product.price
    if product.currency == "EUR":
        return f"€{amount.replace('.', ',')}"
    return f"{CURRENCY_SYMBOL[product.currency]}{amount}"


def list_price(product: Product) -> str | None:
    """A struck-through "was" price for about a quarter of the products."""
    if product.id % 4:
        return None
    cents = int(product.price.replace(".", "")) * 5 // 4
    return f"{cents // 100}.{cents % 100:02d}"


def _page(title: str, body: str, head: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - Demo Store</title>{head}</head>\n"
        '<body><div id="top"><a href="/">Demo Store</a> <a href="/cart">Basket</a></div>\n'
        f'<div id="content">\n{body}\n</div>'
        '<div id="bottom"><a href="/about">About us</a> <a href="/terms">Terms</a></div>'
        "</body></html>\n"
    )


def render_product(product: Product, leaf: Leaf, *, base_url: str, variant: str) -> str:
    """A product page of one of :data:`TEMPLATE_VARIANTS`."""
    name = escape(product.name)
    top_path = f"/c/{leaf.top_slug}/"
    stock = _STOCK_TEXT[variant][product.availability].format(n=stock_count(product))
    sold_out = product.availability == "OutOfStock"
    images = "".join(f'<img src="{src}" alt="{name}">' for src in product.image_paths())
    head = f'<link rel="canonical" href="{base_url}{product.path}">'
    if variant == "dlist":
        disabled = " disabled" if sold_out else ""
        body = (
            '<nav aria-label="Breadcrumb"><ol><li><a href="/">Home</a></li>'
            f'<li><a href="{top_path}">{escape(leaf.top_name)}</a></li>'
            f'<li><a href="{leaf.path}">{escape(leaf.name)}</a></li>'
            f'<li aria-current="page">{name}</li></ol></nav>\n'
            f'<div class="main"><h1>{name}</h1>'
            f'<div class="photos">{images}</div>'
            f'<p class="amount">{_money(product)}</p>'
            f'<form method="post" action="/basket/add"><input type="hidden" name="id"'
            f' value="{product.id}"><button type="submit"{disabled}>Add to basket</button>'
            "</form>"
            "<h2>Product information</h2><dl>"
            f"<dt>Product code</dt><dd>{product.sku}</dd>"
            f"<dt>EAN</dt><dd>{product.gtin13}</dd>"
            f"<dt>Brand</dt><dd>{escape(product.brand)}</dd>"
            f"<dt>Stock</dt><dd>{stock}</dd></dl>"
            f"<h2>Description</h2><p>{escape(product.description)}</p></div>"
        )
    elif variant == "specs":
        amount = product.price.replace(".", ",") if product.currency == "EUR" else product.price
        button = (
            "<p><em>This item cannot be ordered at the moment.</em></p>"
            if sold_out
            else '<button class="btn" type="button">Add to cart</button>'
        )
        body = (
            '<ol class="breadcrumb"><li><a href="/">Home</a></li>'
            f'<li><a href="{top_path}">{escape(leaf.top_name)}</a></li>'
            f'<li><a href="{leaf.path}">{escape(leaf.name)}</a></li></ol>\n'
            f'<section><h1 class="title">{name}</h1>'
            f'<div class="figure">{images}</div>'
            f'<div class="buy"><span class="value">{amount}</span> '
            f'<span class="code">{product.currency}</span> <small>incl. VAT</small>'
            f"{button}</div>"
            f"<p>{escape(product.description)}</p>"
            '<table class="specs"><caption>Specifications</caption>'
            f"<tr><th>SKU</th><td>{product.sku}</td></tr>"
            f"<tr><th>Manufacturer</th><td>{escape(product.brand)}</td></tr>"
            f"<tr><th>Weight</th><td>{product.id % 9 + 1}00 g</td></tr>"
            f"<tr><th>Stock</th><td>{stock}</td></tr></table></section>"
        )
    else:
        was = list_price(product)
        price = f"Our price: {_money(product)}"
        if was:
            price = f"Now {_money(product)} <s>Was {_money(product, was)}</s>"
        buy = "" if sold_out else '<form action="/cart/add"><button>Buy now</button></form>'
        body = (
            f'<p class="trail"><a href="/">Home</a> / <a href="{top_path}">'
            f'{escape(leaf.top_name)}</a> / <a href="{leaf.path}">{escape(leaf.name)}</a></p>\n'
            f"<h1>{name}</h1>{images}"
            f"<p>{price}</p>"
            f"<p><b>Item number:</b> {product.sku}</p>"
            f"<p><b>Availability:</b> {stock}</p>{buy}"
            f"<p>{escape(product.description)}</p>"
            f"<p>Made by {escape(product.brand)}.</p>"
        )
    return _page(product.name, body, head)


def render_listing(catalog: Listings, leaf: Leaf, page: int, *, variant: str) -> str:
    """Page ``page`` of a leaf's listing in the markup of *variant*."""
    pages = catalog.page_count(leaf)
    products = catalog.listing_page(leaf, page)
    name = escape(leaf.name)
    top = f'<a href="/c/{leaf.top_slug}/">{escape(leaf.top_name)}</a>'
    if variant == "dlist":
        tiles = "".join(
            f'<div class="tile"><a href="{p.path}"><img src="{p.image_paths()[0]}" alt="">'
            f"<span>{escape(p.name)}</span></a><b>{_money(p)}</b></div>"
            for p in products
        )
        numbers = "".join(
            f'<li><span aria-current="page">{n}</span></li>'
            if n == page
            else f'<li><a href="?page={n}">{n}</a></li>'
            for n in range(1, pages + 1)
        )
        if page < pages:
            numbers += f'<li><a href="?page={page + 1}" aria-label="Next page">&rsaquo;</a></li>'
        pager = f'<nav aria-label="Pagination"><ul>{numbers}</ul></nav>' if pages > 1 else ""
        body = f'<p>{top}</p><h1>{name}</h1><div class="grid">{tiles}</div>{pager}'
    elif variant == "specs":
        rows = "".join(
            f'<tr><td><a href="{p.path}">{escape(p.name)}</a></td>'
            f"<td>{p.price.replace('.', ',') if p.currency == 'EUR' else p.price}"
            f" {p.currency}</td></tr>"
            for p in products
        )
        links = " ".join(
            f"<b>Seite {n}</b>" if n == page else f'<a href="?page={n}">Seite {n}</a>'
            for n in range(1, pages + 1)
        )
        if page < pages:
            links += f' <a href="?page={page + 1}">Weiter</a>'
        pager = f"<div>{links}</div>" if pages > 1 else ""
        body = (
            f'<ol class="breadcrumb"><li><a href="/">Home</a></li><li>{top}</li></ol>'
            f"<h1>{name}</h1><table><tr><th>Product</th><th>Price</th></tr>{rows}</table>"
            f"{pager}"
        )
    else:
        items = "".join(
            f'<li><a href="{p.path}">{escape(p.name)}</a> &mdash; {_money(p)}</li>'
            for p in products
        )
        pager = ""
        if pages > 1:
            pager = f"<p>Page {page} of {pages}"
            if page > 1:
                pager += f' <a href="?page={page - 1}">&larr; Previous page</a>'
            if page < pages:
                pager += f' <a href="?page={page + 1}">Next page &rarr;</a>'
            pager += "</p>"
        body = f"<p>{top}</p><h1>{name}</h1><ol>{items}</ol>{pager}"
    if not products:
        body += "<p>No products in this category yet.</p>"
    title = leaf.name if page == 1 else f"{leaf.name} (page {page})"
    return _page(title, body)
