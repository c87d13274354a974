"""bench/extract_split.py: each page's score lands in the half its page id hashes to."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distcrawl.demo import bootstrap, pages
from distcrawl.demo.catalog import Catalog

ROOT = Path(__file__).resolve().parent.parent.parent
SCORE = ROOT.parent / "shared" / "extraction-dev" / "score.py"
BASE = "http://127.0.0.1:8000"

pytestmark = pytest.mark.skipif(not SCORE.exists(), reason="no ../shared/extraction-dev")


def _half(page_id: str) -> str:
    return "a" if int(hashlib.sha256(page_id.encode()).hexdigest(), 16) % 2 == 0 else "b"


def _dataset(folder: Path, products: int) -> dict[str, Any]:
    (folder / "html").mkdir(parents=True)
    shutil.copy(SCORE, folder / "score.py")
    catalog = Catalog(products)
    truth = {}
    for product in catalog.products():
        leaf = catalog.leaf(product.top_slug, product.leaf_slug)
        assert leaf is not None
        html = pages.render_product(product, leaf, base_url=BASE, variant="bootstrap")
        page_id = hashlib.sha256(product.path.encode()).hexdigest()
        (folder / "html" / f"{page_id}.html.gz").write_bytes(gzip.compress(html.encode()))
        truth[page_id] = {
            "price": [product.price],
            "sku": [bootstrap.shop_code(product)],
            "availability": [bootstrap.availability(product)],
        }
    (folder / "ground-truth.json").write_text(json.dumps(truth))
    return truth


def _run(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "extract_split.py"), "--dataset", str(folder),
         "--json"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_each_half_scores_its_own_pages(tmp_path: Path) -> None:
    truth = _dataset(tmp_path, 12)
    out = _run(tmp_path)
    halves = [_half(page_id) for page_id in truth]
    assert (out["a"]["pages"], out["b"]["pages"]) == (halves.count("a"), halves.count("b"))
    assert out["all"] == {"pages": 12, "price": 1.0, "sku": 1.0, "availability": 1.0}
    # a wrong truth value on one page of half a costs half a only
    wrong = next(page_id for page_id in truth if _half(page_id) == "a")
    truth[wrong]["sku"] = ["not-the-code"]
    (tmp_path / "ground-truth.json").write_text(json.dumps(truth))
    out = _run(tmp_path)
    assert out["a"]["sku"] < 1.0
    assert out["b"]["sku"] == 1.0
    assert out["all"]["sku"] < 1.0
