"""The words of the cluster status (``status``, the dashboard, ``/metrics`` labels): the crawl's
state, node states and the kinds of errors summed from the nodes' stats."""

from __future__ import annotations

from distcrawl.base.names.terms import Family, term

__all__ = [
    "CRAWL_STATE",
    "CRAWL_STATES",
    "CUT_CAUSE",
    "CUT_CAUSES",
    "DELAY_SOURCE",
    "DELAY_SOURCES",
    "ERROR_KIND",
    "HOLD_CAUSE",
    "HOLD_CAUSES",
    "NODE_STATE",
]

CRAWL_STATE = "crawl state"
NODE_STATE = "node state"
ERROR_KIND = "error kind"
CUT_CAUSE = "cut cause"
HOLD_CAUSE = "hold cause"
DELAY_SOURCE = "crawl delay source"

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

ROBOTS_UNAVAILABLE_HOLD = term(
    HOLD_CAUSE,
    "robots_unavailable",
    "its robots.txt answered 5xx, timed out or could not be reached (RFC 9309: assume it "
    "forbids everything): held until robots.txt is fetched again, with backoff",
)
RETRY_AFTER_HOLD = term(
    HOLD_CAUSE,
    "retry_after",
    "it answered 429 or 503 with Retry-After: every node holds its requests for that long (at "
    "most RETRY_AFTER_MAX)",
)
#: every cause of a site's hold (the label values of the hold metric)
HOLD_CAUSES = (ROBOTS_UNAVAILABLE_HOLD, RETRY_AFTER_HOLD)

ROBOTS_TXT_DELAY = term(
    DELAY_SOURCE, "robots_txt", "the Crawl-delay line of the site's robots.txt, as it asks"
)
CAPPED_DELAY = term(
    DELAY_SOURCE,
    "capped",
    "the site's robots.txt asked for more than DISTCRAWL_MAX_CRAWL_DELAY: capped at it "
    "(DISTCRAWL_CRAWL_DELAY_OVER_MAX = cap)",
)
#: every source of a site's Crawl-delay (the label values of the delay metric)
DELAY_SOURCES = (ROBOTS_TXT_DELAY, CAPPED_DELAY)
