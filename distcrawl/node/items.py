"""The items a crawl produces."""

from __future__ import annotations

import scrapy

__all__ = ["Product", "Revisit"]


class Product(scrapy.Item):
    """One product as found on one product page.

    ``price`` is a :class:`decimal.Decimal` (never a float), ``currency`` an ISO 4217 code,
    ``availability`` a schema.org ItemAvailability name such as ``InStock``,
    ``crawled_at`` a timezone-aware UTC :class:`datetime.datetime`.
    """

    url = scrapy.Field()  # canonical product URL: the default unique key
    name = scrapy.Field()
    price = scrapy.Field()
    currency = scrapy.Field()
    list_price = scrapy.Field()  # the struck-through price when on sale
    price_ambiguous = scrapy.Field()  # the price as printed when its notation is open
    sku = scrapy.Field()
    gtin = scrapy.Field()
    brand = scrapy.Field()
    availability = scrapy.Field()
    category_path = scrapy.Field()  # breadcrumbs, outermost first, without the product
    description = scrapy.Field()
    image_urls = scrapy.Field()
    variants = scrapy.Field()  # list of dicts (sku, name, price, currency, availability)
    site = scrapy.Field()  # host of the shop, e.g. "shop.example.com"
    source_url = scrapy.Field()  # the URL actually fetched (before canonicalisation)
    crawled_at = scrapy.Field()


class Revisit(scrapy.Item):
    """A product page fetched again that answered ``304 Not Modified`` (the product is as
    stored: it was seen again) or ``404`` / ``410`` (it is gone); made by
    :class:`~distcrawl.node.revisit.freshness.FreshnessMiddleware` without parsing the page, stored
    by the
    MongoDB pipeline as an update of ``last_seen`` or ``gone_at``.
    """

    url = scrapy.Field()  # the page's canonical URL (the product's ``url``)
    status = scrapy.Field()  # 304, 404 or 410
    seen_at = scrapy.Field()  # a timezone-aware UTC datetime
    #: True: the product is in no listing any more (gone whatever its page answered)
    unlisted = scrapy.Field()
