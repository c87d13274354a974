"""Every setting distcrawl reads, each once: name, kind, default, one line of help, scope and
whether it is public; then distcrawl's defaults for some of Scrapy's own settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from distcrawl.base.config.kinds import (
    BOOL,
    DICT,
    DURATION,
    FLOAT,
    HOSTS,
    INT,
    INTERVALS,
    LIST,
    PATHS,
    STR,
    Kind,
)
from distcrawl.base.config.registry import Registry, Setting
from distcrawl.base.identifiers import seed_list_problem, unsafe_characters

__all__ = ["PLANTED_BUG", "SETTINGS"]

#: most shards a crawl may have
MAX_SHARDS = 1024
#: a node leases at most this many times its CONCURRENT_REQUESTS per round trip...
PREFETCH_PER_SLOT = 4
#: ... and never more than this many (one script call's work stays small)
PREFETCH_MAX = 256
#: heartbeats per DISTCRAWL_HEARTBEAT_TIMEOUT: a node is dead after missing this many...
BEATS_PER_TIMEOUT = 15
#: ... and beats at least this often (seconds): the status' rates and liveness come from beats
HEARTBEAT_MAX_INTERVAL = 2.0
#: heartbeats the whole cluster must look drained for (every node reported since)
DRAIN_BEATS = 1.5


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"at least {low:g}"


def _within(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"within {low:g}..{high:g}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else " or ".join(choices)


def _usable_name(*, seed_list: bool = False) -> Callable[[Any], str | None]:
    """A name's check (see :mod:`distcrawl.base.identifiers`): no character that forges or
    hides log lines; a seed list's, no '}' outside its hash tag either."""

    def check(value: Any) -> str | None:
        bad = unsafe_characters(str(value))
        if bad:
            return f"free of control and invisible characters (it holds {', '.join(bad[:5])})"
        if seed_list and value and seed_list_problem(str(value)):
            return "a name with no '}' outside its hash tag"
        return None

    return check


def _kind_of(kind: Kind, normalise: Callable[[Any], Any]) -> Kind:
    return Kind(kind.name, lambda raw: normalise(kind.read(raw)), kind.show)


def _server_limits(given: dict[str, Any]) -> str | None:
    unknown = set(given) - {"concurrency", "rate"}
    if unknown:
        return f'{{"concurrency": c, "rate": r}} (unknown: {", ".join(sorted(unknown))})'
    for name in ("concurrency", "rate"):
        value = given.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"{{{name!r}: a number of 0 or more}}"
    return None


def _page_priorities(given: dict[str, Any]) -> dict[str, int]:
    # a partial mapping changes only the kinds it names
    try:
        return {**_PAGE_PRIORITIES, **{str(k): int(v) for k, v in given.items()}}
    except (TypeError, ValueError):
        raise ValueError(f"{given!r} is not a mapping of page kind to integer") from None


_PAGE_PRIORITIES = {"seed": 1000, "category": 300, "listing": 200, "product": 100}


def _write_concern(value: Any) -> dict[str, Any]:
    """WriteConcern arguments: a mapping (or JSON object), or just ``w`` (journaled)."""
    if isinstance(value, Mapping) or str(value).strip().startswith("{"):
        given: dict[str, Any] = DICT.read(value)
        return given
    w: Any = str(value).strip()
    if w.isdigit():
        w = int(w)
    return {"w": 0} if w == 0 else {"w": w, "j": True}


_WRITE_CONCERN = Kind("write concern", _write_concern, DICT.show)

