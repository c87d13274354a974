"""The ``crowded`` and ``crowded-de`` variants: product pages crowded with prices, codes and
buy buttons that are not the product's own, as real shops print them.

Every product page shows, around the product's own name, price, code and stock:

* other products first: a "Recently viewed" strip above the product, "Customers also
  bought" / "Das könnte Ihnen auch gefallen" after it (each card with its price, its model
  number and an enabled buy button), and a "Frequently bought together" bundle price;
* prices that are not the current one: a finance offer per month before the price, on sale
  (a quarter of the products) a struck "was" price before the current one, a price per
  unit after it, a shipping fee;
* the product's code printed with a label under its title: "Model: DC-000001" (``crowded``),
  "Artikelnummer: DC-000001" (``crowded-de``);
* its stock from its own controls: "In stock" or "Only 3 left" (in stock), "Available for
  pre-order", or, sold out, no buy button but a "Notify me when available" one; reviews that
  say "sold out" of other shops.

``crowded`` is English with a dot before decimals ("$12.99") and no structured data.
``crowded-de`` is German (``lang="de"``) with a comma before decimals and dots between
thousands ("12,99 €", "1.249,99 €"), and OpenGraph product tags whose
``product:retailer_item_id`` is the shop's internal id, which the page never shows.

What a crawl must store for a product (its ground truth) is :func:`truth`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from html import escape
from typing import TYPE_CHECKING, Any

from distcrawl.demo.catalog import CURRENCY_SYMBOL

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Leaf, Product

__all__ = ["VARIANTS", "internal_id", "list_price", "render_product", "truth"]

#: the variants' names (``distcrawl demo --variant crowded``)
ENGLISH, GERMAN = "crowded", "crowded-de"
VARIANTS: tuple[str, ...] = (ENGLISH, GERMAN)
#: other products shown in the "Recently viewed" strip and in the carousel
_RECENT, _CAROUSEL = 2, 4

_WORDS: dict[str, dict[str, str]] = {
    ENGLISH: {
        "lang": "en",
        "shop": "Crowded Goods",
        "home": "Home",
        "basket": "Basket",
        "recent": "Recently viewed",
        "code": "Model",
        "finance": "{amount}/mo for 12 months with Affirm",
        "was": "Was",
        "now": "Now",
        "unit": "({amount} / count)",
        "shipping": "Shipping: {amount}",
        "InStock": "In stock",
        "few": "Only {n} left",
        "PreOrder": "Available for pre-order",
        "buy": "Add to cart",
        "preorder": "Pre-order now",
        "notify": "Notify me when available",
        "bundle": "Frequently bought together",
        "bundle_price": "Buy all three: {amount}",
        "bundle_buy": "Add all three to cart",
        "description": "Description",
        "others": "Customers also bought",
        "reviews": "Reviews",
        "review": "Sold out everywhere else, glad I found it here. Five stars.",
    },
    GERMAN: {
        "lang": "de",
        "shop": "Gedränge-Markt",
        "home": "Startseite",
        "basket": "Warenkorb",
        "recent": "Zuletzt angesehen",
        "code": "Artikelnummer",
        "finance": "Finanzierung ab {amount} / Monat",
        "was": "statt",
        "now": "jetzt nur",
        "unit": "(Grundpreis: {amount} / 100 g)",
        "shipping": "zzgl. Versandkosten {amount}",
        "InStock": "Auf Lager",
        "few": "Nur noch {n} Stück",
        "PreOrder": "Vorbestellbar",
        "buy": "In den Warenkorb",
        "preorder": "Jetzt vorbestellen",
        "notify": "Benachrichtigen, wenn verfügbar",
        "bundle": "Wird oft zusammen gekauft",
        "bundle_price": "Alle drei zusammen: {amount}",
        "bundle_buy": "Alle drei in den Warenkorb",
        "description": "Beschreibung",
        "others": "Das könnte Ihnen auch gefallen",
        "reviews": "Bewertungen",
        "review": "Überall sonst ausverkauft, zum Glück gab es ihn hier. Fünf Sterne.",
    },
}
_SHIPPING = "4.95"


def list_price(product: Product) -> str | None:
    """The struck "was" price of about a quarter of the products (the others are not on
    sale), five quarters of the price."""
    if product.id % 4 != 1:
        return None
    cents = int(product.price.replace(".", "")) * 5 // 4
    return f"{cents // 100}.{cents % 100:02d}"


def internal_id(product: Product) -> str:
    """The shop's internal id of a product (``crowded-de``'s OpenGraph item id), never
    shown on its page."""
    return str(700_000 + product.id * 37)


def _few_left(product: Product) -> int | None:
    """The count of "Only 3 left" on about a fifth of the in-stock products."""
    return product.id % 5 + 1 if product.id % 5 in (2, 3) else None


def truth(product: Product) -> dict[str, Any]:
    """The product's fields as the page shows them: what a crawl must store."""
    was = list_price(product)
    return {
        "name": product.name,
        "price": product.price,
        "currency": product.currency,
        "sku": product.sku,
        "availability": product.availability,
        "description": product.description,
        "list_price": Decimal(was) if was else None,
    }


def _money(variant: str, currency: str, amount: str) -> str:
    """An amount as the variant's shop prints it: "$1,249.99" or "1.249,99 €"."""
    whole, cents = amount.split(".")
    symbol = CURRENCY_SYMBOL[currency]
    if variant == GERMAN:
        return f"{int(whole):,}".replace(",", ".") + f",{cents}\u00a0{symbol}"
    return f"{symbol}{int(whole):,}.{cents}"


