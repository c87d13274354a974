"""Cost of ``analyze()`` per page on the demo shop's pages: a git ref's version against this one.

The reference version (``--ref``, default ``main``) is read with ``git archive`` into a
temporary folder and imported under another package name, so both run in one process on the
very same pages, in alternating rounds (a loaded machine slows both alike). Pages are
rendered in-process from the demo shop's templates: home, category, listing and product
pages of every variant given (default: the ones the reference shop also has).

    python bench/extract.py --products 200 --rounds 5 --json

Each page is analysed by both versions in turn (CPU time of this process), so a burst of
load from other processes falls on both alike. Prints ``us_per_page`` for each version and
``ratio`` (this / reference), from the round with the median ratio, per variant and over
all pages; ``ratio`` below 1.10 keeps the issue-16 budget (within 10%).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _results import write_result  # noqa: E402

from distcrawl.demo import pages  # noqa: E402
from distcrawl.demo.catalog import Catalog  # noqa: E402
from distcrawl.extract import analyze  # noqa: E402

BASE = "http://127.0.0.1:8000"


def load_reference(ref: str, folder: Path) -> Callable[..., Any]:
    """``analyze`` of ``distcrawl/extract`` at git *ref*, imported as ``_ref_extract``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "distcrawl/extract"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    package = folder / "distcrawl" / "extract"
    (package / "cli.py").unlink(missing_ok=True)  # the only module importing its parent
    init = package / "__init__.py"
    init.write_text("")
    spec = importlib.util.spec_from_file_location(
        "_ref_extract", init, submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_ref_extract"] = module
    spec.loader.exec_module(module)
    page_module = importlib.import_module("_ref_extract.page")
    return page_module.analyze  # type: ignore[no-any-return]


def demo_pages(products: int, variant: str) -> list[tuple[str, str]]:
    """(url, html) of the home page, every category and listing page, and every product."""
    catalog = Catalog(products)
    out = [(BASE + "/", pages.render_home(catalog))]
    for top in catalog.tops:
        out.append((BASE + top.path, pages.render_category(top)))
    for leaf in catalog.leaves():
        for page in range(1, catalog.page_count(leaf) + 1):
            html = render_listing(catalog, leaf, page, variant)
            out.append((f"{BASE}{leaf.path}?page={page}", html))
    for product in catalog.products():
        leaf = catalog.leaf(product.top_slug, product.leaf_slug)
        assert leaf is not None
        html = pages.render_product(product, leaf, base_url=BASE, variant=variant)
        out.append((BASE + product.path, html))
    return out


def render_listing(catalog: Catalog, leaf: Any, page: int, variant: str) -> str:
    try:
        return pages.render_listing(catalog, leaf, page, variant=variant)  # type: ignore[call-arg]
    except TypeError:  # a shop whose listings are the same in every variant
        return pages.render_listing(catalog, leaf, page)


def time_pages(fn: Callable[..., Any], items: list[tuple[str, bytes]]) -> float:
    """CPU seconds of this process (other processes on a shared machine count less)."""
    t0 = time.process_time()
    for url, body in items:
        fn(url=url, body=body, encoding="utf-8")
    return time.process_time() - t0


def time_both(
    ref: Callable[..., Any], this: Callable[..., Any], items: list[tuple[str, bytes]], flip: bool
) -> tuple[float, float]:
    """CPU seconds of each version over *items*, page by page in alternation: a burst of
    load from other processes then falls on both alike."""
    clock = time.process_time
    ref_s = this_s = 0.0
    for url, body in items:
        for which in (1, 0) if flip else (0, 1):
            fn = this if which else ref
            t0 = clock()
            fn(url=url, body=body, encoding="utf-8")
            if which:
                this_s += clock() - t0
            else:
                ref_s += clock() - t0
    return ref_s, this_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="main", help="git ref to compare with")
    parser.add_argument("--products", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variant", action="append", help="demo variant (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    variants = args.variant or ["jsonld", "plain"]
    with tempfile.TemporaryDirectory() as tmp:
        reference = load_reference(args.ref, Path(tmp))
        result: dict[str, Any] = {"ref": args.ref, "products": args.products, "variants": {}}
        totals = {"ref": 0.0, "this": 0.0, "pages": 0}
        for variant in variants:
            items = [(u, h.encode()) for u, h in demo_pages(args.products, variant)]
            time_pages(reference, items[:20])  # warm caches and imports
            time_pages(analyze, items[:20])
            runs = [time_both(reference, analyze, items, bool(i % 2)) for i in range(args.rounds)]
            # the median round: robust to the odd round disturbed by other processes
            runs.sort(key=lambda run: run[1] / run[0])
            ref_s, this_s = runs[len(runs) // 2]
            result["variants"][variant] = {
                "pages": len(items),
                "ref_us_per_page": round(ref_s / len(items) * 1e6, 1),
                "this_us_per_page": round(this_s / len(items) * 1e6, 1),
                "ratio": round(this_s / ref_s, 3),
            }
            totals["ref"] += ref_s
            totals["this"] += this_s
            totals["pages"] += len(items)
            print(f"{variant}: {result['variants'][variant]}", file=sys.stderr)
        result["ref_us_per_page"] = round(totals["ref"] / totals["pages"] * 1e6, 1)
        result["this_us_per_page"] = round(totals["this"] / totals["pages"] * 1e6, 1)
        result["ratio"] = round(totals["this"] / totals["ref"], 3)
    write_result(result)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(
            f"ref {result['ref_us_per_page']} us/page  this {result['this_us_per_page']} us/page"
            f"  ratio {result['ratio']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
