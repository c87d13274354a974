"""Request and item classes a queue entry may name: allow-lists, never an import by name.

A ``FormRequest`` or ``JsonRequest`` travels through the frontier as what it is: the entry
carries the class's dotted name, and a node rebuilds the request as that class only if the
name is in its allow-list (:data:`DEFAULT_REQUEST_CLASSES` plus the operator's
``DISTCRAWL_REQUEST_CLASSES``, read from the node's settings, never from Redis). The class is
built with ``Request``'s own arguments (url, method, headers, body, ...): the body it was
sent with is kept as is. An item in a request's meta or cb_kwargs (a ``scrapy.Item``, a
dataclass, an attrs class: any class ItemAdapter knows) travels as its fields and comes back
as its class if that class is in ``DISTCRAWL_ITEM_CLASSES``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from itemadapter import ItemAdapter
from scrapy import FormRequest, Request
from scrapy.http import JsonRequest, XmlRpcRequest
from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "DEFAULT_REQUEST_CLASSES",
    "allow_item_classes",
    "allow_request_classes",
    "class_name",
    "item_class",
    "item_class_name",
    "request_class",
]

#: Request subclasses every node rebuilds as their class
DEFAULT_REQUEST_CLASSES: tuple[type[Request], ...] = (FormRequest, JsonRequest, XmlRpcRequest)


def _dotted(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_allowed: dict[str, type[Request]] = {_dotted(c): c for c in DEFAULT_REQUEST_CLASSES}


def allow_request_classes(paths: Iterable[str | type]) -> list[str]:
    """Add the operator's classes (dotted paths or classes) to this process's allow-list."""
    added = []
    for path in paths:
        cls = load_object(path) if isinstance(path, str) else path
        if not (isinstance(cls, type) and issubclass(cls, Request)):
            raise ValueError(f"DISTCRAWL_REQUEST_CLASSES: {path!r} is not a Request subclass")
        _allowed[_dotted(cls)] = cls
        added.append(_dotted(cls))
    return added


def class_name(request: Request) -> str | None:
    """The name a queue entry gives ``request``'s class (None for a plain Request); raises
    ValueError for a class not in the allow-list."""
    cls = type(request)
    if cls is Request:
        return None
    name = _dotted(cls)
    if _allowed.get(name) is not cls:
        raise ValueError(
            f"request class {name} is not allowed in the frontier; "
            "add it to DISTCRAWL_REQUEST_CLASSES"
        )
    return name


def request_class(name: str) -> type[Request] | None:
    """The allowed class of that name, or None."""
    return _allowed.get(name)


_items: dict[str, type] = {}


def allow_item_classes(paths: Iterable[str | type]) -> list[str]:
    """Add item classes (dotted paths or classes) to this process's allow-list."""
    added = []
    for path in paths:
        cls = load_object(path) if isinstance(path, str) else path
        if not (isinstance(cls, type) and ItemAdapter.is_item_class(cls)) or issubclass(cls, dict):
            raise ValueError(
                f"DISTCRAWL_ITEM_CLASSES: {path!r} is not an item class (a scrapy.Item, a "
                "dataclass, an attrs class)"
            )
        if not _rebuildable(cls):
            raise ValueError(
                f"DISTCRAWL_ITEM_CLASSES: {path!r} cannot be rebuilt from its fields (a field "
                "its __init__ does not take): it cannot travel through the frontier"
            )
        _items[_dotted(cls)] = cls
        added.append(_dotted(cls))
    return added


def _rebuildable(cls: type) -> bool:
    """Whether ``cls(**fields)`` takes every field ItemAdapter reads from such an item."""
    names = ItemAdapter.get_field_names_from_class(cls)
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return False
    if names is None or any(p.kind is p.VAR_KEYWORD for p in parameters):
        return True
    return set(names) <= {p.name for p in parameters if p.kind is not p.POSITIONAL_ONLY}


def item_class_name(item: object) -> str:
    """The name a queue entry gives ``item``'s class; raises ValueError for a class not in the
    allow-list."""
    cls = type(item)
    name = _dotted(cls)
    if _items.get(name) is not cls:
        raise ValueError(
            f"item class {name} is not allowed in the frontier; add it to DISTCRAWL_ITEM_CLASSES"
        )
    return name


def item_class(name: str) -> type | None:
    """The allowed item class of that name, or None."""
    return _items.get(name)
