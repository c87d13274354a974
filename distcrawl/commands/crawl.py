"""``scrapy crawl``, as Scrapy runs it, except that the node's settings are checked first and
its exit status says what kept it from its work:

- 2 (``EXIT_SETTINGS``): a setting cannot be used (one error line each, nothing started),
  or the node's crawl-wide settings differ from the crawl's (it refused to start);
- 3 (``EXIT_JOURNAL_HELD``): its journal still holds products MongoDB did not take in
  ``MONGO_JOURNAL_CLOSE_TIMEOUT``;
- 4 (``EXIT_LEASES_HELD``): it stopped holding leases it could not return to the frontier (a
  forced stop, Redis away): they return only once its heartbeat times out;
- 5 (``EXIT_REFUSED``): it refused to start for another reason its one log line names (its
  node id is in use, the crawl has another format);
- 6 (``EXIT_FINDINGS``): the crawl finished (drained, the node closed on it) with data-quality
  findings: a field's share fell on a site (``distcrawl report`` lists them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from distcrawl.node.scheduler import unreturned_leases
from distcrawl.node.scheduler.crawlwide import REFUSED_REASON
from distcrawl.node.scheduler.identity import refused_starts
from distcrawl.node.settings_check import problems
from distcrawl.ops.finish import findings_at_close
from distcrawl.storage.store import stranded_journals

if TYPE_CHECKING:
    import argparse

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_JOURNAL_HELD",
    "EXIT_LEASES_HELD",
    "EXIT_REFUSED",
    "EXIT_SETTINGS",
    "Command",
]

logger = logging.getLogger(__name__)

#: exit status of a node with a setting it cannot use, or refused by the crawl's record
EXIT_SETTINGS = 2
#: exit status of a node that closed with products only in its local journal
EXIT_JOURNAL_HELD = 3
#: exit status of a node that stopped holding leases it could not return
EXIT_LEASES_HELD = 4
#: exit status of a node that refused to start (e.g. its node id is in use)
EXIT_REFUSED = 5
#: exit status of a node that closed on a finished crawl with data-quality findings
EXIT_FINDINGS = 6


class Command(ScrapyCrawlCommand):
    """``scrapy crawl <spider>``; exits 2 on bad or differing settings, 3 when products were
    left in the journal, 4 when leases were left in the frontier, 5 when it refused to start
    for another reason, 6 when its crawl finished with data-quality findings."""

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError
        if len(args) > 1:
            raise UsageError("running 'scrapy crawl' with more than one spider is not supported")
        assert self.crawler_process is not None
        crawler = self._create_crawler(args[0])
        # -s, the spider's custom_settings and the project's (the environment included)
        bad = problems(crawler.settings)
        for line in bad:
            logger.error("Bad setting, the node does not start: %s", line)
        if bad:
            self.exitcode = EXIT_SETTINGS
            return
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        stats = getattr(crawler, "stats", None)  # none when the crawl never began
        if stats is not None and stats.get_value("finish_reason") == REFUSED_REASON:
            self.exitcode = EXIT_SETTINGS
            return
        if refused_starts():
            self.exitcode = EXIT_REFUSED
            return
        held = stranded_journals()
        if held and not self.exitcode:
            self.exitcode = EXIT_JOURNAL_HELD
            for path, products in held.items():
                logger.error("Exiting with status 3: %d products wait in %s", products, path)
        leases = unreturned_leases()
        if leases and not self.exitcode:
            self.exitcode = EXIT_LEASES_HELD
            for node, n in leases.items():
                logger.error(
                    "Exiting with status 4: node %s stopped holding %d leases it could not "
                    "return; they go back to the queue once its heartbeat times out "
                    "(DISTCRAWL_HEARTBEAT_TIMEOUT), or at once when it starts again with the "
                    "same DISTCRAWL_NODE_ID",
                    node,
                    n,
                )
        if findings_at_close() and not self.exitcode:
            self.exitcode = EXIT_FINDINGS
