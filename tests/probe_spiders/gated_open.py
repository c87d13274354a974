"""Components that open only once the file ``PROBE_OPEN_GATE`` names exists: a node whose
engine is still opening (a component slow to open on a loaded machine) while its scheduler has
opened and leased.

- :class:`GatedOpenPipeline`: an item pipeline slow to open (before ``spider_opened``).
- :class:`GatedEngineStart`: an extension slow to handle ``engine_started``: the spider is
  open (its ``spider_opened`` handlers ran), the engine sends ``engine_started`` and runs only
  once every handler is done."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Self

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


async def _wait_for_gate() -> None:
    gate = Path(os.environ["PROBE_OPEN_GATE"])
    while not gate.exists():
        await asyncio.sleep(0.05)


class GatedOpenPipeline:
    async def open_spider(self) -> None:
        await _wait_for_gate()

    def process_item(self, item: object) -> object:
        return item


class GatedEngineStart:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        extension = cls()
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    async def engine_started(self) -> None:
        logger.info("Probe: the engine's start waits for the gate")
        await _wait_for_gate()
