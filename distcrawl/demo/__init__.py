"""The bundled demo shop: a deterministic catalog served on loopback, with faults on demand.

``DemoShop`` and ``ShopConfig`` live in :mod:`distcrawl.demo.server`; they are loaded on
first use here so that ``python -m distcrawl.demo.server`` does not import the module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Catalog
    from distcrawl.demo.server import DemoShop, ShopConfig

__all__ = ["Catalog", "DemoShop", "ShopConfig"]


def __getattr__(name: str) -> Any:
    if name == "Catalog":
        from distcrawl.demo.catalog import Catalog

        return Catalog
    if name in ("DemoShop", "ShopConfig"):
        from distcrawl.demo import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
