"""The catalog spider, handing a partly filled item to the product page's callback the way
Scrapy's docs show: a ``scrapy.Item`` in ``meta``, a dataclass and an attrs object in
``cb_kwargs`` (their classes listed in ``DISTCRAWL_ITEM_CLASSES``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import attr
import scrapy

from distcrawl.node.spiders.catalog import CatalogSpider

#: what DISTCRAWL_ITEM_CLASSES lists for this spider
ITEM_CLASSES = ",".join(f"{__name__}.{n}" for n in ("Lead", "Offer", "Stock"))


class Lead(scrapy.Item):
    listing = scrapy.Field()
    url = scrapy.Field()


@dataclasses.dataclass
class Offer:
    url: str
    seen_on: list[str] = dataclasses.field(default_factory=list)


@attr.s(auto_attribs=True)
class Stock:
    depth: int
    notes: dict[str, str] = attr.Factory(dict)


class ItemsInMetaSpider(CatalogSpider):
    name = "catalog_items"
    redis_key = "catalog_items:start_urls"

    def parse(self, response: Any, **kwargs: Any) -> Iterator[Any]:
        for out in super().parse(response, **kwargs):
            if isinstance(out, scrapy.Request) and out.meta.get("page_kind") == "product":
                out = out.replace(
                    callback=self.parse_product,
                    meta={**out.meta, "lead": Lead(listing=response.url, url=out.url)},
                    cb_kwargs={
                        "offer": Offer(out.url, [response.url]),
                        "stock": Stock(1, {"from": response.url}),
                    },
                )
            yield out

    def parse_product(self, response: Any, offer: Offer, stock: Stock) -> Iterator[Any]:
        lead = response.meta["lead"]
        # the same classes and fields as the listing's callback made (raises otherwise: the
        # product is then missing from the store, which the test sees)
        assert type(lead) is Lead and type(offer) is Offer and type(stock) is Stock, (
            type(lead),
            type(offer),
            type(stock),
        )
        listing = lead["listing"]
        assert offer == Offer(lead["url"], [listing]) and stock == Stock(1, {"from": listing})
        self.crawler.stats.inc_value("items_probe/checked")
        yield from super().parse(response)
