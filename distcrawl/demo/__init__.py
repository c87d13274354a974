"""The bundled demo shop: a deterministic catalog served on loopback, with faults on demand.

``DemoShop`` (:mod:`distcrawl.demo.shop`) and ``ShopConfig`` (:mod:`distcrawl.demo.config`)
are loaded on first use here: importing the package starts no server module.

The shop's parts, one job each: ``config`` (what a shop is, its defaults, the page variants),
``shop`` (the shop: ground truth, request log, control API), ``routes`` (pages by path),
``responses`` (answers, conditional ones), ``faults`` (the faults in force, drawn per request),
``httpd`` (connections), ``server`` (the ``distcrawl shop`` command); ``pages`` renders the
pages, ``templates`` and ``bootstrap`` the markup of the other variants; ``catalog`` and
``changes`` are the shop's data; ``checks`` and ``change_checks`` check a crawl against its
ground truth; ``run`` is ``distcrawl demo``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Catalog
    from distcrawl.demo.config import ShopConfig
    from distcrawl.demo.shop import DemoShop

__all__ = ["Catalog", "DemoShop", "ShopConfig"]


def __getattr__(name: str) -> Any:
    if name == "Catalog":
        from distcrawl.demo.catalog import Catalog

        return Catalog
    if name == "DemoShop":
        from distcrawl.demo.shop import DemoShop

        return DemoShop
    if name == "ShopConfig":
        from distcrawl.demo.config import ShopConfig

        return ShopConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
