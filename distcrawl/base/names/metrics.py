"""Metric names of the dashboard's ``/metrics`` (Prometheus), with their type and labels.

A counter's samples carry Prometheus' ``_total`` suffix after the name given here.
"""

from __future__ import annotations

from distcrawl.base.names.terms import term

__all__ = ["METRIC"]

METRIC = "metric"


def _gauge(name: str, meaning: str, *labels: str) -> str:
    return term(METRIC, name, meaning, kind="gauge", labels=labels)


def _counter(name: str, meaning: str, *labels: str) -> str:
    return term(METRIC, name, meaning, kind="counter", labels=labels)


UP = _gauge("distcrawl_up", "1 when the dashboard's last read of Redis worked")
REDIS_MEMORY_USED = _gauge(
    "distcrawl_redis_memory_used_bytes", "Redis' used memory (of a cluster: the fullest master)"
)
REDIS_MAXMEMORY = _gauge(
    "distcrawl_redis_maxmemory_bytes",
    "Redis' maxmemory (0: no limit); at it Redis refuses writes and the nodes wait",
)
REDIS_EVICTING = _gauge(
    "distcrawl_redis_evicting", "1 when Redis' maxmemory-policy may evict the crawl's keys"
)
PAUSED = _gauge("distcrawl_paused", "1 while the cluster is paused (control pause)")
DRAINED = _gauge(
    "distcrawl_drained", "1 when nothing is left: queue, retries, in flight and seeds all empty"
)
FRONTIER_REQUESTS = _gauge(
    "distcrawl_frontier_requests",
    "requests queued, by page kind (queue and site waiting rooms)",
    "kind",
)
QUEUED_REQUESTS = _gauge("distcrawl_frontier_queued_requests", "requests queued, all kinds")
WAITING_FOR_SITE_REQUESTS = _gauge(
    "distcrawl_frontier_waiting_for_site_requests", "queued requests waiting for their site"
)
PARKED_REQUESTS = _gauge("distcrawl_frontier_parked_requests", "parked retries (delayed until due)")
IN_FLIGHT_REQUESTS = _gauge(
    "distcrawl_frontier_in_flight_requests", "requests leased to nodes and not acked yet"
)
BACKLOG_REQUESTS = _gauge(
    "distcrawl_frontier_backlog_requests",
    "requests not finished: queued, parked, in flight, seeds",
)
SEEN_URLS = _gauge("distcrawl_frontier_seen_urls", "URLs in the shared dupefilter")
REJECTED_ENTRIES = _gauge(
    "distcrawl_frontier_rejected_entries", "refused seeds and queue entries kept for inspection"
)
SEEDS_WAITING = _gauge("distcrawl_seeds_waiting", "seeds in the start list or being seeded")
RESPONSES = _counter(
    "distcrawl_responses",
    "responses all nodes received: pages parsed, robots.txt, error answers, 304s (sum of the "
    "nodes' counters)",
)
ITEMS = _counter("distcrawl_items", "products scraped by all nodes (sum of the nodes' counters)")
DRAIN_ETA_SECONDS = _gauge(
    "distcrawl_drain_eta_seconds",
    "estimated seconds until the backlog is drained (NaN: unknown)",
)
NODES = _gauge("distcrawl_nodes", "nodes by state", "state")
NODE_RESPONSES = _counter("distcrawl_node_responses", "responses a node received", "node")
NODE_ITEMS = _counter("distcrawl_node_items", "products scraped by a node", "node")
NODE_IN_FLIGHT = _gauge("distcrawl_node_requests_in_flight", "requests leased to a node", "node")
NODE_HEARTBEAT_AGE = _gauge(
    "distcrawl_node_heartbeat_age_seconds", "seconds since a node's last heartbeat", "node"
)
NODE_JOURNAL = _gauge(
    "distcrawl_node_journal_products",
    "products only in a node's local journal, not in MongoDB yet (after a journal replay by "
    "hand: what it left)",
    "node",
)
DEAD_LETTERS = _gauge(
    "distcrawl_dead_letters",
    "dead letters by dead-letter reason (reasons beyond the top ones: other; past the counted "
    "sample: unsampled)",
    "reason",
)
ERRORS = _counter(
    "distcrawl_errors", "errors by kind (as status shows them), summed over the nodes", "kind"
)
SITE_IN_FLIGHT = _gauge(
    "distcrawl_site_requests_in_flight", "requests in flight for a site (top sites only)", "site"
)
SITE_WAITING = _gauge(
    "distcrawl_site_requests_waiting",
    "requests waiting for a site's budget (top sites only)",
    "site",
)
SITE_FACTOR = _gauge(
    "distcrawl_site_adaptive_factor", "a site's adaptive rate factor, 0-1 (top sites only)", "site"
)
SITE_CUT_REMAINING = _gauge(
    "distcrawl_site_cut_remaining_seconds",
    "seconds until a site's rate cut has worn off at the latest, by its cause (throttled, slow, "
    "unknown); only sites under a cut (top sites only)",
    "site",
    "cause",
)
ERROR_GROUPS = _gauge(
    "distcrawl_error_groups", "error groups of the crawl, by error group kind", "kind"
)
ERROR_GROUP_EVENTS = _counter(
    "distcrawl_error_group_events",
    "failures counted into the crawl's error groups, by error group kind",
    "kind",
)
FINDINGS = _gauge(
    "distcrawl_findings", "data-quality findings of the crawl (a field's share dropped on a site)"
)
SITE_CRAWL_DELAY = _gauge(
    "distcrawl_site_crawl_delay_seconds",
    "the Crawl-delay in force for a site, by where it came from (robots_txt, capped); only "
    "sites with one (top sites only)",
    "site",
    "source",
)
SITE_HOLD_REMAINING = _gauge(
    "distcrawl_site_hold_remaining_seconds",
    "seconds a site's hold still lasts, by its cause (robots_unavailable, retry_after); only "
    "held sites (top sites only)",
    "site",
    "cause",
)
SITES_WITH_CRAWL_DELAY = _gauge(
    "distcrawl_sites_with_crawl_delay", "sites whose robots.txt asks for a Crawl-delay"
)
SITES_HELD = _gauge("distcrawl_sites_held", "sites held now (robots.txt unavailable, Retry-After)")
SERVER_SITES = _gauge(
    "distcrawl_server_sites",
    "sites that answer from one server (IP address), for servers of more than one site (top "
    "servers only)",
    "server",
)
ROBOTS_UNAVAILABLE = _counter(
    "distcrawl_robots_unavailable",
    "robots.txt fetches that failed (5xx, timeout, connection error): the site was held",
)
STORE_UP = _gauge("distcrawl_store_up", "1 when MongoDB answered the dashboard's last count")
STORE_PRODUCTS = _gauge(
    "distcrawl_store_products", "products in the MongoDB collection, of every crawl (estimated)"
)
STORE_THIS_CRAWL = _gauge(
    "distcrawl_store_crawl_products",
    "products this crawl stored: last seen since its first node started",
)
REFRESHES = _counter("distcrawl_dashboard_refreshes", "reads of the cluster made by this dashboard")

#: label values a metric shows for what is not named: the rest of the top labels, and what
#: lies past the counted sample of dead letters
OTHER = "other"
UNSAMPLED = "unsampled"
