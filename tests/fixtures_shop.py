"""Demo shop fixtures: real HTTP shops on free loopback ports, stopped at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from distcrawl.demo.config import ShopConfig
from distcrawl.demo.shop import DemoShop

#: the catalog size of the shared ``demo_shop``
DEMO_SHOP_PRODUCTS = 300


@pytest.fixture
def shop_factory() -> Iterator[Callable[..., DemoShop]]:
    """``shop_factory(**ShopConfig fields) -> DemoShop``, started; all stopped after the test.
    ``clock=`` (a callable returning unix time) drives a changing shop's epochs."""
    started: list[DemoShop] = []

    def make(clock: Callable[[], float] | None = None, **config: Any) -> DemoShop:
        shop = DemoShop(ShopConfig(**config), **({"clock": clock} if clock else {})).start()
        started.append(shop)
        return shop

    yield make
    for shop in started:
        shop.stop()


@pytest.fixture(scope="module")
def demo_shop() -> Iterator[DemoShop]:
    """One fault-free ``jsonld`` shop of 300 products shared by a test module."""
    shop = DemoShop(ShopConfig(products=DEMO_SHOP_PRODUCTS, variant="jsonld")).start()
    yield shop
    shop.stop()
