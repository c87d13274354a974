"""A node's settings at start: the environment rule applied to a project of one's own, unknown
``DISTCRAWL_*`` names reported with the nearest setting name, every registered value checked."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from distcrawl.base.config import SETTINGS, SettingError, Unknown
from distcrawl.base.config.registry import source
from distcrawl.base.identifiers import crawl_name_problem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["SettingsCheck", "apply_environment", "problems", "unknown_names"]

logger = logging.getLogger(__name__)

#: Scrapy's priority of a project's settings module
_PROJECT = 20


def apply_environment(
    settings: BaseSettings, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The environment rule for a project whose settings module is not distcrawl's: each
    registered setting's environment variable supplies it at ``project`` priority (over that
    module, under ``-s`` and a spider's ``custom_settings``). Returns the names it set."""
    environ = os.environ if environ is None else environ
    done = []
    for name, text in SETTINGS.environment(environ).items():
        if (settings.getpriority(name) or 0) <= _PROJECT:
            settings.set(name, text, priority="project")
            done.append(name)
    return done


def unknown_names(settings: Any, environ: Mapping[str, str] | None = None) -> list[Unknown]:
    """The ``DISTCRAWL_*`` names in the environment and in *settings* that are no setting."""
    environ = os.environ if environ is None else environ
    found = SETTINGS.unknown(environ, "environment")
    for item in SETTINGS.unknown(settings, "settings"):
        found.append(item._replace(where=source(settings, item.name)))
    return found


def problems(settings: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per registered setting whose value cannot be used."""
    return SETTINGS.problems(settings, os.environ if environ is None else environ)


class SettingsCheck:
    """Scrapy add-on (``ADDONS``): at start, one WARNING line per unknown ``DISTCRAWL_*`` name
    (with the nearest setting name), and a :class:`SettingError` naming every value that
    cannot be used, before any component is built."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def __repr__(self) -> str:
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def update_settings(self, settings: BaseSettings) -> None:
        check(settings, spidercls=getattr(self.crawler, "spidercls", None))


def check(settings: BaseSettings, *, spidercls: type | None = None) -> None:
    """Report unknown names; raise SettingError when a registered value cannot be used, or
    when *spidercls*' name cannot name a crawl."""
    for item in unknown_names(settings):
        logger.warning(item.message())
    bad = problems(settings)
    for line in bad:
        logger.error("Bad setting: %s", line)
    name = getattr(spidercls, "name", None)
    if isinstance(name, str) and (problem := crawl_name_problem(name)):
        logger.error("Bad crawl name: %s", problem)
        bad.append(problem)
    if bad:
        raise SettingError("; ".join(bad))
