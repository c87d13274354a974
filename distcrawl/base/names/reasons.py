"""Reasons: why a request became a dead letter, and why a seed, a queue entry, a request or an
item was refused. Each is a short, stable name: the same in logs, stats keys, ``status``, the
``--reason`` filters, the dashboard and ``/metrics``."""

from __future__ import annotations

from distcrawl.base.names.exits import REFUSED as EXIT_REFUSED
from distcrawl.base.names.exits import STATE_LOST as EXIT_STATE_LOST
from distcrawl.base.names.terms import Family, term

__all__ = ["DEAD_LETTER", "REFUSAL", "exception_reason", "http_reason"]

DEAD_LETTER = "dead letter reason"
REFUSAL = "refusal reason"

# -- dead letters --------------------------------------------------------------------------

HTTP = Family(
    DEAD_LETTER,
    "http_",
    "status",
    "the last try was answered with this HTTP status, one of RETRY_HTTP_CODES (http_503)",
)
EXCEPTION = term(
    DEAD_LETTER,
    "<ExceptionName>",
    "the last try failed with this exception, one of RETRY_EXCEPTIONS, named by its class "
    "without its module (DownloadConnectionRefusedError, DownloadTimeoutError)",
)
ROBOTS_UNAVAILABLE = term(
    DEAD_LETTER,
    "robots_unavailable",
    "the site's robots.txt could not be read (5xx, timeout, connection error) for "
    "DISTCRAWL_ROBOTS_HOLD_MAX while its requests were held; re-queue them once the site is back",
)
CRAWL_DELAY_OVER_MAX = term(
    DEAD_LETTER,
    "crawl_delay_over_max",
    "the site's robots.txt asks for a Crawl-delay over DISTCRAWL_MAX_CRAWL_DELAY and "
    "DISTCRAWL_CRAWL_DELAY_OVER_MAX is set_aside: raise the maximum, then re-queue them",
)
UNKNOWN = term(DEAD_LETTER, "unknown", "a dead letter whose record names no reason")
UNREADABLE_RECORD = term(
    DEAD_LETTER, "unreadable_record", "a dead letter (or refused entry) that is not a JSON object"
)


def http_reason(status: int) -> str:
    """The reason of a request whose last try was answered *status*: ``http_503``."""
    return HTTP(str(int(status)))


def exception_reason(failure: BaseException | type | str) -> str:
    """The reason of a request whose last try raised *failure* (an exception, its class, or
    its dotted path as Scrapy's stats write it): the class name without its module."""
    if isinstance(failure, BaseException):
        failure = type(failure)
    name = failure.__name__ if isinstance(failure, type) else str(failure)
    return name.rpartition(".")[2]


# -- refusals: seeds, queue entries, requests before download, items -----------------------
# Where a reason applies: seed (``seed``, the start list), entry (a queue entry a node leases,
# or one ``migrate`` moves), request (before its download), item (before MongoDB).