# fmt: off
_DISTCRAWL = [
    # -- where the crawl's state lives ------------------------------------------------------
    Setting(
        "REDIS_URL", STR, "",
        "the frontier's Redis: redis://, rediss:// (TLS), redis+cluster://h:p[,h:p] for a "
        "Redis Cluster; unset: the embedded server",
    ),
    Setting(
        "DISTCRAWL_REDIS_CLUSTER", BOOL, False,
        "treat a plain redis:// REDIS_URL as a Redis Cluster seed node (redis+cluster:// says it)",
        public=False,
    ),
    Setting(
        "MONGO_URI", STR, "",
        "the product store: mongodb://user:pw@host/db; unset: the embedded server",
    ),
    Setting("MONGO_DATABASE", STR, "", "database name; unset: the URI's, else catalog"),
    Setting(
        "DISTCRAWL_HOME", STR, "",
        "folder of the embedded servers' data and the pipeline's journal; unset: ./.distcrawl",
    ),
    Setting(
        "DISTCRAWL_EMBEDDED", BOOL, True,
        "start (or reuse) the embedded servers when REDIS_URL / MONGO_URI are unset (the node "
        "says so loudly; the last local node out stops the servers a node started)",
    ),
    Setting(
        "DISTCRAWL_REDIS_START_TIMEOUT", FLOAT, 60.0,
        "seconds a starting node waits for Redis before it exits with an error (0: forever); "
        "an outage after the start is waited out however long it lasts", public=False,
        check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_ALLOW_EVICTION", BOOL, False,
        "accept a Redis whose maxmemory-policy evicts any key (allkeys-*): evicted queues, "
        "leases and dead letters lose requests, an evicted dupefilter refetches pages; off: a "
        "node refuses to start on it",
        public=False,
    ),
    # -- the node ---------------------------------------------------------------------------
    Setting(
        "DISTCRAWL_NODE_ID", STR, "",
        "the node's identity; the same id after a restart takes its old leases back; unset: "
        "host-pid",
        check=_usable_name(),
    ),
    Setting(
        "DISTCRAWL_CLOSE_WHEN_DRAINED", BOOL, False,
        "close once the whole crawl is drained (off: wait for new seeds)",
    ),
    Setting(
        "DISTCRAWL_HEARTBEAT_TIMEOUT", FLOAT, 30.0,
        "seconds of silence after which a node is dead and its leases return to the queue",
        scope="crawl", check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_HEARTBEAT_INTERVAL", FLOAT, None,
        "seconds between two heartbeats of a node", public=False,
        derive=lambda get: min(
            HEARTBEAT_MAX_INTERVAL, get("DISTCRAWL_HEARTBEAT_TIMEOUT") / BEATS_PER_TIMEOUT
        ),
        derived=(
            f"DISTCRAWL_HEARTBEAT_TIMEOUT / {BEATS_PER_TIMEOUT}, at most "
            f"{HEARTBEAT_MAX_INTERVAL:g} s"
        ),
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "DISTCRAWL_DRAIN_GRACE", FLOAT, None,
        "seconds the whole crawl must look drained before a closing node closes",
        public=False,
        derive=lambda get: DRAIN_BEATS * get("DISTCRAWL_HEARTBEAT_INTERVAL"),
        derived=f"{DRAIN_BEATS:g} heartbeat intervals",
        check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_PREFETCH", INT, None,
        "most requests a node leases in one round trip (never more than its free slots)",
        public=False,
        derive=lambda get: min(PREFETCH_MAX, PREFETCH_PER_SLOT * get("CONCURRENT_REQUESTS")),
        derived=f"{PREFETCH_PER_SLOT} x CONCURRENT_REQUESTS, at most {PREFETCH_MAX}",
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_SEED_BATCH", INT, None,
        "seeds a node takes from the seed list per round trip", public=False,
        derive=lambda get: get("DISTCRAWL_PREFETCH"), derived="DISTCRAWL_PREFETCH",
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_FLUSH_DELAY", FLOAT, 0.2,
        "longest a node keeps acks and links while more than half its CONCURRENT_REQUESTS "
        "are prefetched", public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_RECORD_DONT_FILTER", BOOL, False,
        "a dont_filter request (a seed, a start URL) marks its URL seen; off, as on Scrapy, it "
        "neither checks nor marks it (the catalog spider turns it on: its pages link back to "
        "the home page)",
        public=False,
    ),
    Setting(
        "DISTCRAWL_COMPAT_TRANSLATED", LIST, [],
        "the scrapy-redis settings the add-on translated (set by the add-on)", public=False,
    ),
    Setting(
        "DISTCRAWL_GC_FREEZE", BOOL, True,
        "gc.freeze() once the spider is open: full collections skip the start-up objects",
        public=False,
    ),
    Setting(
        "DISTCRAWL_PROGRESS_INTERVAL", FLOAT, 30.0,
        "seconds between the cluster-wide progress lines in a node's log (0: off)",
        check=_at_least(0),
    ),
    # -- the shared frontier ----------------------------------------------------------------
    Setting(
        "DISTCRAWL_SHARDS", INT, 16,
        "frontier shards (one hash tag each)", scope="crawl",
        check=_within(1, MAX_SHARDS),
    ),
    Setting(
        "DISTCRAWL_DUPEFILTER", _kind_of(STR, lambda v: v.strip().lower()), "exact",
        "exact (64-bit fingerprints) or bloom", scope="crawl",
        check=_one_of("exact", "bloom"),
    ),
    Setting(
        "DISTCRAWL_BLOOM_CAPACITY", INT, 10_000_000,
        "URLs the Bloom dupefilter is sized for, crawl-wide", scope="crawl",
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_BLOOM_ERROR_RATE", FLOAT, 0.001,
        "the Bloom dupefilter's false-positive rate at capacity", scope="crawl",
        check=lambda v: None if 0 < v < 1 else "between 0 and 1",
    ),
    Setting(
        "DISTCRAWL_START_URLS_KEY", STR, "",
        "the seed list (%(name)s: the spider's name); unset: <spider>:start_urls",
        scope="crawl", check=_usable_name(seed_list=True),
    ),
    Setting(
        "DISTCRAWL_REQUEST_CLASSES", LIST, [],
        "Request subclasses (dotted paths) that keep their class through the frontier",
    ),
    Setting(
        "DISTCRAWL_ITEM_CLASSES", LIST, [],
        "item classes (dotted paths) whose objects may travel in a queued request's meta or "
        "cb_kwargs, as their fields, and come back as their class",
    ),
    # -- safety and politeness ----------------------------------------------------------------
    Setting(
        "DISTCRAWL_ALLOW_PRIVATE", HOSTS, False,
        "hosts crawlable although private or loopback: host, host:port or CIDR, comma-separated",
    ),
    Setting(
        "DISTCRAWL_MAX_PAGES_PER_SITE", INT, 100_000,
        "pages one site may cost the whole crawl (0: no budget)", check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_SITE_RATE", FLOAT, 0.0,
        "requests/s per site on all nodes together (0: no limit)", check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_SITE_CONCURRENCY", INT, 0,
        "requests of one site in flight on all nodes together (0: no limit)",
        check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_SITE_LIMITS", DICT, {},
        'per-site limits: {"host": {"rate": r, "concurrency": c}}',
    ),
    Setting(
        "DISTCRAWL_SITE_BURST", FLOAT, 1.0,
        "token-bucket size of a site's rate: the burst allowance above it", public=False,
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_ADAPTIVE_RATE", FLOAT, 8.0,
        "requests/s given to a site without a limit once it answers 429", public=False,
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "DISTCRAWL_SITE_RECOVERY", FLOAT, 120.0,
        "seconds a cut of a site's rate takes to wear off, linearly", public=False,
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "DISTCRAWL_SITE_LATENCY_TARGET", FLOAT, 5.0,
        "answers slower than this many seconds cut the site's rate by a fifth", public=False,
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "DISTCRAWL_ROBOTS_SHARED", BOOL, True,
        "robots.txt fetched by one node and shared with the others through Redis (off: every "
        "node fetches it, as Scrapy does)", public=False,
    ),
    Setting(
        "DISTCRAWL_ROBOTS_TTL", INT, 24 * 3600,
        "seconds a site's shared robots.txt serves every node", public=False,
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_MAX_CRAWL_DELAY", FLOAT, 30.0,
        "longest robots.txt Crawl-delay honoured, seconds; a site asking for more is set aside "
        "or capped (DISTCRAWL_CRAWL_DELAY_OVER_MAX)", check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_CRAWL_DELAY_OVER_MAX", _kind_of(STR, lambda v: v.strip().lower()), "set_aside",
        "a site whose Crawl-delay is over DISTCRAWL_MAX_CRAWL_DELAY: set_aside (its requests "
        "become dead letters, crawl_delay_over_max) or cap (crawled at the longest delay)",
        check=_one_of("set_aside", "cap"),
    ),
    Setting(
        "DISTCRAWL_ROBOTS_HOLD_MAX", FLOAT, 900.0,
        "seconds a site whose robots.txt cannot be read (5xx, timeout, connection error) is "
        "held, robots.txt retried with backoff; then its requests become dead letters "
        "(robots_unavailable)", check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_SERVER_LIMITS", DICT, {},
        'a budget per server (IP address) that its sites share on all nodes: {"concurrency": '
        'c, "rate": r} (requests in flight, requests/s; 0: no limit); {}: none',
        check=_server_limits,
    ),
    Setting(
        "DISTCRAWL_DNS_TTL", FLOAT, 60.0,
        "seconds the address guard trusts a checked DNS answer", public=False,
        check=_at_least(0),
    ),
    # -- the catalog spider ---------------------------------------------------------------------
    Setting(
        "DISTCRAWL_SITE_PROFILES", PATHS, [],
        "site profiles: TOML files or folders, separated by , or :",
    ),
    Setting(
        "PAGE_PRIORITIES", _kind_of(DICT, _page_priorities), dict(_PAGE_PRIORITIES),
        "queue priority per page kind (a partial mapping changes only the kinds it names)",
        scope="crawl",
    ),
    Setting(
        "CATALOG_KNOWN_LINKS", INT, 100_000,
        "link URLs the spider remembers having handed to the scheduler", public=False,
        check=_at_least(1),
    ),
    # -- the work one page may cost (a hostile page must not stall a node) ----------------------
    Setting(
        "DISTCRAWL_MAX_PARSE_BYTES", INT, 8 * 1024 * 1024,
        "bytes of a page's body the spider reads; the rest is ignored "
        "(safety/page_cut/too_many_bytes)", public=False, check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_MAX_LINKS_PER_PAGE", INT, 10_000,
        "links (<a>) of one page the spider reads, 0: all (safety/page_cut/too_many_links)",
        public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_MAX_PARSE_SECONDS", FLOAT, 5.0,
        "seconds the spider reads one page's links, 0: no limit (safety/page_cut/parse_time); "
        "a large page is read off the event loop", public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_MAX_FOLLOW_PER_PAGE", INT, 1_000,
        "new links one page hands to the frontier, pagination and products first, 0: no limit "
        "(safety/links_dropped/too_many_links)", public=False, check=_at_least(0),
    ),
    # -- revisit mode -----------------------------------------------------------------------------
    Setting(
        "DISTCRAWL_REVISIT", INTERVALS, {},
        "revisit mode: kind:interval,... (s, m, h, d, w; * = any other kind, gone = 404/410)",
        scope="crawl",
    ),
    Setting(
        "DISTCRAWL_REVISIT_MAX_BACKOFF", FLOAT, 1.0,
        "most an unchanged page's interval grows, as a factor (1: no backoff)",
        scope="crawl", check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_REVISIT_BACKOFF", FLOAT, 1.5,
        "an unchanged page's interval grows by this factor (up to the max backoff)",
        scope="crawl", public=False, check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_REVISIT_EARLY", FLOAT, 0.1,
        "share of the interval a revisit is scheduled early: room for queueing jitter",
        scope="crawl", public=False,
        check=lambda v: None if 0 <= v < 1 else "within 0..1 (not 1)",
    ),
    Setting(
        "DISTCRAWL_REVISIT_FORGET", DURATION, None,
        "the forgetting dupefilter's generation", scope="crawl", public=False,
        derived="2 x longest interval x max(4, max backoff) + 600 s",
    ),
    Setting(
        "DISTCRAWL_REVISIT_GRACE", FLOAT, 60.0,
        "in revisit mode the crawl is drained when nothing falls due within this many seconds",
        public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_UNLISTED", BOOL, True,
        "mark products that left every listing gone (when listings are revisited)",
    ),
    Setting(
        "DISTCRAWL_UNLISTED_GRACE", DURATION, None,
        "how long a product is in no listing before it is gone", public=False,
        derived="2 x longest listing interval x max(1, max backoff)",
    ),
    Setting(
        "DISTCRAWL_GONE_STATUSES", _kind_of(LIST, lambda v: [int(x) for x in v]), [404, 410],
        "statuses of a product page that mark its product gone",
    ),
    # -- what goes wrong, and who is told ---------------------------------------------------------
    Setting(
        "DISTCRAWL_ERROR_GROUPS_MAX", INT, 1000,
        "error groups a crawl keeps; a failure of a new group beyond them counts in the group "
        "of other failures of its kind", scope="crawl", public=False, check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_SNAPSHOTS_MAX", INT, 200,
        "first-occurrence snapshots a crawl keeps in MongoDB, one per error group (0: none)",
        scope="crawl", public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_SNAPSHOT_BYTES", INT, 64 * 1024,
        "bytes of a failing page's body a snapshot keeps (its headers: the first 50)",
        public=False, check=_at_least(0),
    ),
    Setting(
        "DISTCRAWL_EXPECTED_FIELDS", LIST, ["name", "price"],
        "product fields whose absence on a product page is an extraction miss (an error group)",
        public=False,
    ),
    Setting(
        "DISTCRAWL_QUALITY_FIELDS", LIST,
        ["name", "price", "currency", "sku", "availability", "description", "brand", "gtin",
         "image_urls", "category_path"],
        "product fields whose share on each site's stored products is watched", scope="crawl",
        public=False, check=lambda v: None if v else "one field or more",
    ),
    Setting(
        "DISTCRAWL_QUALITY_WINDOW", INT, 200,
        "a site's last products whose field shares are compared with its last crawl's",
        scope="crawl", public=False, check=_at_least(4),
    ),
    Setting(
        "DISTCRAWL_QUALITY_DROP", FLOAT, 0.2,
        "a fall of a field's share (0-1) over the window that is a finding", scope="crawl",
        public=False, check=lambda v: None if 0 < v <= 1 else "within 0..1 (not 0)",
    ),
    Setting(
        "DISTCRAWL_REPORT_FILE", STR, "",
        "where the last node of a finished crawl also writes the crawl report (.html: HTML, "
        "else JSON); it is always written to MongoDB",
        public=False,
    ),
    Setting(
        "DISTCRAWL_ALERT_WEBHOOK", LIST, [],
        "URLs a JSON notice is POSTed to (Slack-compatible text), comma-separated: crawl "
        "finished, finding, node dead, site cut, frontier outage", public=False,
    ),
    Setting(
        "DISTCRAWL_ALERT_RATE", INT, 20,
        "notices per minute for the whole cluster; those beyond are counted, not sent",
        public=False, check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_ALERT_RETRIES", INT, 5,
        "tries of a notice per URL, 1 s apart and doubling", public=False,
        check=_at_least(1),
    ),
    Setting(
        "DISTCRAWL_ALERT_TIMEOUT", FLOAT, 10.0,
        "seconds one POST of a notice may take; a closing node waits up to 3 times this for "
        "its notices to go", public=False, check=lambda v: None if v > 0 else "above 0",
    ),
    # -- the dashboard ----------------------------------------------------------------------------
    Setting(
        "DISTCRAWL_WEB_TOKEN", STR, "",
        "the token the dashboard's actions need, at least 16 characters; unset: read-only, "
        "loopback only",
    ),
    Setting(
        "DISTCRAWL_WEB_HOSTS", LIST, [],
        "host names the dashboard answers to besides loopback names (on a loopback bind) or "
        "IP addresses (elsewhere), comma-separated, e.g. a reverse proxy's; any other Host "
        "gets 421",
    ),
    # -- retries ----------------------------------------------------------------------------------
    Setting(
        "RETRY_BACKOFF_BASE", FLOAT, 1.0,
        "seconds the first retry waits at least; attempt n waits base * 2**(n-1)",
        check=_at_least(0),
    ),
    Setting("RETRY_BACKOFF_MAX", FLOAT, 120.0, "longest backoff, seconds", check=_at_least(0)),
    Setting(
        "RETRY_BACKOFF_JITTER", FLOAT, 0.5,
        "the wait is multiplied by a random factor in [1, 1 + jitter]", check=_at_least(0),
    ),
    Setting(
        "RETRY_AFTER_MAX", FLOAT, 600.0,
        "cap on an honoured Retry-After (429 and 503), seconds", check=_at_least(0),
    ),
    # -- the product store ------------------------------------------------------------------------
    Setting("MONGO_COLLECTION", STR, "products", "collection of the products"),
    Setting(
        "MONGO_UNIQUE_KEY", LIST, ["url"],
        "item fields forming a product's unique key (its _id), e.g. site,sku",
        check=lambda v: None if v else "one field or more",
    ),
    Setting(
        "MONGO_CHANGES_COLLECTION", STR, "changes",
        "collection of the change log, one document per price/currency/availability change "
        "(empty: off)",
    ),
    Setting(
        "MONGO_PRICE_HISTORY", INT, 20,
        "newest price-history entries kept per product (0: none)", check=_at_least(0),
    ),
    Setting(
        "MONGO_WRITE_CONCERN", _WRITE_CONCERN, {"w": "majority", "j": True},
        "write concern of the bulk writes: WriteConcern arguments, or just w; w=0 is refused",
        check=lambda v: None if v.get("w") not in (0, "0") else "acknowledged (not w=0)",
    ),
    Setting(
        "MONGO_BATCH_SIZE", INT, 100, "most products in one bulk write", public=False,
        check=_at_least(1),
    ),
    Setting(
        "MONGO_FLUSH_INTERVAL", FLOAT, 0.0,
        "seconds an idle writer lets a partial batch gather (0: write at once)",
        public=False, check=_at_least(0),
    ),
    Setting(
        "MONGO_TIMEOUT", FLOAT, 5.0, "driver timeouts, seconds: how fast an outage is noticed",
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "MONGO_BUFFER_MAX_ITEMS", INT, 1000,
        "products waiting in memory during an outage before they go to the journal",
        check=_at_least(1),
    ),
    Setting(
        "MONGO_JOURNAL_AFTER", FLOAT, 15.0,
        "seconds of outage after which waiting products go to the journal", check=_at_least(0),
    ),
    Setting(
        "MONGO_JOURNAL_PATH", STR, "",
        "the local journal's folder; unset: <DISTCRAWL_HOME>/journal/<db>.<collection>",
    ),
    Setting(
        "MONGO_CLOSE_TIMEOUT", FLOAT, 10.0,
        "seconds a closing node waits for MongoDB before journaling the rest",
        check=_at_least(0),
    ),
    Setting(
        "MONGO_JOURNAL_CLOSE_TIMEOUT", FLOAT, 300.0,
        "seconds a closing node whose journal holds products waits to replay them; then exit 3",
        check=_at_least(0),
    ),
    Setting(
        "MONGO_RETRY_BACKOFF", FLOAT, 0.25,
        "pause before retrying a failed write, seconds (doubling)", public=False,
        check=lambda v: None if v > 0 else "above 0",
    ),
    Setting(
        "MONGO_RETRY_BACKOFF_MAX", FLOAT, 5.0, "longest pause between write retries, seconds",
        public=False, check=lambda v: None if v > 0 else "above 0",
    ),
]

