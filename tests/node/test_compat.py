"""scrapy-redis settings on the frontier, the add-on, and scrapy-redis seeds (real Redis)."""

from __future__ import annotations

import json
import logging
from importlib import import_module

import pytest
import redis
import scrapy
from scrapy.settings import Settings
from scrapy_redis.spiders import RedisSpider

from distcrawl import Frontier
from distcrawl.node import compat
from distcrawl.node.seeds.parse import BadSeed
from distcrawl.node.seeds.sources import SeedSource, seed_requests


def _project(**values: object) -> Settings:
    settings = Settings()
    settings.setdict(values, priority="project")
    return settings


@pytest.mark.parametrize(
    ("values", "url"),
    [
        ({"REDIS_URL": "redis://h:1/2", "REDIS_HOST": "ignored"}, "redis://h:1/2"),
        ({"REDIS_HOST": "10.0.0.5", "REDIS_PORT": 6380}, "redis://10.0.0.5:6380/0"),
        ({"REDIS_PORT": "7000", "REDIS_DB": 3}, "redis://127.0.0.1:7000/3"),
        (
            {"REDIS_PARAMS": {"host": "r", "password": "p@ss", "db": 1, "ssl": True}},
            "rediss://:p%40ss@r:6379/1",
        ),
        ({}, None),
    ],
)
def test_connection_settings_become_the_frontier_url(values: dict, url: str | None) -> None:
    assert compat.redis_url_from_settings(_project(**values))[0] == url


def test_the_add_on_switches_a_scrapy_redis_project() -> None:
    settings = _project(
        SCHEDULER="scrapy_redis.scheduler.Scheduler",
        DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter",
        SCHEDULER_PERSIST=False,
        SCHEDULER_QUEUE_CLASS="scrapy_redis.queue.PriorityQueue",
        REDIS_HOST="127.0.0.1",
        REDIS_PORT=6390,
        REDIS_PARAMS={"socket_keepalive": True},
        MAX_IDLE_TIME_BEFORE_CLOSE=7,
        REDIS_START_URLS_BATCH_SIZE=5,
    )
    Frontier().update_settings(settings)
    assert settings["SCHEDULER"] == "distcrawl.node.scheduler.FrontierScheduler"
    assert settings["REDIS_URL"] == "redis://127.0.0.1:6390/0"
    middlewares = settings["DOWNLOADER_MIDDLEWARES"]
    assert middlewares["scrapy.downloadermiddlewares.retry.RetryMiddleware"] is None
    assert middlewares["distcrawl.node.middlewares.retry.BackoffRetryMiddleware"] == 550
    assert "distcrawl.node.heap.FreezeStartupObjects" in settings["EXTENSIONS"]
    # every failure grouped, each try (after the retry middleware); the crawl's end reported
    assert middlewares["distcrawl.node.observe.capture.FailureCapture"] == 560
    assert "distcrawl.ops.finish.CrawlEnd" in settings["EXTENSIONS"]
    assert settings.getbool("DISTCRAWL_CLOSE_WHEN_DRAINED")
    assert settings.getfloat("DISTCRAWL_DRAIN_GRACE") == 7
    assert settings.getint("DISTCRAWL_SEED_BATCH") == 5
    assert not settings.getbool("DISTCRAWL_RECORD_DONT_FILTER", True)
    fingerprinter = "distcrawl.node.compat.ScrapyRedisFingerprinter"
    assert settings["REQUEST_FINGERPRINTER_CLASS"] == fingerprinter
    ignored = dict(compat.ignored_settings(settings))
    assert set(ignored) == {
        "SCHEDULER_PERSIST",
        "SCHEDULER_QUEUE_CLASS",
        "DUPEFILTER_CLASS",
        "REDIS_PARAMS['socket_keepalive']",
    }
    assert all(ignored.values())  # each with its reason


def test_the_command_line_still_wins_over_the_add_on() -> None:
    settings = _project(SCHEDULER="scrapy_redis.scheduler.Scheduler")
    settings.set("SCHEDULER", "my.Scheduler", priority="cmdline")
    Frontier().update_settings(settings)
    assert settings["SCHEDULER"] == "my.Scheduler"


def test_the_report_names_each_ignored_setting_once(caplog: pytest.LogCaptureFixture) -> None:
    settings = _project(SCHEDULER_SERIALIZER="scrapy_redis.picklecompat", JOBDIR="/tmp/x")
    settings.set("SCHEDULER_PERSIST", True, priority="project")  # harmless: always persists
    with caplog.at_level(logging.INFO, logger="distcrawl.node.compat"):
        compat.report_settings(settings)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert any("SCHEDULER_SERIALIZER" in m and "never pickled" in m for m in warned)
    assert any("JOBDIR" in m for m in warned)


def test_scrapy_redis_fingerprints_are_the_dupefilters_own() -> None:
    from scrapy_redis.dupefilter import RFPDupeFilter

    request = scrapy.FormRequest("http://shop.test/s?b=2&a=1", formdata={"q": "x"})
    theirs = RFPDupeFilter.request_fingerprint(None, request)  # type: ignore[arg-type]
    assert compat.scrapy_redis_fingerprint(request) == theirs
    assert compat.ScrapyRedisFingerprinter().fingerprint(request).hex() == theirs


