"""Callbacks and errbacks by name: which spider methods a queued request may name, the name a
request's callback is written as, and the method a name is read back as."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from scrapy import Spider as _ScrapySpider

from distcrawl.base.names import reasons
from distcrawl.node.requests import callbacks
from distcrawl.node.requests.payload import BadEntry, expect

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = ["SPIDER_HOOKS", "callback_name", "spider_method"]

#: spider methods distcrawl itself calls that are not callbacks (Scrapy's own hooks are
#: recognised by their class)
SPIDER_HOOKS = frozenset({"make_request_from_seed"})


@functools.lru_cache(maxsize=256)
def _queueable(spider_class: type, name: str) -> Any:
    """The function ``name`` of ``spider_class`` if a queued request may call it, else None.

    Only plain functions defined by the spider's own classes count: Scrapy's ``Spider`` hooks
    (``close``, ``start``, ``from_crawler``, ...), class and static methods and properties are
    not callbacks, whatever a queue entry says.
    """
    if not name.isidentifier() or name.startswith("_") or name in SPIDER_HOOKS:
        return None
    for cls in spider_class.__mro__:
        if cls in _ScrapySpider.__mro__:
            continue
        attr = cls.__dict__.get(name)
        if attr is not None:
            return attr if inspect.isfunction(attr) else None
    return None


#: what :func:`_positional` answers for a function Scrapy cannot call with a response
_NOT_CALLABLE = frozenset({"\0"})


@functools.lru_cache(maxsize=256)
def _positional(func: Any) -> frozenset[str] | None:
    """The parameters Scrapy fills when it calls ``func(self, response)``; None if the
    signature cannot be read, :data:`_NOT_CALLABLE` if the call would fail."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        return frozenset(signature.bind(None, None).arguments)
    except TypeError:
        return _NOT_CALLABLE


@functools.lru_cache(maxsize=256)
def _takes_response(func: Any) -> bool:
    """Whether ``func`` takes ``self`` and a response positionally. Which cb_kwargs it takes
    is not checked: a middleware may add some after the request was queued, and a call that
    does not bind fails as it does on Scrapy, with the spider's TypeError."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    kinds = [p.kind for p in parameters]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Parameter.VAR_POSITIONAL in kinds or sum(k in positional for k in kinds) >= 2


def callback_name(spider: Spider | None, func: Any, role: str, meta: dict[str, Any]) -> str | None:
    if func is None:
        return None
    rule = callbacks.rule_reference(spider, func, role, meta)
    if rule is not None:
        return rule
    if isinstance(func, str):
        return func
    name = getattr(func, "__name__", None)
    if spider is not None and name and getattr(spider, name, None) == func:
        if _queueable(type(spider), name) is None:  # type: ignore[arg-type]  # classes hash
            raise ValueError(f"{name!r} is not a callback a queued request may name")
        return str(name)
    raise ValueError(f"callback {func!r} is not a method of the spider; it cannot be queued")


#: the refusals of a callback (errback) that is no public method name, or one the spider has not
_BAD = {"callback": reasons.BAD_CALLBACK, "errback": reasons.BAD_ERRBACK}
_UNKNOWN = {"callback": reasons.UNKNOWN_CALLBACK, "errback": reasons.UNKNOWN_ERRBACK}


def spider_method(
    spider: Spider | None, name: Any, what: str, kwargs: dict[str, Any], meta: dict[str, Any]
) -> Any:
    if name is None:
        return None
    if name == callbacks.RULE_REFERENCE:
        try:
            return callbacks.resolve_rule(spider, what, meta)
        except callbacks.BadRule as exc:
            raise BadEntry(reasons.BAD_RULE, str(exc)) from None
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise BadEntry(_BAD[what], repr(name)[:80])
    if spider is None:
        return None
    func = _queueable(type(spider), name)  # type: ignore[arg-type]  # classes hash
    if func is None:
        raise BadEntry(_UNKNOWN[what], name)
    positional = _positional(func)
    if positional is not None:
        # Scrapy calls it as (self, response or failure, **cb_kwargs): a method that takes
        # no response is no callback, and cb_kwargs naming the response could never bind
        if positional is _NOT_CALLABLE:
            expect(_takes_response(func), _BAD[what], name)
            return getattr(spider, name)
        if kwargs and not positional.isdisjoint(kwargs):
            clash = positional.intersection(kwargs)
            raise BadEntry(reasons.BAD_CB_KWARGS, ",".join(sorted(clash)))
    return getattr(spider, name)
