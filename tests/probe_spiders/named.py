"""The catalog spider under the name a test gives it (``PROBE_SPIDER_NAME``): a node meeting a
crawl name it must refuse."""

from __future__ import annotations

import os

from distcrawl.node.spiders.catalog import CatalogSpider


class NamedSpider(CatalogSpider):
    name = os.environ.get("PROBE_SPIDER_NAME", "probe-named")
