"""Scrapy tests whose outcome with the frontier differs from Scrapy's by design, each with its
reason: ``bench/scrapy_suite.py`` reports them apart, neither as passes nor as regressions."""

from __future__ import annotations

__all__ = ["EXPECTED_DIFFERENCES"]

#: test id (as pytest names it, from Scrapy's sdist root) -> why the frontier differs
EXPECTED_DIFFERENCES: dict[str, str] = {}