def _share(amount: str, parts: int) -> str:
    cents = int(amount.replace(".", "")) // parts
    return f"{cents // 100}.{cents % 100:02d}"


def _card(variant: str, product: Product, button: str) -> str:
    money = _money(variant, product.currency, product.price)
    words = _WORDS[variant]
    return (
        f'<li class="tile"><a href="{product.path}">{escape(product.name)}</a>'
        f'<span class="price">{money}</span>'
        f'<span class="tile-code">{words["code"]}: {product.sku}</span>'
        f'<button class="btn" type="button">{button}</button></li>'
    )


def _neighbours(product: Product, others: Sequence[Product]) -> tuple[list[Product], ...]:
    """The products of the "Recently viewed" strip and of the carousel: the others of its
    category before and after it."""
    rest = [p for p in others if p.id != product.id]
    if not rest:
        return [], []
    at = sum(1 for p in rest if p.id < product.id)
    ring = rest[at:] + rest[:at]
    return ring[-_RECENT:], ring[:_CAROUSEL]


def render_product(
    product: Product,
    leaf: Leaf,
    *,
    base_url: str,
    variant: str,
    others: Sequence[Product] = (),
) -> str:
    """A product page of *variant*; *others* are products of its category, shown as
    recently viewed and in the carousel."""
    words = _WORDS[variant]
    cur = product.currency

    def money(amount: str) -> str:
        return _money(variant, cur, amount)

    name = escape(product.name)
    recent, carousel = _neighbours(product, others)
    images = "".join(f'<img src="{src}" alt="{name}">' for src in product.image_paths())
    was = list_price(product)
    if was:
        price_box = (
            f'<span class="label">{words["was"]}</span> '
            f'<s class="price price--compare">{money(was)}</s> '
            f'<span class="label">{words["now"]}</span> '
            f'<span class="price price--sale">{money(product.price)}</span>'
        )
    else:
        price_box = f'<span class="price">{money(product.price)}</span>'
    unit = words["unit"].format(amount=money(_share(product.price, 12)))
    finance = words["finance"].format(amount=money(_share(product.price, 12)))
    if product.availability == "OutOfStock":
        stock = ""
        buy = f'<button class="btn notify" type="button">{words["notify"]}</button>'
    elif product.availability == "PreOrder":
        stock = f'<p class="stock">{words["PreOrder"]}</p>'
        buy = f'<button class="btn add-to-cart" type="submit">{words["preorder"]}</button>'
    else:
        few = _few_left(product)
        line = words["few"].format(n=few) if few else words["InStock"]
        stock = f'<p class="stock">{line}</p>'
        buy = f'<button class="btn add-to-cart" type="submit">{words["buy"]}</button>'
    bundle_total = sum((Decimal(p.price) for p in carousel[:2]), Decimal(product.price))
    bundle = (
        f'<section class="fbt"><h2>{words["bundle"]}</h2><p>{name} + '
        + " + ".join(escape(p.name) for p in carousel[:2])
        + f'</p><p class="price">{words["bundle_price"].format(amount=money(str(bundle_total)))}'
        f'</p><button class="btn" type="button">{words["bundle_buy"]}</button></section>'
        if len(carousel) >= 2
        else ""
    )
    body = (
        f'<header class="site-header"><a class="logo" href="/">{words["shop"]}</a> '
        f'<a href="/cart">{words["basket"]}</a></header>\n'
        f'<nav aria-label="Breadcrumb"><a href="/">{words["home"]}</a> &rsaquo; '
        f'<a href="/c/{leaf.top_slug}/">{escape(leaf.top_name)}</a> &rsaquo; '
        f'<a href="{leaf.path}">{escape(leaf.name)}</a></nav>\n<main>'
        + (
            f'<section class="strip"><h3>{words["recent"]}</h3><ul>'
            + "".join(_card(variant, p, words["buy"]) for p in recent)
            + "</ul></section>"
            if recent
            else ""
        )
        + f'<div class="pdp"><div class="media">{images}</div><div class="summary">'
        f"<h1>{name}</h1>"
        f'<p class="code">{words["code"]}: <span>{product.sku}</span></p>'
        f'<div class="finance"><span class="price">{finance}</span></div>'
        f'<div class="price-box">{price_box}</div>'
        f'<p class="unit">{unit}</p>'
        f'<p class="shipping-note">{words["shipping"].format(amount=money(_SHIPPING))}</p>'
        f"{stock}<form>{buy}</form></div>"
        f"{bundle}"
        f"<h2>{words['description']}</h2><p>{escape(product.description)}</p></div>"
        + (
            f'<section class="carousel"><h2>{words["others"]}</h2><ul>'
            + "".join(_card(variant, p, words["buy"]) for p in carousel)
            + "</ul></section>"
            if carousel
            else ""
        )
        + f'<section id="reviews"><h2>{words["reviews"]}</h2>'
        f"<blockquote>{words['review']}</blockquote></section></main>"
        f'<footer><a href="/about">About</a></footer>'
    )
    head = f'<link rel="canonical" href="{base_url}{product.path}">'
    if variant == GERMAN:
        head += (
            '<meta property="og:type" content="product">'
            f'<meta property="og:title" content="{name}">'
            f'<meta property="product:retailer_item_id" content="{internal_id(product)}">'
        )
    return (
        f'<!DOCTYPE html>\n<html lang="{words["lang"]}"><head><meta charset="utf-8">'
        f"<title>{name} | {words['shop']}</title>{head}</head>\n"
        f"<body>{body}</body></html>\n"
    )