class _Seeded(RedisSpider):
    name = "seeded"
    redis_key = "%(name)s:seeds"


def _spider() -> _Seeded:
    spider = _Seeded()
    spider.redis_encoding = "utf-8"
    return spider


def test_scrapy_redis_seed_format() -> None:
    spider = _spider()
    (get,) = seed_requests(spider, b"http://shop.test/a", allow_private=False)
    assert (get.url, get.dont_filter) == ("http://shop.test/a", True)
    raw = json.dumps(
        {"url": "http://shop.test/s", "method": "post", "meta": {"job": 1}, "q": "toys"}
    )
    (post,) = seed_requests(spider, raw)
    assert type(post) is scrapy.FormRequest
    assert (post.method, post.body, post.meta["job"]) == ("POST", b"q=toys", 1)
    for bad, reason in [
        ('{"url": "http://shop.test/", "meta": {"proxy": "http://x/"}}', "reserved_meta"),
        ('{"url": "http://shop.test/", "method": "TRACE"}', "bad_method"),
        ('{"url": "http://shop.test/", "q": 5}', "bad_form_field"),
        ('{"meta": {}}', "missing_url"),
        ("http://127.0.0.1/", "private_address"),
        ("[1]", "not_an_object"),
    ]:
        with pytest.raises(BadSeed) as exc:
            seed_requests(spider, bad)
        if reason != "private_address":
            assert exc.value.reason == reason, bad


def test_seed_source_names_and_stages_losslessly(redis_url: str) -> None:
    spider = _spider()
    r = redis.Redis.from_url(redis_url)
    listed = SeedSource.for_spider(spider, Settings(), "seeded:start_urls")
    assert (listed.key, listed.kind, listed.list_key) == ("seeded:seeds", "list", "seeded:seeds")
    as_set = SeedSource.for_spider(spider, Settings({"REDIS_START_URLS_AS_SET": True}), "")
    r.sadd("seeded:seeds", *[f"http://shop.test/{i}" for i in range(5)])
    assert as_set.stage(r, 3) == 3
    assert (r.scard("seeded:seeds"), r.llen(as_set.list_key)) == (2, 3)
    assert as_set.stage(r, 10) == 2
    assert len(set(r.lrange(as_set.list_key, 0, -1))) == 5
    r.delete(as_set.list_key)
    as_zset = SeedSource.for_spider(spider, Settings({"REDIS_START_URLS_AS_ZSET": True}), "")
    r.delete("seeded:seeds")
    r.zadd("seeded:seeds", {"low": 1, "high": 9, "mid": 5})
    assert as_zset.stage(r, 2) == 2
    assert r.zrange("seeded:seeds", 0, -1) == [b"low"]
    # the frontier takes from the right: highest score first
    assert [r.rpop(as_zset.list_key), r.rpop(as_zset.list_key)] == [b"high", b"mid"]


def test_commands_name_the_seed_list_as_the_nodes_do() -> None:
    from distcrawl.ops.context import crawl_keys

    settings = Settings({"SPIDER_MODULES": ["probe_spiders.redis_examples"]})
    assert crawl_keys(settings, "myspider_redis").start_urls == "myspider:start_urls"
    assert crawl_keys(settings, "example_crawl").start_urls == "example_crawl:start_urls"
    assert crawl_keys(settings, "no_such_spider").start_urls == "no_such_spider:start_urls"
    settings.set("REDIS_START_URLS_AS_SET", True)
    # staged beside the set, in its slot
    assert crawl_keys(settings, "myspider_redis").start_urls == "{myspider:start_urls}:staged"


def test_operator_commands_keep_a_foreign_projects_own_settings(tmp_path, monkeypatch) -> None:
    """``distcrawl status`` and friends in a scrapy-redis project: the project's REDIS_URL and
    keys win over distcrawl's defaults, which fill in only what the project leaves unset."""
    from distcrawl.ops.context import load_settings

    (tmp_path / "foreign_settings.py").write_text(
        'REDIS_URL = "redis://project.test:6390/3"\n'
        'SCHEDULER = "scrapy_redis.scheduler.Scheduler"\n'
        "DISTCRAWL_SHARDS = 4\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no scrapy.cfg here
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "foreign_settings")
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DISTCRAWL_SHARDS", raising=False)
    monkeypatch.setenv("DISTCRAWL_SITE_RATE", "2.5")
    settings = load_settings(["DISTCRAWL_DRAIN_GRACE=7"])
    assert settings["REDIS_URL"] == "redis://project.test:6390/3"
    assert settings["SCHEDULER"] == "scrapy_redis.scheduler.Scheduler"
    assert settings.getint("DISTCRAWL_SHARDS") == 4
    assert settings.getfloat("DISTCRAWL_DRAIN_GRACE") == 7.0  # -s still wins
    # what the project does not set comes from distcrawl's settings
    assert (
        settings.getfloat("DISTCRAWL_FLUSH_DELAY")
        == import_module("distcrawl.settings").DISTCRAWL_FLUSH_DELAY
    )
    # and the environment supplies a setting of its name, as on a node
    assert settings["DISTCRAWL_SITE_RATE"] == "2.5"
