"""The scheduler's gate: which leased request may start, and what becomes of one that may not
(its robots.txt, a hold, its site's share of the node's slots, a leased request older than its
site's Crawl-delay, a request held after its lease spent its site's rate token), with a real
Scrapy crawler's politeness and no network."""

from __future__ import annotations

import asyncio
import ipaddress
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from distcrawl.base.names import reasons
from distcrawl.node.politeness import Politeness
from distcrawl.node.politeness.robots import RobotsState, SiteRobots
from distcrawl.node.scheduler.gate import Gate
from distcrawl.node.scheduler.ready import ReadyQueue

CONCURRENCY = 16


class Harness:
    """A gate over a ready queue, with what it gave back and dead-lettered."""

    def __init__(self, *, robots: bool = False, concurrency: int = CONCURRENCY) -> None:
        crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": robots})
        crawler.stats = MemoryStatsCollector(crawler)
        self.politeness = Politeness(crawler)
        self.ready = ReadyQueue()
        self.given_back: list[Request] = []
        self.dead: list[tuple[Request, str]] = []
        self.fetched: list[str] = []
        self.answered = asyncio.Event()
        #: hosts whose robots.txt fetch waits for its own event (the others: ``answered``)
        self.answers: dict[str, asyncio.Event] = {}
        self.gate = Gate(
            politeness=self.politeness,
            ready=self.ready,
            concurrency=concurrency,
            give_back=self.given_back.append,
            dead_letter=lambda request, reason: self.dead.append((request, reason)),
            wake_engine=lambda: None,
        )
        if robots:
            self.politeness.robots_parser = self._fetch

    async def _fetch(self, request: Request) -> None:
        """As the robots.txt middleware's: robots.txt is being fetched until the test reads
        it (``self.answered``)."""
        self.fetched.append(request.url)
        host = request.url.split("/")[2]
        self.politeness.robots.fetching(host, host)
        await self.answers.get(host, self.answered).wait()

    def lease(self, *urls: str, paced: bool = False) -> list[Request]:
        """Leased requests; ``paced``: each lease spent its site's rate token."""
        requests = [Request(url) for url in urls]
        for request in requests:
            if paced:
                self.ready.paced(request)
            else:
                self.ready.append(request)
        return requests

    def start_all(self) -> list[Request]:
        started = []
        while (request := self.gate.next()) is not None:
            started.append(request)
        return started


def sites(requests: list[Request]) -> list[str]:
    return [r.url.split("/")[2] for r in requests]


def test_a_site_alone_that_flows_takes_every_slot() -> None:
    h = Harness()
    first = h.lease("http://a.test/0")
    assert h.start_all() == first
    h.gate.done(first[0])  # it flows: a request of it just finished
    h.lease(*(f"http://a.test/{i}" for i in range(1, 30)))
    assert len(h.start_all()) == 29  # no one else waits: all of them (the engine caps at 16)


def test_a_site_that_never_finishes_keeps_at_most_a_quarter_of_the_slots_alone() -> None:
    h = Harness()
    h.lease(*(f"http://hang.test/{i}" for i in range(30)))
    assert len(h.start_all()) == CONCURRENCY // 4
    assert h.ready.held == 30 - CONCURRENCY // 4


def test_a_hanging_site_beside_a_shop_keeps_half_its_share_and_the_shop_takes_the_rest() -> None:
    h = Harness()
    h.lease(*(f"http://hang.test/{i}" for i in range(30)))
    h.lease(*(f"http://shop.test/{i}" for i in range(30)))
    started = h.start_all()
    hanging = sites(started).count("hang.test")
    assert hanging == CONCURRENCY // 4  # half of its share of two sites
    # the shop flows once its requests finish: it takes every slot nobody else wants
    for request in [r for r in started if "shop.test" in r.url]:
        h.gate.done(request)
    more = h.start_all()
    assert "hang.test" not in sites(more) and len(more) >= 30 - CONCURRENCY // 2


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["lease-hang", "lease-shop", "finish-shop", "next"]), st.integers(1, 5)
        ),
        max_size=60,
    )
)
@settings(max_examples=60, deadline=None)
def test_whatever_the_schedule_a_site_that_never_finishes_keeps_its_bound(
    steps: list[tuple[str, int]],
) -> None:
    """Random interleavings of leases, finished requests and the engine asking: a site whose
    requests never finish never holds more than a quarter of the node's slots."""
    h = Harness()
    running: list[Request] = []
    n = 0
    for step, count in steps:
        if step == "lease-hang":
            h.lease(*(f"http://hang.test/{n + i}" for i in range(count)))
        elif step == "lease-shop":
            h.lease(*(f"http://shop.test/{n + i}" for i in range(count)))
        elif step == "finish-shop":
            for request in [r for r in running if "shop.test" in r.url][:count]:
                running.remove(request)
                h.gate.done(request)
        else:
            for _ in range(count):
                request = h.gate.next()
                if request is not None:
                    running.append(request)
        n += count
        assert sites(running).count("hang.test") <= CONCURRENCY // 4
        # the gate keeps the site of each request waiting for a slot, and of no other
        assert len(h.gate._queued_sites) == h.gate.queued_total == sum(h.gate.queued.values())
        for request in running:
            assert h.gate.site_of(request) == request.url.split("/")[2]


