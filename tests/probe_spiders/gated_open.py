"""An item pipeline that opens only once the file ``PROBE_OPEN_GATE`` names exists: a node
whose engine is still opening (a component slow to open on a loaded machine) while its
scheduler has opened and leased."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


class GatedOpenPipeline:
    async def open_spider(self) -> None:
        gate = Path(os.environ["PROBE_OPEN_GATE"])
        while not gate.exists():
            await asyncio.sleep(0.05)

    def process_item(self, item: object) -> object:
        return item
