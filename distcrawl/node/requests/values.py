"""The values a request's meta and cb_kwargs may carry through the frontier: JSON values, and
items of allowed classes, written as their fields and rebuilt as their class."""

from __future__ import annotations

import math
from typing import Any

from itemadapter import ItemAdapter

from distcrawl.base.names import reasons
from distcrawl.node.requests import classes
from distcrawl.node.requests.payload import BadEntry, expect

__all__ = ["json_safe", "json_values", "with_items"]

_MAX_DEPTH = 20


#: types whose values always survive a JSON round trip (checked first: most values are one)
_PLAIN = frozenset({str, int, bool, type(None)})


def json_safe(value: Any, _depth: int = 0) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged (so meta keys can be kept)."""
    if _depth > _MAX_DEPTH:
        return False
    cls = type(value)
    if cls in _PLAIN:
        return True
    # (loops, not generators: a plain value inside needs no call)
    if cls is dict:
        if _depth == _MAX_DEPTH:
            return not value  # what is inside would be too deep
        for k, v in value.items():
            if not isinstance(k, str) or (type(v) not in _PLAIN and not json_safe(v, _depth + 1)):
                return False
        return True
    if cls is list:
        if _depth == _MAX_DEPTH:
            return not value
        for v in value:  # noqa: SIM110  # (all() of a generator costs a frame per call)
            if type(v) not in _PLAIN and not json_safe(v, _depth + 1):
                return False
        return True
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(json_safe(v, _depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_safe(v, _depth + 1) for k, v in value.items())
    return False


def json_values(
    what: str,
    values: dict[str, Any],
    *,
    strict: bool,
    skip: frozenset[str] = frozenset(),
    items: dict[str, str] | None = None,
    short: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The entries of ``values`` JSON can carry, an item of an allowed class as its fields
    (its class name goes into ``items``, by key); with ``strict``, any other raises ValueError
    naming its key (``skip``: keys left out whatever they hold). A key that is no str is one
    JSON cannot carry (it would come back a str). With ``short``, keys are written by their
    short names (:data:`~.payload.META_SHORT_NAMES`: one of the values' own that starts with
    "~" gets one more)."""
    out = {}
    for key, value in values.items():
        if key in skip:
            continue
        if type(value) not in _PLAIN or type(key) is not str:
            try:
                value = _carried(what, key, value, items)
            except ValueError:
                if strict:
                    raise
                continue
        if short is not None:
            key = short.get(key) or ("~" + key if key[:1] == "~" else key)
        out[key] = value
    return out


def _carried(what: str, key: Any, value: Any, items: dict[str, str] | None) -> Any:
    """What JSON carries of a value that is not plain: itself, or an item's fields (its
    class name into ``items``); ValueError naming the key if it cannot."""
    if not isinstance(key, str):
        raise ValueError(f"{what} key {key!r} is a {type(key).__name__}, not a str")
    if json_safe(value):
        return value
    if items is not None and _is_item(value):
        fields = _item_fields(what, key, value)
        items[key] = classes.item_class_name(value)
        return fields
    raise ValueError(
        f"{what} key {key!r} holds a {type(value).__name__}, which a queued request "
        "cannot carry (only JSON values: str, int, float, bool, None, lists, dicts, "
        "and items of the classes in DISTCRAWL_ITEM_CLASSES)"
    )


def _is_item(value: Any) -> bool:
    return not isinstance(value, dict) and ItemAdapter.is_item(value)


def _item_fields(what: str, key: str, item: Any) -> dict[str, Any]:
    """An item's fields as they are (an item inside one is not made a dict behind the
    spider's back: JSON cannot carry it, and the request is refused naming the key)."""
    fields = dict(ItemAdapter(item).items())
    if not json_safe(fields):
        bad = next(k for k, v in fields.items() if not json_safe(v))
        raise ValueError(
            f"{what} key {key!r} holds a {type(item).__name__} whose field {bad!r} holds a "
            f"{type(fields[bad]).__name__}, which a queued request cannot carry"
        )
    return fields


def with_items(
    named: Any, meta: dict[str, Any], cb_kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``meta`` and ``cb_kwargs`` with the items ``named`` (``{"mt"|"kw": {key: class}}``)
    rebuilt as their allowed classes from the fields the entry holds at those keys."""
    expect(
        isinstance(named, dict) and bool(named) and set(named) <= {"mt", "kw"}, reasons.BAD_ITEMS
    )
    out = {"mt": dict(meta), "kw": dict(cb_kwargs)}
    for where, keys in named.items():
        expect(isinstance(keys, dict) and bool(keys), reasons.BAD_ITEMS)
        for key, name in keys.items():
            expect(isinstance(name, str) and key in out[where], reasons.BAD_ITEMS, str(key)[:40])
            cls = classes.item_class(name)
            expect(cls is not None, reasons.UNKNOWN_ITEM_CLASS, name[:80])
            assert cls is not None
            fields = out[where][key]
            expect(isinstance(fields, dict), reasons.BAD_ITEMS, str(key)[:40])
            try:
                out[where][key] = cls(**fields)
            except Exception as exc:  # hostile fields: whatever the class' __init__ raises
                raise BadEntry(reasons.BAD_ITEM, f"{name}: {exc}"[:120]) from None
    return out["mt"], out["kw"]
