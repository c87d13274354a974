"""Stats keys: what a node counts in ``crawler.stats`` (and publishes with its heartbeat), and
the keys of Scrapy's own stats that ``status`` reads."""

from __future__ import annotations

from distcrawl.base.names.terms import Family, term

__all__ = ["STATS"]

STATS = "stats key"


#: the kind of a stats key Scrapy counts and distcrawl only reads
SCRAPY = "scrapy"


def _stat(name: str, meaning: str, *, kind: str = "") -> str:
    return term(STATS, name, meaning, kind=kind)


# -- the catalog spider --------------------------------------------------------------------

PAGES = Family(STATS, "catalog/pages/", "kind", "pages parsed, by page kind")
PAGES_NOT_HTML = _stat("catalog/pages/not_html", "answers that were not HTML (not parsed)")
LINKS_KNOWN = _stat(
    "catalog/links/known",
    "links not built again because the spider handed them over before (CATALOG_KNOWN_LINKS)",
)
LINKS_OFFSITE = _stat("catalog/links/offsite", "links to another site than the seed's, dropped")

# -- the frontier, as a node sees it -------------------------------------------------------

ENQUEUED = _stat("frontier/enqueued", "requests this node pushed that the frontier took as new")
FILTERED = _stat("frontier/filtered", "requests the shared dupefilter dropped as already seen")
FILTERED_LOCALLY = _stat(
    "frontier/filtered_locally",
    "requests dropped by the node itself: it had already sent the same fingerprint",
)
PARKED = _stat("frontier/parked", "retries parked in Redis until their backoff is over")
ACKED = _stat("frontier/acked", "leases acknowledged (the request is finished for good)")
STALE_ACKS = _stat(
    "frontier/acks/stale",
    "acks or dead letters for leases this node no longer held (it was presumed dead): fenced "
    "off, they changed nothing",
)
PRIORITY_INVERSIONS = _stat(
    "frontier/priority_inversions",
    "leases of lower priority than the best request still queued in another shard read in the "
    "same round trip",
)
LEASED = _stat("frontier/leased", "requests leased to this node")
OWN = _stat(
    "frontier/own",
    "requests this node handed to Scrapy as it found them, from its memory (solo mode: alone "
    "in a crawl it began), each written to the frontier as its own lease",
)
OWN_SEEN = _stat(
    "frontier/own/seen",
    "own requests the shared dupefilter already held when they were written (solo mode's "
    "invariant broke: logged; fetched twice unless Scrapy had not started them)",
)
STARTED = _stat("frontier/started", "leased requests handed to Scrapy's engine")
STARVED = _stat(
    "frontier/starved", "times the engine asked for a request while the node had none prefetched"
)
ROUNDTRIPS = _stat("frontier/roundtrips", "round trips to Redis (one pipelined flush each)")
DEAD_LETTERED = _stat("frontier/dead_lettered", "requests this node sent to the dead letters")
DEAD_LETTERS_UNWRITABLE = _stat(
    "frontier/dead_letters/unwritable",
    "requests given up on that no dead letter can carry (kept in memory for that reason): "
    "each logged",
)
REQUEUED_DEAD_LETTERS = _stat(
    "frontier/requeued_dead_letters", "dead letters an operator re-queued, leased by this node"
)
IN_MEMORY = Family(
    STATS,
    "frontier/in_memory/",
    "reason",
    "requests kept in this node's memory because no queue entry can carry them, by reason "
    "(unserializable, bad_scheme, ...): not lossless, a node that dies loses them",
)
REFUSED = Family(
    STATS, "frontier/refused/", "reason", "queue entries refused when leased, by refusal reason"
)
SEEDS_ACCEPTED = _stat("frontier/seeds/accepted", "seeds taken into the frontier")
SEEDS_TAKEN_AGAIN = _stat(
    "frontier/seeds/taken_again",
    "seeds given back by a node that stopped or died holding them, taken again (their "
    "requests go through the dupefilter)",
)
SEEDS_REFUSED = Family(
    STATS, "frontier/seeds/refused/", "reason", "seeds refused, by refusal reason"
)
RECLAIMED = _stat(
    "frontier/reclaimed", "leases of an earlier run of this node id taken back at start"
)
RETURNED = _stat("frontier/returned", "unfinished leases returned to the queue at a clean stop")
RECOVERED = _stat("frontier/recovered", "requests this node returned to the queue from dead nodes")
PRESUMED_DEAD = _stat(
    "frontier/presumed_dead",
    "times this node learnt it had been presumed dead and its leases recovered",
)
REDIS_REWINDS = _stat(
    "frontier/redis_rewinds", "times this node found that Redis had lost its last writes"
)
STATE_LOST = _stat(
    "frontier/state_lost",
    "1 once this node found the crawl's state gone from Redis (its start marker missing) and "
    "stopped",
)
LEASES_LOST = _stat("frontier/leases/lost", "leases Redis no longer knew (after a rewind), dropped")
REDIS_ERRORS = _stat("frontier/redis_errors", "failed round trips to Redis (outages included)")
OUTAGES = _stat(
    "frontier/outages",
    "Redis outages this node waited out (out of reach, out of memory, busy, loading, read-only, "
    "master or cluster down)",
)
LOOP_ERRORS = _stat(
    "frontier/loop_errors",
    "failed round trips of the I/O loop that were no outage (each kind logged once)",
)
REDIS_MEMORY_USED = _stat(
    "frontier/redis_memory_used",
    "Redis' used memory in bytes, as the node last read it (of a cluster: the fullest master)",
)
REDIS_MAXMEMORY = _stat(
    "frontier/redis_maxmemory", "Redis' maxmemory in bytes (0: no limit), as the node last read it"
)
SITE_CUTS = Family(
    STATS,
    "frontier/site_cuts/",
    "cause",
    "cuts of a site's shared rate this node made, by cause (throttled: 429 or 503, slow: over "
    "DISTCRAWL_SITE_LATENCY_TARGET)",
)
SITE_RECOVERIES = _stat("frontier/site_recoveries", "sites seen back at their full shared rate")
SITE_HOLDS = Family(
    STATS,
    "frontier/site_holds/",
    "cause",
    "holds of a site this node made, by hold cause (robots_unavailable: its robots.txt could "
    "not be read; retry_after: it answered 429 or 503 with Retry-After)",
)
GIVEN_BACK = _stat(
    "frontier/given_back",
    "leased requests returned to the frontier unstarted: their site was held, or leased "
    "before this node knew its Crawl-delay",
)
SHARE_WAITS = _stat(
    "frontier/share_waits",
    "times a request waited because its site had its share of the node's download slots "
    "while other sites had work",
)
SERVER_WAITS = _stat(
    "frontier/server_waits",
    "times a request waited for a grant of its server's budget (DISTCRAWL_SERVER_*)",
)
SERVERS_NOTED = _stat(
    "frontier/servers_noted", "sites whose server (IP address) this node told the frontier"
)
OUTSIDE_WAITS = _stat(
    "frontier/outside_waits",
    "requests that reached the downloader outside the queue (a middleware's own download, one "
    "kept in memory), or leased ones held after their token, and waited for their site's "
    "hold, Crawl-delay or rate",
)
TOKENS_TAKEN_AGAIN = _stat(
    "frontier/tokens_taken_again",
    "leased requests the gate held after their lease spent their site's rate token (its "
    "robots.txt being read, a hold, its share of the slots, its server's budget): each took a "
    "new token before it was sent",
)
WOKEN = _stat("frontier/woken", "times an idle node was woken by the wake channel")

