"""The extraction corpus: every way of publishing product data, and its expected product."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from distcrawl.extract import analyze
from distcrawl.extract.cli import json_ready

CORPUS = Path(__file__).parent / "corpus"
REPO = Path(__file__).parents[2]
CASES = sorted(p.name.removesuffix(".expected.json") for p in CORPUS.glob("*.expected.json"))


def _expected(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / f"{case}.expected.json").read_text("utf-8"))
    return data


def test_corpus_covers_every_case_the_issue_names() -> None:
    needed = {
        "jsonld_plain", "jsonld_graph", "jsonld_product_group", "jsonld_offers_list",
        "jsonld_aggregate_offer", "microdata", "rdfa", "opengraph", "itemprop_plain",
        "script_embedded", "heuristics_plain", "missing_price", "sale_price_jsonld",
        "sale_price_markup", "out_of_stock_text", "out_of_stock_german", "broken_jsonld",
        "listing", "category",
    }  # fmt: skip
    assert needed <= set(CASES)
    assert all((CORPUS / f"{case}.html").is_file() for case in CASES)


@pytest.mark.parametrize("case", CASES)
def test_analyze_gives_the_expected_page(case: str) -> None:
    expected = _expected(case)
    body = (CORPUS / f"{case}.html").read_bytes()
    analysis = analyze(url=expected["url"], body=body, encoding=None, profile=None)
    assert analysis.kind == expected["kind"]
    assert analysis.canonical_url == expected["canonical_url"]
    assert json_ready(analysis.product) == expected["product"]
    assert analysis.sources == expected["sources"]
    assert analysis.links == expected["links"]
    assert [e.split(":")[0] for e in analysis.errors] == expected["errors"]
    if analysis.product is not None:
        for name in ("price", "list_price"):
            assert analysis.product[name] is None or isinstance(analysis.product[name], Decimal)


def test_extract_command_on_the_whole_corpus_in_one_call() -> None:
    files = [str(CORPUS / f"{case}.html") for case in CASES]
    done = subprocess.run(
        [sys.executable, "-m", "distcrawl.cli", "extract", "--json", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["input"] for r in records] == files
    for case, record in zip(CASES, records, strict=True):
        expected = _expected(case)
        assert record["kind"] == expected["kind"], case
        assert set(record["links"]) == {"category", "listing", "product", "next"}
        product = expected["product"]
        if product is None:
            assert record["name"] is None, case
            continue
        # A saved file's links resolve against its rel=canonical or its file:// URL, so
        # URL-valued fields are compared by count; everything else exactly.
        for name, value in product.items():
            if name == "url":
                continue
            if name == "image_urls":
                assert len(record[name]) == len(value), case
            else:
                assert record[name] == value, (case, name)
