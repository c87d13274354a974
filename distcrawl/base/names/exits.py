"""The exit statuses of ``scrapy crawl`` (a node), each defined once: its number, its name and
what it says. The crawl command exits with them, its help and the commands reference list them
(:func:`listing`), and every reason or message that names one takes its number from here.

0 is a node that did its work; 1 is Scrapy's own (a crawl that could not start); a node that
meets more than one of these exits with the first that applies, in the order of the crawl
command."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = [
    "EXIT_STATUSES",
    "FINDINGS",
    "JOURNAL_HELD",
    "LEASES_HELD",
    "REFUSED",
    "SETTINGS",
    "STATE_LOST",
    "ExitStatus",
    "exit_status",
    "listing",
]


@dataclass(frozen=True)
class ExitStatus:
    """One exit status of ``scrapy crawl``."""

    code: int
    #: the constant's name (``EXIT_SETTINGS``)
    name: str
    meaning: str


#: every exit status, in the order they are defined (their numbers distinct)
EXIT_STATUSES: list[ExitStatus] = []


def exit_status(code: int, name: str, meaning: str) -> int:
    """Define exit status *code*: a number no other status has, above Scrapy's 0 and 1, and a
    shell's own (126 and above)."""
    if not 2 <= code < 126:
        raise ValueError(f"{name}: exit status {code} is not between 2 and 125")
    taken = [s for s in EXIT_STATUSES if s.code == code or s.name == name]
    if taken:
        raise ValueError(f"{name}: exit status {code} is {taken[0].name} {taken[0].code} already")
    EXIT_STATUSES.append(ExitStatus(code, name, meaning))
    return code


SETTINGS = exit_status(
    2,
    "EXIT_SETTINGS",
    "a setting or the crawl's name cannot be used (one error line each, nothing started), or "
    "the node's crawl-wide settings differ from the crawl's (it refused to start)",
)
JOURNAL_HELD = exit_status(
    3,
    "EXIT_JOURNAL_HELD",
    "its journal still holds products MongoDB did not take in MONGO_JOURNAL_CLOSE_TIMEOUT",
)
LEASES_HELD = exit_status(
    4,
    "EXIT_LEASES_HELD",
    "it stopped holding leases it could not return to the frontier (a forced stop, Redis "
    "away): they return only once its heartbeat times out",
)
REFUSED = exit_status(
    5,
    "EXIT_REFUSED",
    "it refused to start for another reason its one log line names (its node id is in use, "
    "the crawl has another format, Redis cannot be reached)",
)
STATE_LOST = exit_status(
    6,
    "EXIT_STATE_LOST",
    "the crawl's state is gone from Redis (Redis restarted empty, a flush, another database): "
    "the node found it so and stopped, or did not start, crawling nothing again; its one ERROR "
    "line says what to do (control <crawl> reset, then seed)",
)
FINDINGS = exit_status(
    7,
    "EXIT_FINDINGS",
    "the crawl finished (drained, the node closed on it) with data-quality findings: a "
    "field's share fell on a site (the crawl report lists them)",
)


def listing() -> str:
    """Every exit status, one item each, as the crawl command's help lists them."""
    return "\n".join(
        textwrap.fill(f"- {s.code} ({s.name}): {s.meaning}", 92, subsequent_indent="  ")
        for s in EXIT_STATUSES
    )
