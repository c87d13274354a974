"""URL canonicalisation: one page, one URL; idempotent and never raising."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcrawl.extract import canonicalize_url
from distcrawl.extract.canonical import same_site


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Shop.Example.COM:80/a?b=2&a=1#top", "http://shop.example.com/a?a=1&b=2"),
        ("https://shop.example.com:443", "https://shop.example.com/"),
        ("http://127.0.0.1:8080/p/1-x.html?utm_source=listing&ref=card3",
         "http://127.0.0.1:8080/p/1-x.html"),
        ("https://s.example/p?id=5&fbclid=abc&gclid=x&UTM_Medium=y&_ga=1", "https://s.example/p?id=5"),
        ("http://127.0.0.1:8080/c/top/leaf/?page=1", "http://127.0.0.1:8080/c/top/leaf/"),
        ("http://127.0.0.1:8080/c/top/leaf/?page=2", "http://127.0.0.1:8080/c/top/leaf/?page=2"),
        ("https://s.example/l?sort=price&page=1", "https://s.example/l?sort=price"),
        ("https://s.example/a b/ü", "https://s.example/a%20b/%C3%BC"),
        ("  https://s.example/x  ", "https://s.example/x"),
        ("https://s.example:8443/x", "https://s.example:8443/x"),
    ],
)  # fmt: skip
def test_canonical_forms(url: str, canonical: str) -> None:
    assert canonicalize_url(url) == canonical


def test_tracking_list_is_configurable() -> None:
    url = "https://s.example/p?sessionid=1&color=red&ref=x"
    assert (
        canonicalize_url(url, tracking_params={"color"}) == "https://s.example/p?ref=x&sessionid=1"
    )


def test_unparseable_urls_come_back_as_keys() -> None:
    assert canonicalize_url(" http://[::1 ") == "http://[::1"
    assert canonicalize_url("not a url") == "not%20a%20url"


def test_same_site_ignores_www_scheme_and_port() -> None:
    assert same_site("http://www.shop.example/a", "https://shop.example:8443/b")
    assert not same_site("http://shop.example/a", "http://other.example/a")
    assert not same_site("file:///tmp/a.html", "file:///tmp/b.html")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_canonicalised_idempotently(text: str) -> None:
    once = canonicalize_url(text)
    assert canonicalize_url(once) == once


_url_part = st.text(alphabet="abcXYZ019-._~%/?&=#:@ü ", max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["http", "https", "HTTP"]),
    st.sampled_from(["shop.example", "Shop.Example:80", "127.0.0.1:8080", "xn--bcher-kva.example"]),
    _url_part,
    st.lists(st.tuples(st.sampled_from(["utm_source", "ref", "page", "q", "id"]), _url_part)),
)
def test_urls_are_canonicalised_idempotently_without_tracking(
    scheme: str, host: str, path: str, params: list[tuple[str, str]]
) -> None:
    query = "&".join(f"{k}={v}" for k, v in params)
    once = canonicalize_url(f"{scheme}://{host}/{path}?{query}")
    assert canonicalize_url(once) == once
    assert "utm_source=" not in once.partition("?")[2].partition("#")[0] or "?" in path
    assert "#" not in once


def test_every_alias_of_a_product_url_has_one_canonical_form() -> None:
    aliases = [
        "http://shop.test/p/4-oak-table.html",
        "http://shop.test/p/4-oak-table.html?utm_source=newsletter&utm_medium=email",
        "http://shop.test/p/4-oak-table.html?ref=card2&gclid=abc",
        "http://shop.test/p/4-oak-table.html?page=1",
        "http://shop.test/p/4-oak-table.html#reviews",
        "http://SHOP.Test/p/4-oak-table.html",
        "HTTP://Shop.test:80/p/4-oak-table.html?fbclid=x#top",
    ]
    assert {canonicalize_url(url) for url in aliases} == {"http://shop.test/p/4-oak-table.html"}
    assert canonicalize_url("http://shop.test") == canonicalize_url("http://shop.test/")
