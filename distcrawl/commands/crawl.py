"""``scrapy crawl``, as Scrapy runs it, except that a node whose products are not all in
MongoDB when it exits says so with its exit status: 3 (``EXIT_JOURNAL_HELD``) when its
journal still holds products MongoDB did not take in ``MONGO_JOURNAL_CLOSE_TIMEOUT``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from distcrawl.storage.store import stranded_journals

if TYPE_CHECKING:
    import argparse

__all__ = ["EXIT_JOURNAL_HELD", "Command"]

logger = logging.getLogger(__name__)

#: exit status of a node that closed with products only in its local journal
EXIT_JOURNAL_HELD = 3


class Command(ScrapyCrawlCommand):
    """``scrapy crawl <spider>``; exits 3 when products were left in the journal."""

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)
        held = stranded_journals()
        if held and not self.exitcode:
            self.exitcode = EXIT_JOURNAL_HELD
            for path, products in held.items():
                logger.error("Exiting with status 3: %d products wait in %s", products, path)
