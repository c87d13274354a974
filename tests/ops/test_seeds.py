"""Seeds from an operator: checked as the nodes check them, pushed in order."""

from __future__ import annotations

import json

from distcrawl.frontier.store import FrontierKeys
from distcrawl.ops import seeds

KEYS = FrontierKeys(spider="catalog", start_urls="catalog:start_urls")


def test_prepare_turns_plain_urls_into_json_seeds_and_keeps_a_json_seeds_own_keys() -> None:
    assert seeds.prepare(" https://s.test/ ", None, None) == "https://s.test/"
    made = json.loads(seeds.prepare("https://s.test/", 5, {"c": 1}))
    assert made == {"url": "https://s.test/", "priority": 5, "meta": {"c": 1}}
    own = json.loads(seeds.prepare('{"url": "https://s.test/", "priority": 7}', 5, None))
    assert own == {"url": "https://s.test/", "priority": 7}
    assert seeds.prepare("{not json", 5, None) == "{not json"


def test_check_names_each_refusal_and_push_keeps_the_order(r) -> None:
    given = ["https://a.test/", "ftp://b.test/", "http://127.0.0.1/", "https://c.test/"]
    checked = seeds.check(((s, s) for s in given), allow=False)
    assert checked.accepted == ["https://a.test/", "https://c.test/"]
    assert [(x["seed"], x["reason"]) for x in checked.refused] == [
        ("ftp://b.test/", "bad_scheme"),
        ("http://127.0.0.1/", "private_address"),
    ]
    assert "DISTCRAWL_ALLOW_PRIVATE" in seeds.refusal_hint("private_address")
    assert seeds.check([("http://127.0.0.1/", "http://127.0.0.1/")], allow=True).refused == []
    assert seeds.push(r, KEYS, checked.accepted) == 2
    assert [r.rpop(KEYS.start_urls), r.rpop(KEYS.start_urls)] == [
        b"https://a.test/",
        b"https://c.test/",
    ]