# -- Scrapy's and scrapy-redis' names, kept ------------------------------------------------

SCHEDULER_ENQUEUED = _stat("scheduler/enqueued", "as in Scrapy: requests queued")
SCHEDULER_ENQUEUED_REDIS = _stat(
    "scheduler/enqueued/redis", "as in scrapy-redis: requests queued in Redis"
)
SCHEDULER_ENQUEUED_MEMORY = _stat(
    "scheduler/enqueued/memory",
    "as in Scrapy: requests kept in the node's memory (see frontier/in_memory/)",
)
SCHEDULER_UNSERIALIZABLE = _stat(
    "scheduler/unserializable",
    "as in Scrapy: requests a queue entry cannot carry (meta or cb_kwargs that are not JSON "
    "values or allowed items, a callback that is no method of the spider), kept in memory",
)
SCHEDULER_DEQUEUED = _stat("scheduler/dequeued", "as in Scrapy: requests taken from the scheduler")
SCHEDULER_DEQUEUED_MEMORY = _stat(
    "scheduler/dequeued/memory", "as in Scrapy: requests taken from the node's memory"
)
SCHEDULER_DEQUEUED_REDIS = _stat(
    "scheduler/dequeued/redis", "as in scrapy-redis: requests taken from Redis"
)
DUPEFILTER_FILTERED = _stat("dupefilter/filtered", "as in Scrapy: requests dropped as already seen")
ITEM_SCRAPED = _stat(
    "item_scraped_count",
    "as in Scrapy; counts products only (revisit items are counted apart)",
)
RESPONSE_RECEIVED = _stat("response_received_count", "as in Scrapy: answers received", kind=SCRAPY)
LOG_ERRORS = _stat("log_count/ERROR", "as in Scrapy: lines logged at level ERROR", kind=SCRAPY)
RESPONSE_STATUS = Family(
    STATS,
    "downloader/response_status_count/",
    "status",
    "as in Scrapy: answers by HTTP status",
    kind=SCRAPY,
)
EXCEPTION_TYPE = Family(
    STATS,
    "downloader/exception_type_count/",
    "exception",
    "as in Scrapy: failed downloads by exception (its dotted path)",
    kind=SCRAPY,
)
SPIDER_EXCEPTIONS = Family(
    STATS,
    "spider_exceptions/",
    "exception",
    "as in Scrapy: callbacks that raised, by exception",
    kind=SCRAPY,
)
RETRY_COUNT = _stat("retry/count", "as in Scrapy: retries scheduled", kind=SCRAPY)
RETRY_MAX_REACHED = _stat(
    "retry/max_reached",
    "as in Scrapy: requests that failed their last try (dead-lettered here)",
    kind=SCRAPY,
)
RETRY_REASONS = Family(
    STATS,
    "retry/reason_count/",
    "reason",
    "as in Scrapy: retries, by the dead-letter reason a request gets after its last try",
    kind=SCRAPY,
)

