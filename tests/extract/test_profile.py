"""Site profiles: loading with clear errors, matching by host, overriding field by field."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from distcrawl.extract import ProfileError, SiteProfile, analyze, load_profiles

REPO = Path(__file__).parents[2]
DEMO_PLAIN = REPO / "distcrawl" / "demo" / "profiles" / "demo-plain.toml"
EXAMPLE = REPO / "distcrawl" / "profiles" / "example.toml"
CORPUS = Path(__file__).parent / "corpus"
#: the smallest valid profile, to which a bad-profile case adds its mistake
SITE = '[site]\ndomains = ["a.example"]\n'


def _write(tmp_path: Path, text: str, name: str = "shop.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_profiles_load() -> None:
    demo, example = load_profiles([DEMO_PLAIN, EXAMPLE])
    assert demo.name == "demo-plain"
    assert demo.domains == ("127.0.0.1", "localhost")
    assert demo.politeness == {"rate": 50.0, "concurrency": 8}
    assert set(example.fields) == {
        "name", "price", "list_price", "currency", "availability", "sku", "gtin", "brand",
        "category_path", "description", "image_urls",
    }  # fmt: skip
    assert example.politeness == {"rate": 2.0, "concurrency": 2, "delay": 0.5}


def test_a_directory_loads_every_toml_in_name_order(tmp_path: Path) -> None:
    _write(tmp_path, '[site]\ndomains = ["b.example"]\n', "b.toml")
    _write(tmp_path, SITE, "a.toml")
    _write(tmp_path, "not a profile", "notes.txt")
    assert [p.name for p in load_profiles([tmp_path])] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[site\n", "invalid TOML"),
        (SITE + '[feilds]\nname = "h1"\n', "unknown section [feilds]"),
        (SITE + '[fields]\nnmae = "h1"\n', "unknown key fields.nmae"),
        (SITE + 'rate = 1\n', "unknown key site.rate"),
        ("[site]\nname = 'x'\n", "site.domains"),
        (SITE + '[fields]\nname = "h1[["\n', "fields.name: invalid selector"),
        (SITE + '[links]\nnext = "xpath://a[@"\n', "links.next: invalid"),
        (SITE + '[fields]\nsku = {selector = "b", pattern = "("}\n',
         "fields.sku.pattern"),
        (SITE + '[fields]\nsku = {selector = "b", regex = "x"}\n',
         "fields.sku: unknown key 'regex'"),
        (SITE + '[fields]\nsku = {pattern = "x"}\n', "needs a 'selector'"),
        (SITE + '[kinds]\nproduct = 5\n', "kinds.product: must be"),
        (SITE + 'currency = "euro"\n', "site.currency"),
        (SITE + '[politeness]\nrate = 0\n', "politeness.rate"),
        (SITE + '[politeness]\nconcurrency = 1.5\n', "whole number"),
    ],
)  # fmt: skip
def test_bad_profiles_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError) as raised:
        load_profiles([path])
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no such profile"):
        load_profiles([tmp_path / "missing.toml"])


def test_match_by_host_subdomain_and_port(tmp_path: Path) -> None:
    general = _write(tmp_path, '[site]\nname = "general"\ndomains = ["example.com"]\n', "g.toml")
    shop = _write(tmp_path, '[site]\nname = "shop"\ndomains = ["shop.example.com"]\n', "s.toml")
    port = _write(tmp_path, '[site]\nname = "port"\ndomains = ["127.0.0.1:8081"]\n', "p.toml")
    profiles = load_profiles([general, shop, port])

    def name(url: str) -> str | None:
        found = SiteProfile.match(profiles, url)
        return found.name if found else None

    assert name("https://www.example.com/") == "general"
    assert name("https://shop.example.com/p/1") == "shop"
    assert name("https://eu.shop.example.com/p/1") == "shop"
    assert name("https://notexample.com/") is None
    assert name("http://127.0.0.1:8081/") == "port"
    assert name("http://127.0.0.1:8080/") is None
    assert name("not a url") is None


def test_demo_plain_profile_reads_the_demo_page() -> None:
    (profile,) = load_profiles([DEMO_PLAIN])
    url = "http://127.0.0.1:8081/p/16-smoky-device-16.html"
    body = (CORPUS / "demo_plain_product.html").read_bytes()
    analysis = analyze(url=url, body=body, profile=SiteProfile.match([profile], url))
    assert analysis.kind == "product"
    product = analysis.product
    assert product is not None
    assert product["name"] == "Smoky Device 16"
    assert product["price"] == Decimal("595.83")
    assert product["currency"] == "EUR"
    assert product["sku"] == "DC-000016"
    assert product["availability"] == "OutOfStock"
    assert product["category_path"] == ["Books", "Atlases"]
    assert product["image_urls"] == [
        "http://127.0.0.1:8081/img/16-1.jpg",
        "http://127.0.0.1:8081/img/16-2.jpg",
    ]
    assert {analysis.sources[f] for f in ("name", "price", "sku", "category_path")} == {"profile"}


def test_profile_overrides_structured_data_field_by_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[site]
domains = ["shop.example.com"]
[fields]
name = "h1::text"
price = "p.price::text"
brand = "div.nothing-here::text"
""",
    )
    body = (CORPUS / "jsonld_plain.html").read_bytes()
    analysis = analyze(
        url="https://shop.example.com/p/trail-runner-2.html",
        body=body,
        profile=load_profiles([path])[0],
    )
    assert analysis.product is not None
    assert analysis.sources["name"] == "profile"
    assert analysis.sources["price"] == "profile"
    assert analysis.product["price"] == Decimal("89.95")
    assert analysis.product["currency"] == "USD"  # the "$" of the profile's price text
    # a selector that matches nothing leaves the field to structured data
    assert analysis.product["brand"] == "Stride"
    assert analysis.sources["brand"] == "json-ld"


