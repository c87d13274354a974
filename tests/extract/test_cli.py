"""distcrawl extract: URLs and files in one call, JSON lines, readable output, exit status."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from distcrawl.cli import main
from distcrawl.demo.shop import DemoShop

CORPUS = Path(__file__).parent / "corpus"
DEMO_PLAIN = Path(__file__).parents[2] / "distcrawl" / "demo" / "profiles" / "demo-plain.toml"


def test_urls_and_files_in_one_call(
    shop_factory: Callable[..., DemoShop], capsys: pytest.CaptureFixture[str]
) -> None:
    shop = shop_factory(products=12, variant="plain")
    item = next(iter(shop.catalog.products()))
    product_url = shop.url.rstrip("/") + item.path
    inputs = [
        product_url + "?utm_source=mail",
        shop.url,
        str(CORPUS / "jsonld_plain.html"),
        (CORPUS / "category.html").as_uri(),
    ]
    status = main(["extract", "--json", "--profile", str(DEMO_PLAIN), *inputs])
    assert status == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["input"] for r in records] == inputs
    product, home, saved, category = records
    assert product["kind"] == "product"
    assert product["url"] == product_url
    assert product["profile"] == "demo-plain"
    assert (product["name"], product["sku"]) == (item.name, item.sku)
    assert (product["price"], product["currency"]) == (item.price, item.currency)
    assert product["availability"] == item.availability
    assert product["sources"]["price"] == "profile"
    assert home["kind"] == "category"
    assert len(home["links"]["category"]) == len(shop.catalog.tops)
    # a saved page is read as if fetched from its rel=canonical URL
    assert saved["url"] == "https://shop.example.com/p/trail-runner-2.html"
    assert saved["price"] == "89.95"
    assert category["kind"] == "category"
    assert category["name"] is None


def test_unreadable_inputs_give_status_1_and_the_rest_still_runs(
    shop_factory: Callable[..., DemoShop], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shop = shop_factory(products=3)
    inputs = [shop.url + "no/such/page", str(tmp_path / "missing.html"), shop.url]
    assert main(["extract", "--json", *inputs]) == 1
    missing_page, missing_file, home = (
        json.loads(line) for line in capsys.readouterr().out.splitlines()
    )
    assert missing_page["kind"] is None and "404" in missing_page["errors"][0]
    assert missing_file["kind"] is None and "cannot read" in missing_file["errors"][0]
    assert home["kind"] == "category"


def test_readable_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["extract", str(CORPUS / "jsonld_product_group.html"), str(CORPUS / "listing.html")])
        == 0
    )
    out = capsys.readouterr().out
    assert "kind product" in out and "Merino Crew Sweater" in out and "json-ld" in out
    assert "MCS-NAVY-S" in out
    assert "kind listing" in out and "product links: 3" in out


def test_base_url_and_cut_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    page = str(CORPUS / "heuristics_plain.html")
    args = ["extract", "--json", "--base-url", "https://hoses.example/g", "--max-bytes", "600"]
    assert main([*args, page]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["fetched_url"] == "https://hoses.example/g"
    assert record["errors"][0] == "body cut to 600 bytes"


def test_bad_profile_is_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[site]\ndomains = 'x'\n")
    assert main(["extract", "--profile", str(bad), str(CORPUS / "category.html")]) == 2
    assert "bad.toml: site.domains" in capsys.readouterr().err


def test_explain_names_the_source_and_the_selector_or_text_of_each_field(
    shop_factory: Callable[..., DemoShop], capsys: pytest.CaptureFixture[str]
) -> None:
    dlist = shop_factory(products=8, variant="dlist")
    plain = shop_factory(products=8, variant="plain")
    jsonld = shop_factory(products=8)
    item = dlist.catalog.products()[0]
    inputs = [s.url.rstrip("/") + item.path for s in (dlist, plain, jsonld)]
    assert main(["extract", "--json", "--explain", inputs[0], inputs[2]]) == 0
    assert main(["extract", "--json", "--explain", "--profile", str(DEMO_PLAIN), inputs[1]]) == 0
    generic, structured, profiled = (
        json.loads(line) for line in capsys.readouterr().out.splitlines()
    )
    assert generic["explain"]["sku"] == {
        "source": "label",
        "detail": f"dt/dd 'Product code': '{item.sku}'",
    }
    assert generic["explain"]["name"]["source"] == "heuristic"
    assert "h1" in generic["explain"]["name"]["detail"]
    assert generic["explain"]["price"]["source"] == "heuristic"
    assert item.price.split(".")[0] in generic["explain"]["price"]["detail"]
    assert structured["explain"]["price"] == {
        "source": "structured data",
        "detail": "json-ld (the page's own product)",
    }
    assert profiled["explain"]["price"] == {
        "source": "profile",
        "detail": "div.pdp-cost::attr(data-amount)",
    }
    # without --explain the record keeps its old shape
    assert main(["extract", "--json", inputs[0]]) == 0
    assert "explain" not in json.loads(capsys.readouterr().out)
    # the readable output shows the same, one column more
    assert main(["extract", "--explain", inputs[0]]) == 0
    assert "Product code" in capsys.readouterr().out


def test_gzip_files_are_read_and_other_archives_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bz2
    import gzip

    page = (CORPUS / "jsonld_plain.html").read_bytes()
    zipped = tmp_path / "page.html.gz"
    zipped.write_bytes(gzip.compress(page))
    (tmp_path / "page.html.bz2").write_bytes(bz2.compress(page))
    (tmp_path / "broken.html.gz").write_bytes(gzip.compress(page)[:40])
    inputs = [str(zipped), str(tmp_path / "page.html.bz2"), str(tmp_path / "broken.html.gz")]
    assert main(["extract", "--json", str(CORPUS / "jsonld_plain.html"), *inputs]) == 1
    plain, unzipped, bzipped, broken = (
        json.loads(line) for line in capsys.readouterr().out.splitlines()
    )
    # the gzip file's page is the page
    assert unzipped["kind"] == plain["kind"] == "product"
    assert (unzipped["name"], unzipped["price"]) == (plain["name"], plain["price"])
    assert bzipped["kind"] is None
    assert bzipped["errors"] == [f"cannot read {inputs[1]}: a bzip2 file, not a page "
                                 "(decompress it first)"]  # fmt: skip
    assert broken["kind"] is None and "a damaged gzip file" in broken["errors"][0]
