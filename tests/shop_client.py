"""Talking to the demo shop over HTTP in tests: a keep-alive client, its links, and a walk of
its pages."""

from __future__ import annotations

import http.client
import json
import re
from collections import deque
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from distcrawl.demo.pages import HOSTILE_LINKS
from distcrawl.demo.shop import DemoShop

HOSTILE_PATHS = {path for path, _ in HOSTILE_LINKS}


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode()


class Client:
    """One keep-alive connection to a shop; never follows redirects."""

    def __init__(self, shop: DemoShop) -> None:
        self.shop = shop
        self.conn = http.client.HTTPConnection("127.0.0.1", shop.port, timeout=10)

    def request(
        self,
        path: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        self.conn.request(method, path, body=body, headers=headers or {})
        raw = self.conn.getresponse()
        data = raw.read()
        return Response(raw.status, {k.lower(): v for k, v in raw.getheaders()}, data)

    def close(self) -> None:
        self.conn.close()


def get(shop: DemoShop, path: str, **kwargs: Any) -> Response:
    client = Client(shop)
    try:
        return client.request(path, **kwargs)
    finally:
        client.close()


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.head_links: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"] or "")
        if tag == "link" and found.get("rel") and found.get("href"):
            self.head_links[found["rel"] or ""] = found["href"] or ""


def links(html: str) -> Links:
    parser = Links()
    parser.feed(html)
    return parser


def canonical(url: str) -> str:
    """What the crawler's canonicalisation must do: drop tracking params and ``page=1``."""
    parts = urlsplit(url)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query)
        if k not in ("utm_source", "ref") and (k, v) != ("page", "1")
    ]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def walk(shop: DemoShop) -> tuple[set[str], dict[str, int]]:
    """Breadth-first over every ``<a href>`` from the home page, hostile pages left out.

    Returns the canonical product URLs found and the status of every page fetched.
    """
    client = Client(shop)
    seen = {shop.url}
    queue = deque([shop.url])
    products: set[str] = set()
    statuses: dict[str, int] = {}
    try:
        while queue:
            url = queue.popleft()
            path = urlsplit(url)
            if path.path.startswith("/p/"):
                products.add(url)
                continue  # a walk of the graph does not need the product pages themselves
            response = client.request(path.path + (f"?{path.query}" if path.query else ""))
            statuses[url] = response.status
            for href in links(response.text).hrefs:
                target = canonical(urljoin(url, href))
                if urlsplit(target).path in HOSTILE_PATHS or target in seen:
                    continue
                seen.add(target)
                queue.append(target)
    finally:
        client.close()
    return products, statuses


def json_ld(html: str) -> list[dict[str, Any]]:
    blocks = re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
    return [json.loads(block) for block in blocks]
