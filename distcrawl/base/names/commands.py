"""The words of the command line: the operator commands and their actions, the same for
``scrapy <command>`` and ``distcrawl <command>``, the dashboard's buttons and the docs."""

from __future__ import annotations

from distcrawl.base.names.terms import term

__all__ = ["ACTION", "COMMAND"]

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
