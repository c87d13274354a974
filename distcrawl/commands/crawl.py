"""``scrapy crawl``, as Scrapy runs it, except that the node's settings are checked first and
its exit status says what kept it from its work:"""

from __future__ import annotations

import logging
import os
import signal
from typing import TYPE_CHECKING, Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from distcrawl.base.identifiers import crawl_name_problem
from distcrawl.base.names import exits, reasons
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
    "EXIT_STATE_LOST",
    "Command",
]

logger = logging.getLogger(__name__)

# the exit statuses, as the registry defines them (the command's help and the commands
# reference show this docstring)
__doc__ = f"{__doc__}\n\n{exits.listing()}\n"

EXIT_SETTINGS = exits.SETTINGS
EXIT_JOURNAL_HELD = exits.JOURNAL_HELD
EXIT_LEASES_HELD = exits.LEASES_HELD
EXIT_REFUSED = exits.REFUSED
EXIT_STATE_LOST = exits.STATE_LOST
EXIT_FINDINGS = exits.FINDINGS


class Command(ScrapyCrawlCommand):
    """``scrapy crawl <spider>``, with the exit statuses of :mod:`distcrawl.base.names.exits`."""

    _early: _EarlyStop | None = None

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        # a graceful stop asked for before Scrapy's own handlers are in place is kept and
        # given to them once they are: from here, the first of distcrawl's code that only
        # `scrapy crawl` runs (Scrapy starts its log next, then runs the command)
        self._early = _EarlyStop()
        super().process_options(args, opts)

    def stop_asked(self) -> list[int]:
        """The signals that asked for a stop before Scrapy's handlers were in place."""
        return list(self._early.asked) if self._early is not None else []

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError
        if len(args) > 1:
            raise UsageError("running 'scrapy crawl' with more than one spider is not supported")
        assert self.crawler_process is not None
        early = self._early if self._early is not None else _EarlyStop()
        # the crawl's name goes into every key and many log lines (as given, as the spider
        # class says, as a ``-a name=`` argument gives the spider)
        named = crawl_name_problem(args[0])
        if named:
            logger.error("Bad crawl name, the node does not start: %s", named)
            self.exitcode = EXIT_SETTINGS
            return
        crawler = self._create_crawler(args[0])
        # -s, the spider's custom_settings and the project's (the environment included)
        bad = problems(crawler.settings)
        for line in bad:
            logger.error("Bad setting, the node does not start: %s", line)
        names = {str(getattr(crawler.spidercls, "name", "")), str(opts.spargs.get("name", args[0]))}
        for name in sorted(names):
            if problem := crawl_name_problem(name):
                logger.error("Bad crawl name, the node does not start: %s", problem)
                bad.append(problem)
        if bad:
            self.exitcode = EXIT_SETTINGS
            return
        self.crawler_process.crawl(crawler, **opts.spargs)
        early.hand_over()
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        stats = getattr(crawler, "stats", None)  # none when the crawl never began
        if stats is not None and stats.get_value("finish_reason") == REFUSED_REASON:
            self.exitcode = EXIT_SETTINGS
            return
        if stats is not None and stats.get_value("finish_reason") == reasons.CRAWL_STATE_LOST:
            self.exitcode = EXIT_STATE_LOST
            return
        if refused_starts():
            self.exitcode = EXIT_REFUSED
            return
        held = stranded_journals()
        if held and not self.exitcode:
            self.exitcode = EXIT_JOURNAL_HELD
            for path, products in held.items():
                logger.error(
                    "Exiting with status %d: %d products wait in %s", self.exitcode, products, path
                )
        leases = unreturned_leases()
        if leases and not self.exitcode:
            self.exitcode = EXIT_LEASES_HELD
            for node, n in leases.items():
                logger.error(
                    "Exiting with status %d: node %s stopped holding %d leases it could not "
                    "return; they go back to the queue once its heartbeat times out "
                    "(DISTCRAWL_HEARTBEAT_TIMEOUT), or at once when it starts again with the "
                    "same DISTCRAWL_NODE_ID",
                    self.exitcode,
                    node,
                    n,
                )
        if findings_at_close() and not self.exitcode:
            self.exitcode = EXIT_FINDINGS


class _EarlyStop:
    """SIGTERM or SIGINT between the reading of ``scrapy crawl``'s options and the reactor's
    start (before Scrapy installs its handlers, a signal would kill the process at once):
    kept, and sent again once the reactor runs, so Scrapy stops the crawl gracefully (the
    node's scheduler then returns whatever it leased meanwhile:
    ``node/scheduler/shutdown.py``)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.asked: list[int] = []
        for signum in self.SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored stays ignored
                signal.signal(signum, self._keep)

    def _keep(self, signum: int, frame: Any) -> None:
        self.asked.append(signum)

    def hand_over(self) -> None:
        """Once the reactor runs (Scrapy installs its handlers as it starts), send again what
        was asked for meanwhile. Called once the crawl is set up: the reactor is installed."""
        from twisted.internet import reactor as installed

        reactor: Any = installed

        def resend() -> None:
            if self.asked:
                os.kill(os.getpid(), self.asked[0])

        # after every startup trigger, Scrapy's installing its handlers included
        reactor.callWhenRunning(lambda: reactor.callLater(0, resend))