# -- retries -------------------------------------------------------------------------------

RETRY_DELAYED_MS = _stat("retry/delayed_ms", "milliseconds of backoff the node's retries waited")
RETRY_AFTER_HONOURED = _stat(
    "retry/retry_after_honoured", "retries that waited as a Retry-After header asked"
)
RETRY_AFTER_CAPPED = _stat(
    "retry/retry_after_capped",
    "Retry-After headers asking for more than RETRY_AFTER_MAX: the wait was capped at it",
)

# -- revisit mode --------------------------------------------------------------------------

REVISIT_SCHEDULED = _stat("revisit/scheduled", "pages scheduled for a revisit")
REVISIT_VERDICT = Family(
    STATS,
    "revisit/",
    "verdict",
    "revisits by what they found: first (scheduled after a first visit), changed, unchanged "
    "(a 304 or the same body), gone (404 or 410)",
)
REVISIT_CONDITIONAL = _stat(
    "revisit/conditional", "revisits sent with If-None-Match / If-Modified-Since"
)
REVISIT_NOT_MODIFIED = _stat("revisit/not_modified", "revisits answered 304 Not Modified")
REVISIT_UNLISTED = _stat("revisit/unlisted", "products a revisited listing no longer links")
REVISIT_UNSCHEDULABLE = _stat(
    "revisit/unschedulable", "pages that could not be scheduled again (their state did not fit)"
)
REVISIT_SCRAPED = _stat(
    "revisit_scraped_count", "revisit items (a 304 or a gone page turned into an update)"
)
FRESHNESS_NOT_MODIFIED = _stat(
    "freshness/not_modified", "304 answers turned into a last_seen update"
)
FRESHNESS_GONE = _stat("freshness/gone", "product pages answering a gone status, marked gone_at")
FRESHNESS_UNLISTED = _stat(
    "freshness/unlisted", "products stored as gone because they left every listing"
)

# -- the MongoDB pipeline ------------------------------------------------------------------

#: the prefix of the pipeline's and the store's counters (their names below)
PIPELINE_PREFIX = "pipeline/"
WRITTEN = _stat("pipeline/written", "products written to MongoDB")
INSERTED = _stat("pipeline/inserted", "new products inserted")
UPDATED = _stat("pipeline/updated", "known products updated")
BATCHES = _stat("pipeline/batches", "bulk writes")
WRITE_RETRIES = _stat("pipeline/retries", "bulk writes retried after a failure")
CHANGES = _stat("pipeline/changes", "changes of price, currency or availability logged")
NOT_MODIFIED = _stat("pipeline/not_modified", "products seen again by a 304")
GONE = _stat("pipeline/gone", "products marked gone")
REVISIT_UNKNOWN = _stat(
    "pipeline/revisit_unknown", "revisits of a page whose product is not stored"
)
JOURNALED = _stat("pipeline/journaled", "products written to the local journal during an outage")
REPLAYED = _stat("pipeline/replayed", "products replayed from a journal into MongoDB")
JOURNAL_DAMAGED = _stat("pipeline/journal_damaged", "damaged journal records skipped at replay")
JOURNAL_HELD = _stat(
    "pipeline/journal_held", "products left in the local journal (not in MongoDB yet)"
)
JOURNAL_PATH = _stat(
    "pipeline/journal_path",
    "the node's journal directory (text; published with its heartbeat, so that a replay by "
    "hand can tell the crawl what it finished)",
)
ITEMS_DROPPED = Family(STATS, "pipeline/dropped/", "reason", "items dropped, by refusal reason")

# -- what goes wrong, and who is told -----------------------------------------------------

