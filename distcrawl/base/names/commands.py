"""The words of the command line: the operator commands and their actions, the same for
``scrapy <command>`` and ``distcrawl <command>``, the dashboard's buttons and the docs; each
command's positional arguments in their order, and the command lines messages suggest
(:class:`Advice`), built from them."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from distcrawl.base.names.terms import term

__all__ = ["ACTION", "ADVICE", "ARGUMENTS", "COMMAND", "SCRAPY_COMMANDS", "Advice", "advice"]

COMMAND = "command"
ACTION = "action"

DEMO = term(COMMAND, "demo", "run a demo crawl of the bundled shop on embedded services")
SHOP = term(COMMAND, "shop", "serve the bundled demo shop on 127.0.0.1")
EXTRACT = term(COMMAND, "extract", "show what the spider would extract from pages")
PROFILE = term(COMMAND, "profile", "draft a site profile from a shop's pages")
STATUS = term(COMMAND, "status", "show the whole cluster: queue, nodes, rates")
SEED = term(COMMAND, "seed", "validate and push seeds into the frontier")
DEADLETTERS = term(COMMAND, "deadletters", "list, re-queue or purge dead letters")
CONTROL = term(COMMAND, "control", "pause, resume or reset the crawl")
JOURNAL = term(COMMAND, "journal", "show or replay a node's local journal")
MIGRATE = term(COMMAND, "migrate", "move a scrapy-redis crawl into the frontier")
WEB = term(COMMAND, "web", "serve the live dashboard and Prometheus /metrics")
SERVICES = term(COMMAND, "services", "start or show the embedded Redis and MongoDB")
ERRORS = term(COMMAND, "errors", "list the crawl's error groups, or show one's first occurrence")
REPORT = term(COMMAND, "report", "the crawl report: products, pages, errors, field coverage")

LIST = term(
    ACTION,
    "list",
    "deadletters: the newest matching dead letters; errors: the error groups, most frequent first",
)
COUNT = term(ACTION, "count", "deadletters: matching dead letters by reason and by site")
REQUEUE = term(ACTION, "requeue", "deadletters: move the matching dead letters back to the queue")
PURGE = term(ACTION, "purge", "deadletters: delete the matching dead letters (--yes-really)")
REFUSED = term(ACTION, "refused", "deadletters: the refused seeds and queue entries, newest first")
PAUSE = term(ACTION, "pause", "control: nodes take no new leases; what they hold they finish")
RESUME = term(ACTION, "resume", "control: leasing starts again on every node")
RESET = term(ACTION, "reset", "control: delete the crawl's state (--yes-really)")
SHOW = term(
    ACTION,
    "show",
    "journal: segments and products per target collection; errors: a group and the snapshot of "
    "its first occurrence",
)
REPLAY = term(ACTION, "replay", "journal: write the segments no live node holds to MongoDB")
START = term(ACTION, "start", "services: start both servers (or reuse running ones)")
STOP = term(ACTION, "stop", "services: stop both servers (their data stays)")

#: the actions of each command that has some, in the order its help lists them
DEADLETTERS_ACTIONS = (LIST, COUNT, REQUEUE, PURGE, REFUSED)
CONTROL_ACTIONS = (PAUSE, RESUME, RESET)
JOURNAL_ACTIONS = (SHOW, REPLAY)
SERVICES_ACTIONS = (START, STATUS, STOP)
ERRORS_ACTIONS = (LIST, SHOW)

#: each command's positional arguments, in the order its command line takes them (its parser
#: adds them in this order: tests/commands/test_advice.py holds the two together)
ARGUMENTS: dict[str, tuple[str, ...]] = {
    DEMO: (),
    SHOP: (),
    EXTRACT: ("inputs",),
    PROFILE: ("action", "inputs"),
    STATUS: ("spider",),
    SEED: ("spider", "urls"),
    DEADLETTERS: ("spider", "action"),
    CONTROL: ("spider", "action"),
    JOURNAL: ("action", "directory"),
    MIGRATE: ("spider",),
    WEB: ("spider",),
    SERVICES: ("action",),
    ERRORS: ("words",),
    REPORT: ("spider",),
}
#: the commands ``scrapy`` runs too, from the project directory (``scrapy status catalog``)
SCRAPY_COMMANDS = (STATUS, SEED, DEADLETTERS, CONTROL, JOURNAL, MIGRATE, WEB, ERRORS, REPORT)

#: every command line a message suggests, in the order they are defined
ADVICE: list[Advice] = []

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Advice:
    """A command line a message suggests: the command, its positional arguments in the order
    of :data:`ARGUMENTS`, then its options. A ``{name}`` in a value is filled in by
    :meth:`line` (quoted for a shell where it must be); an upper-case word (``URI``) stands
    for what the reader types."""

    command: str
    arguments: tuple[str, ...]
    options: tuple[str, ...] = ()
    prog: str = "distcrawl"

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The names :meth:`line` needs, in order."""
        found = [m for part in self.words() for m in _PLACEHOLDER.findall(part)]
        return tuple(dict.fromkeys(found))

    def words(self) -> tuple[str, ...]:
        return (self.prog, self.command, *self.arguments, *self.options)

    def line(self, **values: object) -> str:
        """The command line as a reader types it, with *values* for its placeholders."""
        missing = set(self.placeholders) - set(values)
        if missing:
            raise TypeError(f"{self.command} advice needs {', '.join(sorted(missing))}")

        def fill(part: str) -> str:
            if part in (f"{{{name}}}" for name in values):
                return shlex.quote(str(values[part[1:-1]]))
            return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), part)

        return " ".join(fill(part) for part in self.words())

    def __str__(self) -> str:
        return " ".join(self.words())


