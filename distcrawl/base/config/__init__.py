"""distcrawl's settings: each one defined once, in :mod:`distcrawl.base.config.entries`.

A setting has a name, a kind, a default (or a rule deriving it from other settings), one line
of help, a scope and a visibility. Its scope is ``crawl`` when every node of a crawl must have
the same value (the first node records these in Redis; a node or an operator command that
differs refuses to start, naming both values) and ``node`` when each node may have its own.
Public settings are documented in the settings reference (:meth:`Registry.reference`);
hidden ones are internal constants that tests and benchmarks may still set.

Where a value comes from, highest first:

1. ``-s NAME=VALUE`` on the command line (and scrapyd's ``setting=NAME=VALUE``);
2. a spider's ``custom_settings``;
3. **the environment**: an environment variable with the setting's exact name supplies it,
   at Scrapy's ``project`` priority, as text read exactly as ``-s`` text is read. The rule is
   the same for every registered setting (``DISTCRAWL_*``, ``REDIS_URL``, ``MONGO_URI``, the
   other ``MONGO_*`` and distcrawl's defaults for Scrapy settings, such as ``LOG_LEVEL``).
   distcrawl's ``settings.py`` applies it; in a project of your own, the ``distcrawl.Frontier``
   add-on applies it over that project's settings module;
4. the project's settings module (distcrawl's is made from this registry);
5. the registry's default.

A ``DISTCRAWL_*`` name that is no setting, in the environment or in the settings, is
reported at start with the nearest setting name (one WARNING line each), by a node and by
the operator commands.
"""

from __future__ import annotations

from distcrawl.base.config.entries import PLANTED_BUG, SETTINGS
from distcrawl.base.config.registry import (
    Registry,
    Setting,
    SettingError,
    SettingRecord,
    Unknown,
)

__all__ = [
    "PLANTED_BUG",
    "SETTINGS",
    "Registry",
    "Setting",
    "SettingError",
    "SettingRecord",
    "Unknown",
]