def test_the_site_of_a_request_is_its_urls_host_started_or_not() -> None:
    """The scheduler's signal handlers take a started request's site from the gate (read
    once); any other request's is read from its URL, as before."""
    h = Harness()
    started = h.lease("http://A.test:8080/1", "http://b.test/2?x=1")
    assert h.start_all() == started
    other = Request("http://c.test/")
    assert [h.gate.site_of(r) for r in [*started, other]] == ["a.test", "b.test", "c.test"]
    assert h.gate.site_of(Request("data:,x")) == ""
    h.gate.done(started[0])
    assert h.gate.site_of(started[0]) == "a.test"  # from its URL again
    assert not h.gate._queued_sites


def test_the_server_a_site_answered_from_is_noted_once_as_a_string() -> None:
    """With server budgets off, the address of a site's first answer is noted for the status
    (written as a string only then)."""
    h = Harness()
    servers = h.politeness.servers
    assert not servers.enabled
    servers.answered_from("a.test", ipaddress.ip_address("127.0.0.2"))
    servers.answered_from("a.test", ipaddress.ip_address("127.0.0.3"))
    servers.answered_from("b.test", ipaddress.ip_address("::1"))
    assert servers._to_note == [("a.test", "127.0.0.2"), ("b.test", "::1")]


def test_robots_txt_is_fetched_once_and_the_sites_requests_wait_for_it() -> None:
    async def run() -> None:
        h = Harness(robots=True)
        h.lease("http://a.test/1", "http://a.test/2", "http://b.test/1")
        assert h.start_all() == []
        await asyncio.sleep(0)
        assert sorted(h.fetched) == ["http://a.test/1", "http://b.test/1"]
        rules = h.politeness.robots
        await rules.read("a.test", "a.test", None, status=200)
        h.answered.set()
        await asyncio.sleep(0.01)
        assert sites(h.start_all()) == ["a.test", "a.test"]
        assert h.ready.held == 1  # b.test's robots.txt is not read yet
        assert len(h.fetched) == 2

    asyncio.run(run())


def test_unreadable_given_up_and_set_aside_sites_go_back_or_to_the_dead_letters() -> None:
    h = Harness(robots=True)
    rules = h.politeness.robots
    rules._sites["failed.test"] = SiteRobots(
        "failed.test", RobotsState.FAILED, retry_at=time.monotonic() + 60
    )
    rules._sites["gone.test"] = SiteRobots(
        "gone.test", RobotsState.GIVEN_UP, retry_at=time.monotonic() + 60
    )
    rules._sites["slow.test"] = SiteRobots("slow.test", RobotsState.READ, set_aside=True)
    failed, gone, slow = h.lease("http://failed.test/", "http://gone.test/", "http://slow.test/")
    assert h.start_all() == []
    assert h.given_back == [failed]
    assert h.dead == [(gone, reasons.ROBOTS_UNAVAILABLE), (slow, reasons.CRAWL_DELAY_OVER_MAX)]


def test_a_request_leased_before_the_frontier_had_the_crawl_delay_goes_back() -> None:
    h = Harness(robots=True)
    rules = h.politeness.robots
    h.ready.round_started = time.monotonic()
    old = h.lease("http://d.test/old")[0]
    rules._sites["d.test"] = SiteRobots(
        "d.test", RobotsState.READ, delay=2.0, delay_known=time.monotonic()
    )
    h.ready.round_started = time.monotonic() + 0.001
    new = h.lease("http://d.test/new")[0]
    assert h.start_all() == [new]
    assert h.given_back == [old]