def advice(command: str, *options: str, prog: str = "distcrawl", **arguments: str) -> Advice:
    """Define a command line messages suggest: *command* with its positional *arguments* by
    name (put in the order the command takes them) and its *options*, as typed."""
    order = ARGUMENTS[command]
    unknown = set(arguments) - set(order)
    if unknown:
        raise ValueError(f"{command} takes no argument {', '.join(sorted(unknown))}")
    given = [name for name in order if name in arguments]
    if given != list(order[: len(given)]):
        raise ValueError(f"{command}: {order} are positional: give them from the first on")
    if prog != "distcrawl" and command not in SCRAPY_COMMANDS:
        raise ValueError(f"scrapy has no command {command}")
    made = Advice(command, tuple(arguments[name] for name in given), options, prog)
    ADVICE.append(made)
    return made


#: start a crawl over: delete its state (every node stopped, or their leases are kept)
RESET_CRAWL = advice(CONTROL, "--yes-really", spider="{spider}", action=RESET)
#: delete a crawl's state, the leases and seeds of live nodes too
RESET_CRAWL_FORCE = advice(CONTROL, "--yes-really", "--force", spider="{spider}", action=RESET)
#: stop every node of a crawl leasing (they finish what they hold)
PAUSE_CRAWL = advice(CONTROL, spider="{spider}", action=PAUSE)
#: let a paused crawl lease again
RESUME_CRAWL = advice(CONTROL, spider="{spider}", action=RESUME)
#: the crawl's dead letters
LIST_DEAD_LETTERS = advice(DEADLETTERS, spider="{spider}", action=LIST)
#: move a scrapy-redis crawl's queue and dupefilter into the frontier
MIGRATE_CRAWL = advice(MIGRATE, "--trust-pickle", "--dry-run", spider="{spider}")
#: write a journal's products into MongoDB
REPLAY_JOURNAL = advice(JOURNAL, "--mongo-uri", "URI", action=REPLAY, directory="{directory}")
#: start the embedded Redis and MongoDB and point the shell at them (wrapped in eval "$(...)")
START_SERVICES = advice(SERVICES, action=START)
#: stop the embedded servers of a home folder
STOP_SERVICES = advice(SERVICES, "--home", "{home}", action=STOP)
#: try a site profile on pages
EXPLAIN_PROFILE = advice(EXTRACT, "--explain", "--profile", "{profile}", inputs="URL")
#: the crawl's error groups, the most failures first
LIST_ERROR_GROUPS = advice(ERRORS, words="{spider}")
#: one error group and the snapshot of its first occurrence (GROUP: its id, or its first digits)
SHOW_ERROR_GROUP = advice(ERRORS, SHOW, "GROUP", words="{spider}")
#: the crawl report: products, pages, errors, field coverage, findings
CRAWL_REPORT = advice(REPORT, spider="{spider}")