EMPTY_URL = term(REFUSAL, "empty_url", "seed, entry: the URL is empty")
URL_TOO_LONG = term(REFUSAL, "url_too_long", "seed, entry: the URL is longer than allowed")
BAD_CHARACTERS = term(REFUSAL, "bad_characters", "seed, entry: the URL holds control characters")
MALFORMED_URL = term(REFUSAL, "malformed_url", "seed, entry, request: the URL does not parse")
BAD_SCHEME = term(REFUSAL, "bad_scheme", "seed, entry, request: not http or https")
MISSING_HOST = term(REFUSAL, "missing_host", "seed, entry: the URL names no host")
PRIVATE_ADDRESS = term(
    REFUSAL,
    "private_address",
    "seed, entry, request: a private or loopback host (or one resolving to such an address), "
    "not listed in DISTCRAWL_ALLOW_PRIVATE",
)
OWN_ADDRESS = term(
    REFUSAL,
    "own_address",
    "request: the node's own Redis or MongoDB, or a dashboard of the crawl (in any notation "
    "of its address), never fetched whatever DISTCRAWL_ALLOW_PRIVATE allows",
)
METADATA_ADDRESS = term(
    REFUSAL, "metadata_address", "request: a cloud metadata address, never fetched"
)
SEED_TOO_LARGE = term(REFUSAL, "seed_too_large", "seed: larger than the seed size limit")
EMPTY_SEED = term(REFUSAL, "empty_seed", "seed: blank")
NOT_UTF8 = term(REFUSAL, "not_utf8", "seed, entry: not UTF-8 text")
NOT_AN_OBJECT = term(REFUSAL, "not_an_object", "seed, entry: JSON, but not an object")
BAD_JSON = term(REFUSAL, "bad_json", "seed: starts like a JSON object but does not parse")
NOT_JSON = term(REFUSAL, "not_json", "entry: not JSON")
MISSING_URL = term(REFUSAL, "missing_url", "seed, entry: a JSON object without a string url")
UNKNOWN_KEYS = term(REFUSAL, "unknown_keys", "seed: keys other than url, priority and meta")
BAD_PRIORITY = term(REFUSAL, "bad_priority", "seed, entry: a priority that is not a small integer")
BAD_META = term(REFUSAL, "bad_meta", "seed, entry: meta that is not a JSON object")
RESERVED_META = term(
    REFUSAL, "reserved_meta", "seed: meta keys that steer the crawl's limits (depth, retries, ...)"
)
SPIDER_REFUSED = term(REFUSAL, "spider_refused", "seed: the spider made no request of it")
NODE_ID_IN_USE = term(
    REFUSAL,
    "node_id_in_use",
    "node: another live process runs under its DISTCRAWL_NODE_ID; it does not start (its "
    "finish reason; scrapy crawl exits with status "
    f"{EXIT_REFUSED})",
)
OTHER_FORMAT = term(
    REFUSAL,
    "other_frontier_format",
    "node: the crawl's keys are in another frontier format than this distcrawl's; it does not "
    "start (its finish reason; scrapy crawl exits with status "
    f"{EXIT_REFUSED})",
)
CRAWL_STATE_LOST = term(
    REFUSAL,
    "crawl_state_lost",
    "node: the crawl's state is gone from Redis (its start marker missing or marked lost: "
    "Redis restarted empty, a flush, another database); it stops, or does not start (its "
    "finish reason; scrapy crawl exits with status "
    f"{EXIT_STATE_LOST})",
)
REDIS_UNREACHABLE = term(
    REFUSAL,
    "redis_unreachable",
    "node: Redis did not serve it within DISTCRAWL_REDIS_START_TIMEOUT of its start; it does "
    "not start (its finish reason; scrapy crawl exits with status "
    f"{EXIT_REFUSED})",
)
REDIS_EVICTS = term(
    REFUSAL,
    "redis_evicts",
    "node: Redis' maxmemory-policy may evict the crawl and DISTCRAWL_ALLOW_EVICTION does not "
    "accept it; it does not start (its finish reason; scrapy crawl exits with status "
    f"{EXIT_REFUSED})",
)
TOO_LARGE = term(
    REFUSAL,
    "too_large",
    "entry: a payload over the size limit; request: an answer over DOWNLOAD_MAXSIZE; item: a "
    "product over MongoDB's document size",
)
PICKLE_REFUSED = term(
    REFUSAL, "pickle_refused", "entry: a pickle (never loaded; migrate: without --trust-pickle)"
)
BAD_PICKLE = term(REFUSAL, "bad_pickle", "entry (migrate): a pickle that does not load as data")
UNKNOWN_FIELDS = term(REFUSAL, "unknown_fields", "entry: fields the payload format does not have")
BAD_METHOD = term(REFUSAL, "bad_method", "entry: a method other than GET, POST, HEAD, ...")
BAD_HEADERS = term(REFUSAL, "bad_headers", "entry: headers that are not names and text values")
BAD_REFERER = term(REFUSAL, "bad_referer", "entry: a referer that is not a path of the site")
BAD_BODY = term(REFUSAL, "bad_body", "entry: a body that is not base64 text")
BAD_DEPTH = term(REFUSAL, "bad_depth", "entry: a depth that is not a small non-negative integer")
BAD_COOKIES = term(REFUSAL, "bad_cookies", "entry: cookies that are not names and text values")
BAD_CB_KWARGS = term(
    REFUSAL, "bad_cb_kwargs", "entry: cb_kwargs that are not an object, or name the callback's own"
)
BAD_FLAGS = term(REFUSAL, "bad_flags", "entry: flags that are not a list of text")
BAD_ENCODING = term(REFUSAL, "bad_encoding", "entry: an encoding that is not ASCII-compatible")
BAD_DONT_FILTER = term(REFUSAL, "bad_dont_filter", "entry: a dont_filter that is not true or false")
BAD_CLASS = term(REFUSAL, "bad_class", "entry: a request class that is not a name")
BAD_REQUEST = term(REFUSAL, "bad_request", "entry: fields Scrapy cannot make a request of")
BAD_RULE = term(REFUSAL, "bad_rule", "entry: a CrawlSpider rule the spider does not have")
BAD_CALLBACK = term(
    REFUSAL, "bad_callback", "entry: a callback that is not a public method name, or not callable"
)
BAD_ERRBACK = term(
    REFUSAL, "bad_errback", "entry: an errback that is not a public method name, or not callable"
)
UNKNOWN_CALLBACK = term(
    REFUSAL, "unknown_callback", "entry: a callback the spider does not have (or cannot queue)"
)
UNKNOWN_ERRBACK = term(
    REFUSAL, "unknown_errback", "entry: an errback the spider does not have (or cannot queue)"
)
PRIVATE_CALLBACK = term(REFUSAL, "private_callback", "entry (migrate): a private callback")
PRIVATE_ERRBACK = term(REFUSAL, "private_errback", "entry (migrate): a private errback")
UNSAFE_META = term(REFUSAL, "unsafe_meta", "entry: meta keys that could steer the downloader")
BAD_ITEMS = term(REFUSAL, "bad_items", "entry: items in meta or cb_kwargs not given as fields")
BAD_ITEM = term(REFUSAL, "bad_item", "entry: an item its class cannot be made again from")
UNKNOWN_ITEM_CLASS = term(
    REFUSAL,
    "unknown_item_class",
    "entry: an item class not in DISTCRAWL_ITEM_CLASSES",
)
UNKNOWN_REQUEST_CLASS = term(
    REFUSAL,
    "unknown_request_class",
    "entry: a request class not in DISTCRAWL_REQUEST_CLASSES",
)
UNQUEUEABLE = term(
    REFUSAL,
    "unqueueable",
    "entry (migrate), request (kept in the node's memory): a request the codec cannot write",
)
REDIRECT_LOOP = term(REFUSAL, "redirect_loop", "request: a redirect back to a URL already taken")
PAGE_BUDGET = term(REFUSAL, "page_budget", "request, link: its site has used its page budget")
TOO_MANY_LINKS = term(
    REFUSAL,
    "too_many_links",
    "page: more links than DISTCRAWL_MAX_LINKS_PER_PAGE (the rest left unread); link: beyond "
    "the page's DISTCRAWL_MAX_FOLLOW_PER_PAGE new links",
)
TOO_MANY_BYTES = term(
    REFUSAL, "too_many_bytes", "page: a body over DISTCRAWL_MAX_PARSE_BYTES (the rest ignored)"
)
PARSE_TIME = term(
    REFUSAL, "parse_time", "page: links still unread after DISTCRAWL_MAX_PARSE_SECONDS"
)
MISSING_ITEM_FIELD = Family(
    REFUSAL, "missing_", "field", "item: a product without this field (missing_url, missing_name)"
)
UNENCODABLE = term(REFUSAL, "unencodable", "item: a product MongoDB cannot encode")
REVISIT_STATUS = term(
    REFUSAL, "revisit_status", "item: a revisit with an answer that says nothing of the product"
)
REJECTED = term(REFUSAL, "rejected", "item: a product MongoDB refused (its message is logged)")
