"""The words of the cluster status (``status``, the dashboard, ``/metrics`` labels): the crawl's
state, node states and the kinds of errors summed from the nodes' stats."""

from __future__ import annotations

from distcrawl.base.names.terms import Family, term

__all__ = ["CRAWL_STATE", "CRAWL_STATES", "CUT_CAUSE", "CUT_CAUSES", "ERROR_KIND", "NODE_STATE"]

CRAWL_STATE = "crawl state"
NODE_STATE = "node state"
ERROR_KIND = "error kind"
CUT_CAUSE = "cut cause"

RUNNING = term(CRAWL_STATE, "running", "work is left and live nodes take it")
WAITING = term(CRAWL_STATE, "waiting", "work is left but no node is live to take it: start one")
PAUSED = term(CRAWL_STATE, "paused", "work is left; the nodes take none until the crawl resumes")
DRAINED = term(
    CRAWL_STATE,
    "drained",
    "nothing queued, parked, leased or seeding (revisit mode: none due within the grace)",
)
#: every state of a crawl, in the order the status names them
CRAWL_STATES = (RUNNING, WAITING, PAUSED, DRAINED)

LIVE = term(NODE_STATE, "live", "heart-beating within DISTCRAWL_HEARTBEAT_TIMEOUT")
DEAD = term(
    NODE_STATE,
    "dead",
    "silent past the heartbeat timeout, or already recovered by a live node (recovered)",
)
STOPPED = term(NODE_STATE, "stopped", "stopped cleanly; its last stats are kept for a day")
ORPHAN = term(NODE_STATE, "orphan", "leases or seeds held under a node name nothing else knows")
GONE = term(NODE_STATE, "gone", "stopped or recovered, and holding nothing")
#: every node state, in the order the status and /metrics list them
NODE_STATES = (LIVE, DEAD, STOPPED, ORPHAN, GONE)

HTTP_ERRORS = Family(ERROR_KIND, "http/", "status", "answers with an HTTP status of 400 or more")
RETRIES = Family(ERROR_KIND, "retry/", "reason", "retries, by dead-letter reason")
EXCEPTIONS = Family(
    ERROR_KIND, "exception/", "ExceptionName", "failed downloads, by exception class name"
)
SPIDER_EXCEPTIONS = Family(
    ERROR_KIND,
    "spider_exception/",
    "ExceptionName",
    "callbacks that raised, by exception class name",
)
REFUSED_ENTRIES = Family(
    ERROR_KIND, "refused/", "reason", "queue entries refused when leased, by refusal reason"
)
REFUSED_SEEDS = Family(ERROR_KIND, "seed_refused/", "reason", "seeds refused, by refusal reason")
LOG_ERRORS = term(ERROR_KIND, "log_errors", "lines the nodes logged at level ERROR")
REDIS_ERRORS = term(ERROR_KIND, "redis_errors", "failed round trips to Redis")
DEAD_LETTERED = term(ERROR_KIND, "dead_lettered", "requests the nodes sent to the dead letters")

THROTTLED = term(
    CUT_CAUSE,
    "throttled",
    "the site answered 429, or 503 with Retry-After: its shared rate was halved",
)
SLOW = term(
    CUT_CAUSE,
    "slow",
    "the site answered slower than DISTCRAWL_SITE_LATENCY_TARGET: its shared rate was cut by a "
    "fifth",
)
UNKNOWN_CAUSE = term(CUT_CAUSE, "unknown", "a cut whose cause the frontier did not record")
#: every cause of a site's rate cut (the label values of the cut metric)
CUT_CAUSES = (THROTTLED, SLOW, UNKNOWN_CAUSE)
