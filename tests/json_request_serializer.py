"""A JSON ``SCHEDULER_SERIALIZER`` for scrapy-redis (``request.to_dict()`` with its bytes as
latin-1 text), the shape of the JSON serializers scrapy-redis projects write: the stock
``json`` module cannot write a request's bytes."""

from __future__ import annotations

import json
from typing import Any

_BYTES = ("body",)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return value


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(_text(obj))


def loads(text: str | bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    data["headers"] = {
        k.encode("latin-1"): [v.encode("latin-1") for v in vs]
        for k, vs in data.get("headers", {}).items()
    }
    data["body"] = data.get("body", "").encode("latin-1")
    return data