OBSERVED_ERRORS = _stat(
    "observe/errors",
    "failures this node counted into the crawl's error groups (every try of every kind)",
)
SNAPSHOTS_WRITTEN = _stat(
    "observe/snapshots/written", "first occurrences of error groups this node stored in MongoDB"
)
SNAPSHOTS_DROPPED = _stat(
    "observe/snapshots/dropped",
    "first occurrences given up: MongoDB refused them or was away for every try, or too many "
    "waited (the group keeps its count, without a snapshot)",
)
FINDINGS = _stat("observe/findings", "data-quality findings this node found first")
ALERTS_SENT = _stat("alerts/sent", "notices this node POSTed to a webhook (each URL counted)")
ALERTS_FAILED = _stat(
    "alerts/failed", "notices given up after every try of DISTCRAWL_ALERT_RETRIES (each URL)"
)
ALERTS_DUPLICATE = _stat(
    "alerts/duplicate", "events another node had already claimed the notice of (not sent again)"
)
ALERTS_RATE_LIMITED = _stat(
    "alerts/rate_limited", "notices not sent: the cluster had sent DISTCRAWL_ALERT_RATE this minute"
)

# -- safety --------------------------------------------------------------------------------

SAFETY_REFUSED = Family(
    STATS, "safety/refused/", "reason", "requests refused before download, by refusal reason"
)
SAFETY_UNRESOLVED = _stat("safety/unresolved", "host names that did not resolve")
PAGE_BUDGET_UNAVAILABLE = _stat(
    "safety/page_budget_unavailable",
    "pages let through while the page budget in Redis could not be read",
)
PAGE_CUT = Family(
    STATS,
    "safety/page_cut/",
    "limit",
    "pages whose analysis a limit cut short (too_many_bytes, too_many_links, parse_time)",
)
LINKS_UNREAD = _stat("safety/links_unread", "links (<a>) of cut pages left unread")
LINKS_DROPPED = Family(
    STATS,
    "safety/links_dropped/",
    "reason",
    "links not queued: beyond DISTCRAWL_MAX_FOLLOW_PER_PAGE (too_many_links), or of a site whose "
    "page budget is used up (page_budget)",
)
PAGES_OFF_LOOP = _stat(
    "catalog/pages/off_loop", "large pages analysed on the worker thread, off the event loop"
)
LOOP_STALL_MAX_MS = _stat(
    "node/loop_stall_max_ms", "the longest the node's event loop went without running (ms)"
)
LOOP_STALLS = _stat(
    "node/loop_stalls",
    "stalls of the event loop of a second or more (each logged, at most once a minute)",
)
ROBOTSTXT_SHARED = _stat(
    "robotstxt/shared", "robots.txt answers taken from Redis instead of fetched"
)
ROBOTSTXT_REQUESTS = _stat(
    "robotstxt/request_count",
    "as Scrapy counts them: robots.txt fetches (distcrawl reads robots.txt itself)",
)
ROBOTSTXT_RESPONSES = _stat("robotstxt/response_count", "as in Scrapy: robots.txt answers received")
ROBOTSTXT_STATUS = Family(
    STATS,
    "robotstxt/response_status_count/",
    "status",
    "as in Scrapy: robots.txt answers by HTTP status",
)
ROBOTSTXT_EXCEPTIONS = Family(
    STATS,
    "robotstxt/exception_count/",
    "type(exc)",
    "as in Scrapy: robots.txt fetches that failed, by the exception's type",
)
ROBOTSTXT_UNAVAILABLE = _stat(
    "robotstxt/unavailable",
    "robots.txt fetches that failed (5xx, timeout, connection error): the site is held and "
    "robots.txt fetched again with backoff (RFC 9309)",
)
ROBOTSTXT_NO_RULES = _stat(
    "robotstxt/no_rules", "robots.txt answered 4xx: no rules, the site is crawled (RFC 9309)"
)
ROBOTSTXT_CRAWL_DELAY = _stat(
    "robotstxt/crawl_delay", "sites whose robots.txt asks for a Crawl-delay, as this node read it"
)
ROBOTSTXT_DELAY_CAPPED = _stat(
    "robotstxt/crawl_delay_capped",
    "sites whose Crawl-delay was over DISTCRAWL_MAX_CRAWL_DELAY and capped at it",
)
SET_ASIDE = Family(
    STATS,
    "robotstxt/set_aside/",
    "reason",
    "requests dead-lettered because of their site's robots.txt, by dead-letter reason "
    "(robots_unavailable, crawl_delay_over_max)",
)
GC_FROZEN = _stat(
    "gc/frozen_objects",
    "objects moved out of the garbage collector's way at start (DISTCRAWL_GC_FREEZE)",
)
