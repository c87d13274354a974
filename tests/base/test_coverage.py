"""Field coverage per site: the window of a site's last products read from its running counts
and marks, whatever chunks the nodes sent them in (a search against counting each product), and
the findings a fall of a field's share makes, against the last crawl or earlier products."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from distcrawl.base.coverage import Baseline, SiteFigures, judge, present_fields, step_of


def test_a_field_is_present_when_it_holds_something() -> None:
    item = {"name": "Lamp", "price": 0, "sku": " ", "brand": None, "image_urls": [], "gtin": "1"}
    fields = ["name", "price", "sku", "brand", "image_urls", "gtin", "currency"]
    assert present_fields(item, fields) == ["name", "price", "gtin"]


def apply(figures: SiteFigures, window: int, chunk: list[dict[str, bool]]) -> None:
    """What the observe script does with one chunk of products (its Lua, in Python)."""
    before = figures.products
    figures.products += len(chunk)
    for product in chunk:
        for name, held in product.items():
            if held:
                figures.fields[name] = figures.fields.get(name, 0) + 1
    step = step_of(window)
    if figures.products // step > before // step:
        figures.marks.append((figures.products, dict(figures.fields)))
        while len(figures.marks) >= 2 and figures.marks[1][0] <= figures.products - window:
            figures.marks.pop(0)


_PRODUCT = st.fixed_dictionaries({"price": st.booleans(), "name": st.just(True)})


@settings(max_examples=300, deadline=None)
@given(
    st.integers(4, 40),
    st.lists(st.lists(_PRODUCT, min_size=1, max_size=12), min_size=1, max_size=40),
)
def test_the_window_is_the_products_after_a_mark_at_least_a_window_back(
    window: int, chunks: list[list[dict[str, bool]]]
) -> None:
    products = [p for chunk in chunks for p in chunk]
    figures = SiteFigures()
    for chunk in chunks:
        apply(figures, window, chunk)
    (n, counts), (n0, before) = figures.split(window)
    assert n + n0 == len(products)
    # the window reaches a whole window back (or to the start), and starts at a mark
    assert n >= min(window, len(products))
    assert n0 == 0 or n0 in {m[0] for m in figures.marks}
    assert counts.get("price", 0) == sum(p["price"] for p in products[n0:])
    assert before.get("price", 0) == sum(p["price"] for p in products[:n0])
    # chunks of at most a quarter window: the window is less than one and a half windows
    if all(len(c) <= step_of(window) for c in chunks):
        assert n < window + 2 * step_of(window)


def figures_of(prices: list[bool], window: int) -> SiteFigures:
    figures = SiteFigures()
    step = step_of(window)
    for i in range(0, len(prices), step):
        apply(figures, window, [{"price": p, "name": True} for p in prices[i : i + step]])
    return figures


def test_a_fall_against_earlier_products_is_a_finding_once_both_sides_hold_enough() -> None:
    fields = ["name", "price"]
    prices = [True] * 100 + [False] * 100
    # judged at each mark, as the nodes judge the sites a heartbeat brings back: the first
    # finding is where the window's share fell by the drop below the share before it
    figures, first = SiteFigures(), None
    for i in range(0, len(prices), 10):
        apply(figures, 40, [{"price": p, "name": True} for p in prices[i : i + 10]])
        found = judge("shop.example", figures, fields=fields, window=40, drop=0.2)
        first = first or (found[0] if found else None)
    assert first is not None
    assert (first.field, first.was, first.baseline) == ("price", 1.0, "earlier")
    assert first.share == 0.75 and first.products == 40
    assert first.message == "shop.example: price on 75% of the last 40 products (was 100%)"
    # at the end: none of the last 40 has a price; before them, 100 of 160 had one
    [last] = judge("shop.example", figures, fields=fields, window=40, drop=0.2)
    assert (last.share, last.was) == (0.0, 100 / 160)
    # too few products before the window: nothing to compare with
    assert judge("s", figures_of([False] * 30, 40), fields=fields, window=40, drop=0.2) == []
    # a fall smaller than the drop is no finding
    mild = figures_of([True] * 100 + [True, True, True, False] * 25, 40)
    assert judge("s", mild, fields=fields, window=40, drop=0.3) == []


def test_a_field_held_by_chance_alone_rarely_makes_a_finding() -> None:
    """A field every product holds with one probability: its share moves by chance from
    window to window, which the standard-error test tells apart from a fall. Over 300 sites
    of 600 products (a fixed draw), judged at every mark: at most one finding."""
    rng = random.Random(20261205)
    sites_with_findings = 0
    for site in range(300):
        p = 0.2 + 0.6 * rng.random()
        prices = [rng.random() < p for _ in range(600)]
        figures, found = SiteFigures(), False
        for i in range(0, len(prices), 50):
            apply(figures, 200, [{"price": x, "name": True} for x in prices[i : i + 50]])
            found = found or bool(
                judge(f"s{site}", figures, fields=["price"], window=200, drop=0.2)
            )
        sites_with_findings += found
    assert sites_with_findings <= 1


def test_the_last_crawl_is_the_baseline_where_the_site_has_one() -> None:
    figures = figures_of([True, False] * 20, 40)  # 50 %, from the first product on
    last = Baseline(300, {"price": 0.99, "name": 1.0})
    [finding] = judge("s", figures, fields=["name", "price"], window=40, drop=0.2, last_crawl=last)
    assert finding.baseline == "last_crawl" and finding.was == 0.99 and finding.share == 0.5
    # a field the last crawl did not know is not judged against it
    other = Baseline(300, {"x": 1.0})
    assert judge("s", figures, fields=["price"], window=40, drop=0.2, last_crawl=other) == []
    # nor a fall within chance: 40 products at 85 % against 90 %
    near = figures_of([True] * 34 + [False] * 6, 40)
    ninety = Baseline(300, {"price": 0.9})
    assert judge("s", near, fields=["price"], window=40, drop=0.05, last_crawl=ninety) == []


def test_the_figures_read_back_from_their_json() -> None:
    figures = SiteFigures.from_json(b'{"n": 8, "f": {"price": 6}, "m": [[4, {"price": 4}]]}')
    assert figures.shares() == {"price": 0.75}
    assert figures.window(4) == {"products": 4, "shares": {"price": 0.5}}
