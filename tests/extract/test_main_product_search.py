"""A seeded search over product pages crowded with neighbours: whatever other products'
sections surround it (before or after it, under any neighbour title), whatever instalment,
unit, shipping, saving and was prices sit around its price, in whatever notation, the page's
own price, list price, code and stock are the ones read."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcrawl.extract import analyze

URL = "https://shop.example/p/blue-lamp-1.html"

#: (sign, decimal mark, thousands separator, sign first)
NOTATIONS = [("$", ".", ",", True), ("£", ".", ",", True), ("€", ",", ".", False)]
TITLES = [
    "Customers also bought",
    "You may also like",
    "Related products",
    "Frequently bought together",
    "Recently viewed",
    "Sponsored products",
    "Similar items",
]
CODE_LABELS = ["Model", "SKU", "Item number", "Art.-Nr.", "MPN"]


def _money(cents: int, notation: tuple[str, str, str, bool]) -> str:
    sign, decimal, group, first = notation
    whole = f"{cents // 100:,}".replace(",", group)
    amount = f"{whole}{decimal}{cents % 100:02d}"
    return f"{sign}{amount}" if first else f"{amount} {sign}"


amounts = st.integers(min_value=100, max_value=99_999_999)


@st.composite
def pages(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    notation = draw(st.sampled_from(NOTATIONS))

    def money(cents: int) -> str:
        return _money(cents, notation)

    price = draw(amounts)
    was = price * 5 // 4 if draw(st.booleans()) else None
    code = draw(st.from_regex(r"[A-Z]{2}-[0-9]{4,6}", fullmatch=True))
    label = draw(st.sampled_from(CODE_LABELS))
    stock = draw(st.sampled_from(["in", "few", "plain", "out-line", "out-notify", "out-off"]))

    extras = {
        "instalment": draw(
            st.sampled_from(
                [
                    "<span class='price'>{m}/mo</span>",
                    "<p>4 x {m}</p>",
                    "<p>or 4 interest-free payments of <span class='price'>{m}</span></p>",
                    "<div class='installments'><span class='price'>{m}</span></div>",
                ]
            )
        ),
        "unit": draw(st.sampled_from(["<p>({m} / kg)</p>", "<span class='unit-price'>{m}</span>"])),
        "shipping": "<p>Shipping: {m}</p>",
        "saving": draw(st.sampled_from(["<p>Save {m}</p>", "<p class='price-save'>Save {m}</p>"])),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(extras)), unique=True))
    before = [k for k in chosen if draw(st.booleans())]
    rendered = {k: extras[k].format(m=money(draw(amounts))) for k in chosen}

    if was is None:
        box = f"<span class='price'>{money(price)}</span>"
    else:
        struck = draw(
            st.sampled_from(
                [
                    "<s>{m}</s>",
                    "<del class='price'>{m}</del>",
                    "<span class='old-price'><span class='price'>{m}</span></span>",
                    "<span>Was</span> <span class='price'>{m}</span>",
                ]
            )
        ).format(m=money(was))
        box = f"{struck} <span class='price'>{money(price)}</span>"
    stock_html = {
        "in": "<p>In stock</p><button>Add to cart</button>",
        "few": "<p>Only 2 left</p><button>Add to cart</button>",
        "plain": "<button>Add to cart</button>",
        "out-line": "<p>Sold out</p>",
        "out-notify": "<button>Notify me when available</button>",
        "out-off": "<button disabled>Add to cart</button>",
    }[stock]
    own = (
        f"<h1>Blue Lamp 1</h1><p>{label}: {code}</p>"
        + "".join(rendered[k] for k in before)
        + f"<div class='price-box'>{box}</div>"
        + "".join(rendered[k] for k in chosen if k not in before)
        + stock_html
    )
    sections = []
    for n in range(draw(st.integers(min_value=0, max_value=3))):
        linked = draw(st.booleans())
        cards = "".join(
            (f"<li><a href='/p/other-{n}-{i}.html'>Other lamp {n}{i}</a>" if linked else "<li>")
            + f"<span class='price'>{money(draw(amounts))}</span><span>Model: OT-{n}{i}00</span>"
            f"<button>Add to cart</button></li>"
            for i in range(draw(st.integers(min_value=1, max_value=4)))
        )
        title = draw(st.sampled_from(TITLES))
        if draw(st.booleans()):
            title = f"<div class='block-title'><h2>{title}</h2></div>"
        else:
            title = f"<h2>{title}</h2>"
        sections.append((title, f"<ul>{cards}</ul>"))
    reviews = (
        ("<h3>Reviews</h3>", "<p>It was sold out for weeks. Out of stock again?</p>")
        if draw(st.booleans())
        else None
    )
    description = ("<h2>Description</h2>", "<p>A lamp for reading.</p>")
    if draw(st.booleans()):
        # each section a block of its own beside the product's
        blocks = [f"<section>{a}{b}</section>" for a, b in sections]
        split = draw(st.integers(min_value=0, max_value=len(blocks)))
        tail = "".join(a + b for a, b in filter(None, [reviews, description]))
        body = (
            "".join(blocks[:split])
            + f"<div class='product'>{own}{tail}</div>"
            + "".join(blocks[split:])
        )
    else:
        # a flat page: the product, its neighbours' titles and blocks all siblings, the
        # neighbours after the product's own lines
        parts = [*sections, *filter(None, [reviews]), description]
        order = draw(st.permutations(parts))
        body = "<div class='wrap'>" + own + "".join(a + b for a, b in order) + "</div>"
    want = {
        "price": Decimal(price) / 100,
        "list_price": Decimal(was) / 100 if was else None,
        "sku": code,
        "availability": "OutOfStock" if stock.startswith("out") else "InStock",
    }
    return f"<html><body><main>{body}</main></body></html>", want


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages())
def test_the_pages_own_price_code_and_stock_are_read_whatever_surrounds_them(
    page: tuple[str, dict[str, Any]],
) -> None:
    html, want = page
    analysis = analyze(url=URL, body=html.encode())
    assert analysis.kind == "product", html
    got = {name: (analysis.product or {}).get(name) for name in want}
    assert got == want, (html, analysis.where)
