"""Compiled XPath expressions, shared by the readers of one parsed page."""

from __future__ import annotations

from functools import lru_cache

from lxml import etree

__all__ = ["xpath"]


@lru_cache(maxsize=256)
def xpath(expression: str, *, smart_strings: bool = True) -> etree.XPath:
    """The compiled form of *expression*; ``element.xpath(str)`` would compile it per call.

    Without *smart_strings*, text results are plain strings (cheaper, but no ``getparent()``).
    """
    return etree.XPath(expression, smart_strings=smart_strings)
