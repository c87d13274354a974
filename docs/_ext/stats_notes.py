"""What each stats key a node counts means: a stop-gap source for the stats reference until the
project's vocabulary defines every stats key once.

``sources.stats()`` pairs these with the keys found in the code; a test fails when the code
counts a key that is not here, or when a key here is counted nowhere. ``<reason>``-like parts
stand for a family of keys (a reason, a page kind, a status).
"""

from __future__ import annotations

#: stats key -> what it counts
STATS: dict[str, str] = {
    # the catalog spider
    "catalog/pages/<kind>": "pages parsed, by page kind (`category`, `listing`, `product`, ...)",
    "catalog/pages/not_html": "answers that were not HTML (not parsed)",
    "catalog/links/known": "links not built again because the spider handed them over before "
    "(`CATALOG_KNOWN_LINKS`)",
    "catalog/links/offsite": "links to another site than the seed's, dropped",
    # the frontier (scheduler side)
    "frontier/enqueued": "requests this node pushed that the frontier accepted as new",
    "frontier/filtered": "requests the shared dupefilter dropped as already seen",
    "frontier/filtered_locally": "requests dropped by the node itself: it had already sent the "
    "same fingerprint",
    "frontier/parked": "retries parked in Redis until their backoff is over",
    "frontier/acked": "leases acknowledged (the request is finished for good)",
    "frontier/acks/stale": "acks or dead letters for leases this node no longer held (it was "
    "presumed dead): fenced off, they changed nothing",
    "frontier/priority_inversions": "leases of lower priority than the best request still "
    "queued in another shard read in the same round trip",
    "frontier/leased": "requests leased to this node",
    "frontier/started": "leased requests handed to Scrapy's engine",
    "frontier/starved": "times the engine asked for a request while the node had none prefetched",
    "frontier/roundtrips": "round trips to Redis (one pipelined flush each)",
    "frontier/dead_lettered": "requests this node sent to the dead letters",
    "frontier/requeued_dead_letters": "dead letters an operator re-queued, seen by this node",
    "frontier/unqueueable": "requests refused when queued (meta or `cb_kwargs` that are not "
    "JSON values, an unknown callback)",
    "frontier/refused/<reason>": "queue entries refused when leased (not JSON, a pickle, an "
    "unsafe meta key, ...), by reason",
    "frontier/seeds/accepted": "seeds taken into the frontier",
    "frontier/seeds/refused/<reason>": "seeds refused (bad scheme, private address, bad JSON, "
    "...), by reason",
    "frontier/reclaimed": "leases of an earlier run of this node id taken back at start",
    "frontier/returned": "unfinished leases returned to the queue at a clean stop",
    "frontier/recovered": "requests this node returned to the queue from dead nodes",
    "frontier/presumed_dead": "times this node learnt it had been presumed dead and its leases "
    "recovered",
    "frontier/redis_rewinds": "times this node found that Redis had lost its last writes",
    "frontier/leases/lost": "leases Redis no longer knew (after a rewind), dropped",
    "frontier/redis_errors": "failed round trips to Redis (outages included)",
    "frontier/site_cuts/<cause>": "cuts of a site's shared rate this node made, by cause "
    "(`throttled`: 429 or 503, `slow`: over `DISTCRAWL_SITE_LATENCY_TARGET`)",
    "frontier/site_recoveries": "sites seen back at their full shared rate",
    "frontier/woken": "times an idle node was woken by the wake channel",
    # Scrapy's and scrapy-redis' names, kept
    "scheduler/enqueued": "as in Scrapy: requests queued",
    "scheduler/enqueued/redis": "as in scrapy-redis: requests queued in Redis",
    "scheduler/dequeued": "as in Scrapy: requests taken from the scheduler",
    "scheduler/dequeued/redis": "as in scrapy-redis: requests taken from Redis",
    "dupefilter/filtered": "as in Scrapy: requests dropped as already seen",
    "item_scraped_count": "as in Scrapy; counts products only (revisit items are counted apart)",
    # retries
    "retry/delayed_ms": "milliseconds of backoff the node's retries waited, summed",
    "retry/retry_after_honoured": "retries that waited as a `Retry-After` header asked",
    # revisit mode
    "revisit/scheduled": "pages scheduled for a revisit",
    "revisit/first": "pages scheduled after their first visit",
    "revisit/changed": "revisits that found the page changed",
    "revisit/unchanged": "revisits that found the page unchanged (a 304 or the same body)",
    "revisit/gone": "revisits answered 404 or 410",
    "revisit/conditional": "revisits sent with `If-None-Match` / `If-Modified-Since`",
    "revisit/not_modified": "revisits answered 304 Not Modified",
    "revisit/unlisted": "products a revisited listing no longer links",
    "revisit/unschedulable": "pages that could not be scheduled again (their state did not fit)",
    "revisit_scraped_count": "revisit items (a 304 or a gone page turned into an update)",
    "freshness/not_modified": "304 answers turned into a `last_seen` update",
    "freshness/gone": "product pages answering a gone status, marked `gone_at`",
    "freshness/unlisted": "products stored as gone because they left every listing",
    # the MongoDB pipeline
    "pipeline/written": "products written to MongoDB",
    "pipeline/inserted": "new products inserted",
    "pipeline/updated": "known products updated",
    "pipeline/batches": "bulk writes",
    "pipeline/retries": "bulk writes retried after a failure",
    "pipeline/changes": "changes of price, currency or availability logged",
    "pipeline/not_modified": "products seen again by a 304",
    "pipeline/gone": "products marked gone",
    "pipeline/revisit_unknown": "revisits of a page whose product is not stored",
    "pipeline/journaled": "products written to the local journal during an outage",
    "pipeline/replayed": "products replayed from a journal into MongoDB",
    "pipeline/journal_damaged": "damaged journal records skipped at replay",
    "pipeline/journal_held": "products left in the journal when the node closed",
    "pipeline/dropped/<reason>": "items dropped, by reason (no URL, no name, refused by MongoDB: "
    "`rejected`)",
    # safety
    "safety/refused/<reason>": "requests refused before download (private address, too large, "
    "redirect loop, page budget, ...), by reason",
    "safety/unresolved": "host names that did not resolve",
    "safety/page_budget_unavailable": "pages let through while the page budget in Redis could "
    "not be read",
    "robotstxt/shared": "robots.txt answers taken from Redis instead of fetched",
    "gc/frozen_objects": "objects moved out of the garbage collector's way at start "
    "(`DISTCRAWL_GC_FREEZE`)",
}
