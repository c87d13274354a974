"""Request classes a queue entry may name: a fixed allow-list, never an import by name.

A ``FormRequest`` or ``JsonRequest`` travels through the frontier as what it is: the entry
carries the class's dotted name, and a node rebuilds the request as that class only if the
name is in its allow-list (:data:`DEFAULT_REQUEST_CLASSES` plus the operator's
``DISTCRAWL_REQUEST_CLASSES``, read from the node's settings, never from Redis). The class is
built with ``Request``'s own arguments (url, method, headers, body, ...): the body it was
sent with is kept as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import FormRequest, Request
from scrapy.http import JsonRequest, XmlRpcRequest
from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["DEFAULT_REQUEST_CLASSES", "allow_request_classes", "class_name", "request_class"]

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
