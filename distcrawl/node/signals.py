"""distcrawl's own signals, sent through ``crawler.signals`` like Scrapy's."""

from __future__ import annotations

__all__ = [
    "frontier_forgot",
    "frontier_rewound",
    "request_dead_lettered",
    "site_crawl_delay",
    "site_held",
    "site_set_aside",
]

#: sent when a request has failed for the last time and must go to the dead letters;
#: arguments: ``request``, ``reason`` (short text: HTTP status or exception class), and
#: JSON-safe keyword details (``attempts``, ``first_attempt``, ``last_attempt``, ``status``).
#: The frontier writes the dead letter in the same round trip that acknowledges the request.
request_dead_lettered = object()

#: sent (no arguments) when a node finds that Redis came back with older state (its own last
#: writes are gone): whatever a component remembers having pushed may be lost, forget it
frontier_rewound = object()

#: [revisit] sent (no arguments) when a node's memory of the URLs it pushed is wiped because the
#: shared dupefilter forgets them (once a generation, DISTCRAWL_REVISIT): a component that
#: remembers links it handed over forgets them too, so a forgotten URL can be pushed again
frontier_forgot = object()

#: sent when this node holds a site for the whole cluster; arguments: ``site``, ``cause`` (a hold
#: cause: ``robots_unavailable``, ``retry_after``) and ``seconds`` (how long)
site_held = object()

#: sent when this node reads a site's robots.txt Crawl-delay; arguments: ``site``, ``delay``
#: (seconds in force, 0: none), ``source`` (a delay source: ``robots_txt``, ``capped``) and
#: ``set_aside`` (True when the site asks for more than DISTCRAWL_MAX_CRAWL_DELAY and is set
#: aside: its requests become dead letters)
site_crawl_delay = object()

#: sent once when this node sets a site aside: its requests become dead letters from now on;
#: arguments: ``site`` and ``reason`` (a dead-letter reason: ``robots_unavailable``,
#: ``crawl_delay_over_max``)
site_set_aside = object()