def test_a_hold_this_node_met_holds_the_sites_requests_until_it_ends() -> None:
    async def run() -> None:
        h = Harness()
        assert h.politeness.retry_after("a.test", 0.2) == 200
        h.lease("http://a.test/1", "http://b.test/1")
        assert sites(h.start_all()) == ["b.test"]
        await asyncio.sleep(0.3)
        assert sites(h.start_all()) == ["a.test"]

    asyncio.run(run())


def test_retry_after_zero_holds_nothing_and_days_are_capped() -> None:
    async def run() -> None:
        h = Harness()
        assert h.politeness.retry_after("a.test", 0) == 0
        assert h.politeness.held_for("a.test") == 0
        capped = h.politeness.retry_after("b.test", 3 * 86400)
        assert capped == int(h.politeness.retry_after_max * 1000)
        assert h.politeness.stats.get_value("retry/retry_after_capped") == 1

    asyncio.run(run())


def test_a_request_held_after_its_lease_spent_its_token_takes_a_new_one() -> None:
    """The requests a node leased while their site's robots.txt was read went out together
    once it was in, each on the token its lease spent: the site saw a burst. Now a request
    held after its token takes a new one before it is sent (passed False); one leased once
    robots.txt is in, and one of a site without a rate (no token), go on their lease."""

    async def run() -> None:
        h = Harness(robots=True)
        held = h.lease("http://a.test/1", "http://a.test/2", paced=True)
        free = h.lease("http://b.test/1")
        assert h.start_all() == []
        await asyncio.sleep(0)  # the fetches start
        for host in ("a.test", "b.test"):
            await h.politeness.robots.read(host, host, None, status=200)
        h.answered.set()
        await asyncio.sleep(0.01)
        later = h.lease("http://a.test/3", paced=True)
        started = h.start_all()
        assert sorted(r.url for r in started) == sorted(r.url for r in held + free + later)
        assert [h.politeness.passed[r] for r in held + free + later] == [
            False,
            False,
            True,
            True,
        ]
        assert h.politeness.stats.get_value("frontier/tokens_taken_again") == 2

    asyncio.run(run())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["lease", "lease-paced", "robots", "finish"]),
            st.sampled_from(["a.test", "b.test", "hang.test"]),
            st.integers(1, 6),
        ),
        max_size=40,
    )
)
@settings(max_examples=80, deadline=None)
def test_whatever_the_schedule_no_request_goes_out_on_a_token_it_spent_before_a_wait(
    steps: list[tuple[str, str, int]],
) -> None:
    """Random interleavings of leases (paced: their lease spent a rate token), robots.txt
    answers and finished requests, the engine taking every request the gate lets start after
    each step: a request that waited after its lease spent its token never goes out on it (it
    takes a new one), and one without a token never needs one."""

    async def run() -> None:
        h = Harness(robots=True, concurrency=4)
        for host in ("a.test", "b.test", "hang.test"):
            h.answers[host] = asyncio.Event()
        leased_in: dict[Request, tuple[int, bool]] = {}
        running: list[Request] = []
        n = 0
        for number, (step, site, count) in enumerate(steps):
            if step.startswith("lease"):
                paced = step == "lease-paced"
                for request in h.lease(
                    *(f"http://{site}/{n + i}" for i in range(count)), paced=paced
                ):
                    leased_in[request] = (number, paced)
                n += count
            elif step == "robots":
                if h.politeness.robots.get(site) is None or site in h.gate._fetching:
                    await h.politeness.robots.read(site, site, None, status=200)
                    h.answers[site].set()
            elif site != "hang.test":  # its requests never finish
                for request in [r for r in running if site in r.url][:count]:
                    running.remove(request)
                    h.gate.done(request)
            for _ in range(3):
                await asyncio.sleep(0)
            for request in h.start_all():
                running.append(request)
                at, paced = leased_in[request]
                on_lease_token = h.politeness.passed[request]
                if not paced:
                    assert on_lease_token, request  # no token spent, none to take
                elif at != number:
                    assert not on_lease_token, (request, at, number)  # it waited: a new one
            # requests held for robots.txt are not waiting for a slot: no site kept for them
            assert len(h.gate._queued_sites) == h.gate.queued_total

    asyncio.run(run())
