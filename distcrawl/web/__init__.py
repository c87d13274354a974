"""The live dashboard (``distcrawl web``) and Prometheus ``/metrics`` of a crawl."""

from __future__ import annotations

__all__: list[str] = []