def test_profile_kinds_links_patterns_and_xpath(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        r"""
[site]
domains = ["odd.example"]
currency = "SEK"
strip_params = ["sid"]
[links]
product = "xpath://div[@data-kind='item']/span[@data-go]/@data-go"
next = "span.more a"
[kinds]
listing = "div.grid"
[fields]
name = "xpath://div[@id='title']"
price = "b.amount::text"
sku = { selector = "p.meta::text", pattern = 'Code\s+(\w+)' }
category_path = { selector = "p.path span::text", skip = 2 }
""",
    )
    (profile,) = load_profiles([path])
    listing = b"""<html><body><div class="grid">
      <div data-kind="item"><span data-go="/i/1?sid=9">One</span></div>
      <div data-kind="item"><span data-go="/i/2">Two</span></div></div>
      <span class="more"><a href="/list?page=2&sid=3">more</a></span></body></html>"""
    analysis = analyze(url="https://odd.example/list", body=listing, profile=profile)
    assert analysis.kind == "listing"
    assert analysis.links["product"] == ["https://odd.example/i/1", "https://odd.example/i/2"]
    assert analysis.links["next"] == ["https://odd.example/list?page=2"]

    page = b"""<html><body><div id="title"> Table  <i>lamp</i> </div><b class="amount">349</b>
      <p class="meta">Code ABC123 - in stock</p>
      <p class="path"><span>Start</span><span>Shop</span><span>Lights</span>
      <span>Table lamp</span></p>
      </body></html>"""
    analysis = analyze(url="https://odd.example/i/1", body=page, profile=profile)
    assert analysis.kind == "product"
    assert analysis.product is not None
    assert analysis.product["name"] == "Table lamp"
    assert (analysis.product["price"], analysis.product["currency"]) == (Decimal(349), "SEK")
    assert analysis.product["sku"] == "ABC123"
    # skip = 2 drops "Start" and "Shop"; the trailing crumb equal to the name always goes
    assert analysis.product["category_path"] == ["Lights"]


def test_unrecognised_profile_values_are_reported_not_raised(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        SITE + '[fields]\navailability = "p.s::text"\nprice = "p.p::text"\n',
    )
    body = b'<h1>Lamp</h1><p class="p">call us</p><p class="s">Blue</p>'
    analysis = analyze(url="https://a.example/x", body=body, profile=load_profiles([path])[0])
    assert any("availability: 'Blue' not recognised" in e for e in analysis.errors)
    assert any("price: no price" in e for e in analysis.errors)
