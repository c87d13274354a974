"""The embedded-services add-on: a node without ``REDIS_URL`` / ``MONGO_URI`` starts (or reuses)
the machine's embedded Redis and MongoDB (:mod:`distcrawl.servers.embedded`), says so among
its first log lines, and stops the servers a node started when it exits, unless other local
nodes still use them."""

from __future__ import annotations

import atexit
import logging
from typing import TYPE_CHECKING, Self

from distcrawl.base.config import SETTINGS
from distcrawl.base.urls import mask_url
from distcrawl.servers.embedded import join_service, leave_services, resolve_home

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["EmbeddedServices"]

logger = logging.getLogger(__name__)

#: homes whose servers this process uses: it leaves them when it exits
_JOINED: set[str] = set()


def _leave_all() -> None:
    for home in sorted(_JOINED):
        try:
            stopped = leave_services(resolve_home(home))
        except Exception as exc:  # the process is exiting: say so, never raise
            logger.warning("Could not leave the embedded servers under %s: %s", home, exc)
            continue
        if stopped:
            logger.info(
                "Stopped the embedded %s under %s: no other local node uses them",
                " and ".join(stopped),
                home,
            )
    _JOINED.clear()


class EmbeddedServices:
    """Scrapy add-on (``ADDONS``) that points a node at the embedded servers when no external
    ones are configured, and logs one line saying which Redis and MongoDB the node uses.

    Settings read (in ``update_settings``, before any component is built):

    - ``REDIS_URL``: when empty, set to the embedded Redis (:func:`join_service`).
    - ``MONGO_URI``: when empty, set to the embedded MongoDB (:func:`join_service`).
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
        missing = []
        for setting, name, label in (
            ("REDIS_URL", "redis", "Redis"),
            ("MONGO_URI", "mongo", "MongoDB"),
        ):
            url = settings.get(setting) or ""
            origin = "external"
            if not url and allowed:
                url, started = join_service(name, home)
                if not _JOINED:
                    atexit.register(_leave_all)
                _JOINED.add(str(home))
                # The project's settings.py may hold an empty value at "project" priority,
                # which an "addon"-priority set() would silently leave in place.
                priority = max(settings.getpriority(setting) or 0, 15)
                settings.set(setting, url, priority=priority)
                missing.append(setting)
                how = "started by this node" if started else "already running"
                origin = f"embedded, {how}, home {home}"
            elif not url:
                origin = "not configured"
            described.append(f"{label} {mask_url(url) or '-'} ({origin})")
        text = "Node uses %s and %s"
        if missing:
            # a node whose REDIS_URL was lost in deployment would crawl alone: loud, early
            text += (
                f"; no {' or '.join(missing)} given, and embedded servers serve the nodes of "
                "this machine only: set REDIS_URL and MONGO_URI to crawl as a cluster. "
                "Servers a node started stop when the last local node using them exits"
            )
        logger.log(
            logging.WARNING if missing else logging.INFO,
            text,
            *described,
            extra={"crawler": self.crawler} if self.crawler else None,
        )
