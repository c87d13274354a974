"""The embedded-services add-on: a node without ``REDIS_URL`` / ``MONGO_URI`` starts (or reuses)
the machine's embedded Redis and MongoDB (:mod:`distcrawl.servers.embedded`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Self

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.servers.embedded import ensure_mongo, ensure_redis, resolve_home

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["EmbeddedServices"]

logger = logging.getLogger(__name__)


class EmbeddedServices:
    """Scrapy add-on (``ADDONS``) that points a node at the embedded servers when no external
    ones are configured, and logs one line saying which Redis and MongoDB the node uses.

    Settings read (in ``update_settings``, before any component is built):

    - ``REDIS_URL``: when empty, set to the embedded Redis (:func:`ensure_redis`).
    - ``MONGO_URI``: when empty, set to the embedded MongoDB (:func:`ensure_mongo`).
    - ``DISTCRAWL_HOME``: home of the embedded servers (else ``$DISTCRAWL_HOME``, else
      ``./.distcrawl``).
    - ``DISTCRAWL_EMBEDDED`` (default ``True``): ``False`` never starts a server; an empty URL
      then stays empty and the component that needs it fails loudly.
    """

    def __init__(self, *, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler=crawler)

    def __repr__(self) -> str:
        # Scrapy logs its enabled add-ons by repr: the class path, not an object address
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def update_settings(self, settings: BaseSettings) -> None:
        allowed = SETTINGS.value(settings, "DISTCRAWL_EMBEDDED")
        home = resolve_home(SETTINGS.value(settings, "DISTCRAWL_HOME") or None)
        described = []
        for setting, label, ensure in (
            ("REDIS_URL", "Redis", ensure_redis),
            ("MONGO_URI", "MongoDB", ensure_mongo),
        ):
            url = settings.get(setting) or ""
            origin = "external"
            if not url and allowed:
                url = ensure(home)
                # The project's settings.py may hold an empty value at "project" priority,
                # which an "addon"-priority set() would silently leave in place.
                priority = max(settings.getpriority(setting) or 0, 15)
                settings.set(setting, url, priority=priority)
                origin = f"embedded, home {home}"
            elif not url:
                origin = "not configured"
            described.append(f"{label} {mask_url(url) or '-'} ({origin})")
        logger.info(
            "Node uses %s and %s",
            *described,
            extra={"crawler": self.crawler} if self.crawler else None,
        )


# --------------------------------------------------------------------------- CLI
