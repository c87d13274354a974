"""The words of what goes wrong and who is told: the kinds of error groups, the events a notice
is sent for, and the baselines a finding compares with."""

from __future__ import annotations

from distcrawl.base.names.terms import term

__all__ = ["BASELINE", "BASELINES", "ERROR_GROUP_KIND", "GROUP_KINDS", "NOTICE", "NOTICES"]

ERROR_GROUP_KIND = "error group kind"
NOTICE = "notice"
BASELINE = "finding baseline"

DOWNLOAD = term(
    ERROR_GROUP_KIND,
    "download",
    "a download failed (an exception: refused connection, timeout, DNS), every try counted",
)
HTTP = term(ERROR_GROUP_KIND, "http", "an answer with an HTTP status of 400 or more, every try")
CALLBACK = term(ERROR_GROUP_KIND, "callback", "a spider callback raised an exception")
PIPELINE = term(
    ERROR_GROUP_KIND, "pipeline", "an item pipeline raised an exception or dropped an item"
)
EXTRACTION = term(
    ERROR_GROUP_KIND,
    "extraction",
    "a product page gave no product, or a product without one of DISTCRAWL_EXPECTED_FIELDS",
)
REFUSED = term(
    ERROR_GROUP_KIND,
    "refused",
    "a request refused before its download (robots.txt, a private address, a page budget, ...)",
)
#: every kind of error group, in the order the status and /metrics list them
GROUP_KINDS = (DOWNLOAD, HTTP, CALLBACK, PIPELINE, EXTRACTION, REFUSED)

CRAWL_FINISHED = term(
    NOTICE,
    "crawl_finished",
    "the last node of a drained crawl closed: the notice carries the crawl report's summary",
)
FINDING = term(
    NOTICE,
    "finding",
    "a field's share on a site's last products fell beyond DISTCRAWL_QUALITY_DROP",
)
NODE_DEAD = term(
    NOTICE, "node_dead", "a node went silent past the heartbeat timeout; its leases were returned"
)
SITE_CUT = term(
    NOTICE, "site_cut", "a site's shared rate was cut from its full rate (429, 503, slow answers)"
)
SITE_SET_ASIDE = term(
    NOTICE,
    "site_set_aside",
    "a site was set aside, none of its work leased (reserved: nothing sets a site aside yet)",
)
FRONTIER_OUTAGE = term(
    NOTICE, "frontier_outage", "a node found Redis away (out of reach, out of memory, read-only)"
)
#: every event a notice is sent for
NOTICES = (CRAWL_FINISHED, FINDING, NODE_DEAD, SITE_CUT, SITE_SET_ASIDE, FRONTIER_OUTAGE)

LAST_CRAWL = term(
    BASELINE, "last_crawl", "the field's share on the site's products of its last completed crawl"
)
EARLIER = term(
    BASELINE,
    "earlier",
    "the field's share on the site's products of this crawl before its last window (a site's "
    "first crawl)",
)
#: what a finding compares a site's last products with, the first that applies
BASELINES = (LAST_CRAWL, EARLIER)
