"""Rule callbacks: how a ``CrawlSpider``'s requests name their rule in a queue entry.

``CrawlSpider`` sends every link a rule follows to its private dispatchers ``_callback`` and
``_errback``, which look the rule up by ``meta["rule"]`` (its index in ``spider._rules``).
The codec never lets a queue entry name a private method; instead such a request is written
with the reference :data:`RULE_REFERENCE` (not an identifier, so it never names a method) and
read back as the dispatcher, once ``meta["rule"]`` is checked to be one of the spider's rules.
The rule's own callback, ``cb_kwargs``, ``errback`` and ``process_request`` then apply as
they do on plain Scrapy (``process_request`` ran before the request was queued).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.spiders import CrawlSpider

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["RULE_REFERENCE", "BadRule", "resolve_rule", "rule_reference"]

#: what a queue entry holds as callback or errback of a request a crawl rule made
RULE_REFERENCE = "@rule"
#: the CrawlSpider dispatcher behind each role
_DISPATCHERS = {"callback": "_callback", "errback": "_errback"}


class BadRule(ValueError):
    """A rule reference that names no rule of the spider."""


def _rule_index(spider: CrawlSpider, meta: dict[str, Any]) -> int:
    index = meta.get("rule")
    rules = getattr(spider, "_rules", None) or ()
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(rules):
        raise BadRule(f"meta 'rule' is {index!r}, not one of the spider's {len(rules)} rules")
    return index


def rule_reference(spider: Spider | None, func: Any, role: str, meta: dict[str, Any]) -> str | None:
    """:data:`RULE_REFERENCE` if ``func`` is ``spider``'s rule dispatcher for ``role``
    (``"callback"`` or ``"errback"``), else None. Raises :class:`BadRule` if it is but the
    request's ``meta["rule"]`` names no rule."""
    if not isinstance(spider, CrawlSpider) or func is None or isinstance(func, str):
        return None
    if func != getattr(spider, _DISPATCHERS[role]):
        return None
    _rule_index(spider, meta)
    return RULE_REFERENCE


def resolve_rule(spider: Spider | None, role: str, meta: dict[str, Any]) -> Any:
    """The rule dispatcher of ``spider`` for ``role`` (None without a spider); raises
    :class:`BadRule` if the spider has no rules or ``meta["rule"]`` names none of them."""
    if spider is None:
        return None
    if not isinstance(spider, CrawlSpider):
        raise BadRule(f"{type(spider).__name__} is not a CrawlSpider; it has no rules")
    _rule_index(spider, meta)
    return getattr(spider, _DISPATCHERS[role])
