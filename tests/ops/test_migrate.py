"""Migration logic: what a scrapy-redis queue entry becomes in the frontier, and which entries
are refused (pickles unless trusted, and anything a node would refuse), with their reason."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import scrapy

from distcrawl.node.requests import codec
from distcrawl.ops.migrate import MigrationRefused, entry_request, load_entry


def test_pickled_entries_are_refused_unless_trusted() -> None:
    request = scrapy.Request("http://shop.test/p/1.html", meta={"rule": 0}, priority=3)
    raw = pickle.dumps({**request.to_dict(), "callback": "_callback"}, protocol=-1)
    with pytest.raises(MigrationRefused) as exc:
        load_entry(raw, trust_pickle=False)
    assert exc.value.reason == "pickle_refused"
    back, payload = entry_request(load_entry(raw, trust_pickle=True))
    assert (back.url, back.priority) == (request.url, 3)
    assert json.loads(payload)["cb"] == "@rule"


class _Marker:
    def __reduce__(self) -> Any:  # what a hostile pickle would run
        return (os.system, ("touch /tmp/distcrawl-migrate-never-created",))


def test_even_a_trusted_pickle_loads_no_class_or_function() -> None:
    raw = pickle.dumps({"url": "http://shop.test/", "meta": {"x": _Marker()}})
    with pytest.raises(MigrationRefused) as exc:
        load_entry(raw, trust_pickle=True)
    assert exc.value.reason == "bad_pickle"
    assert not Path("/tmp/distcrawl-migrate-never-created").exists()
    form = scrapy.FormRequest("http://shop.test/s", formdata={"q": "a"}).to_dict()
    raw = pickle.dumps(form, protocol=-1)  # names its class only as a string
    back, _ = entry_request(load_entry(raw, trust_pickle=True))
    assert type(back) is scrapy.FormRequest and back.body == b"q=a"


def test_entries_a_node_would_refuse_are_refused_with_their_reason() -> None:
    cases = [
        ({"url": "http://shop.test/", "callback": "_secret"}, "private_callback"),
        ({"url": "http://shop.test/", "_class": "os.system"}, "unknown_request_class"),
        ({"url": "http://shop.test/", "meta": {"when": {1, 2}}}, "unqueueable"),
        ({"url": "file:///etc/passwd"}, None),
    ]
    for data, reason in cases:
        with pytest.raises(MigrationRefused) as exc:
            entry_request(data)
        if reason:
            assert exc.value.reason == reason, (data, exc.value)
    assert codec.decode(entry_request({"url": "http://shop.test/a"})[1]).url.endswith("/a")
    # meta a node sets from its own settings (a proxy) never travels, as in the codec
    _, payload = entry_request({"url": "http://shop.test/", "meta": {"proxy": "http://evil/"}})
    assert "proxy" not in payload