#: distcrawl's defaults for Scrapy settings it sets otherwise than Scrapy (or relies on)
_SCRAPY = [
    Setting(
        "ROBOTSTXT_OBEY", BOOL, True,
        "robots.txt is obeyed, fetched once per crawl and shared by the nodes", scrapy=True,
    ),
    Setting(
        "CONCURRENT_REQUESTS", INT, 16,
        "requests in flight on a node; also sizes its prefetch", scrapy=True, check=_at_least(1),
    ),
    Setting(
        "CONCURRENT_REQUESTS_PER_DOMAIN", INT, 16,
        "as CONCURRENT_REQUESTS: the shared per-site budget (DISTCRAWL_SITE_*) is the "
        "politeness limit", scrapy=True, check=_at_least(1),
    ),
    Setting(
        "CONCURRENT_ITEMS", INT, 16,
        "items processed in parallel per response (Scrapy: 100, costlier per page)",
        scrapy=True, check=_at_least(1),
    ),
    Setting(
        "DOWNLOAD_TIMEOUT", FLOAT, 30.0,
        "seconds a download may take: a stuck page holds a lease and a slot", scrapy=True,
    ),
    Setting(
        "DOWNLOAD_MAXSIZE", INT, 10 * 1024 * 1024, "larger bodies are refused", scrapy=True,
    ),
    Setting(
        "DOWNLOAD_WARNSIZE", INT, 2 * 1024 * 1024,
        "larger bodies are logged, well below DOWNLOAD_MAXSIZE", scrapy=True,
    ),
    Setting(
        "RETRY_TIMES", INT, 3, "retries after the first try", scrapy=True, check=_at_least(0),
    ),
    Setting(
        "DEPTH_LIMIT", INT, 100, "hops from the seed: ends crawler traps", scrapy=True,
        check=_at_least(0),
    ),
    Setting(
        "USER_AGENT", STR, "distcrawl/0.1 (+https://github.com/distcrawl/distcrawl)",
        "the User-Agent header: says who crawls", scrapy=True,
    ),
    Setting(
        "TELNETCONSOLE_ENABLED", BOOL, False,
        "a node exposes nothing to the network: no telnet console", scrapy=True,
    ),
    Setting(
        "LOG_LEVEL", _kind_of(STR, lambda v: v.strip().upper()), "INFO",
        "log level: one line per notable event",
        scrapy=True, check=_one_of("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"),
    ),
    Setting(
        "FEED_EXPORT_ENCODING", STR, "utf-8", "encoding of exported feeds: readable exports",
        scrapy=True,
    ),
    Setting(
        "WARN_ON_GENERATOR_RETURN_VALUE", BOOL, False,
        "off: Scrapy's check re-parses a callback's source per response (5-20 % of the CPU)",
        scrapy=True,
    ),
]
# fmt: on

#: a bug planted on purpose, only by the test that shows the fault search finds one
#: (``tests/e2e/test_search_finds_planted_bug.py``): ``misconf`` makes a ``MISCONF`` reply no
#: outage (:func:`distcrawl.frontier.outages.classify`); no user knob
PLANTED_BUG = "DISTCRAWL_TEST_PLANTED_BUG"

#: environment variables of distcrawl's tooling that are no settings (not reported unknown)
_TOOLING = (
    PLANTED_BUG,
    "DISTCRAWL_TEST_WORKERS",  # dev.py test: pytest-xdist workers
    "DISTCRAWL_CHROMIUM",  # the dashboard's browser tests: the Chromium to drive
    "DISTCRAWL_SCRAPYD_PROJECT",  # the scrapyd test: the project copy to deploy
    "DISTCRAWL_BENCH_RESULTS",  # the benches: the folder of their result files
)

#: every setting distcrawl reads
SETTINGS = Registry([*_DISTCRAWL, *_SCRAPY], not_settings=_TOOLING)
