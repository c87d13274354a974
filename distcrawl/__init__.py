"""distcrawl: Scrapy spiders on many machines sharing one lossless Redis frontier."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Frontier"]


def __getattr__(name: str) -> Any:
    # ``ADDONS = {"distcrawl.Frontier": 0}``; imported on use so ``import distcrawl`` stays light
    if name == "Frontier":
        from distcrawl.node.addon import Frontier

        return Frontier
    raise AttributeError(f"module 'distcrawl' has no attribute {name!r}")
