"""What ``analyze()`` says differently from a git ref's version, page by page.

Both versions read the very same pages in one process (the reference is imported from
``git archive``, as in ``bench/extract.py``): every page of the demo shop in each variant
(home, categories, listings, products) and the real product pages of ``extraction-dev``.
Each page whose kind, canonical URL, product fields or links differ is listed with the
fields that differ, so that every change a piece of extraction work makes can be explained.

    python bench/extract_diff.py --ref main --products 200 --json
    python bench/extract_diff.py --ref main --dataset ../shared/extraction-dev --show 20
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from extract import demo_pages, load_reference  # noqa: E402

from distcrawl.demo.config import VARIANTS  # noqa: E402
from distcrawl.extract import analyze  # noqa: E402

#: the real pages' folder, beside the project's checkout
DEFAULT_DATASET = ROOT.parent / "shared" / "extraction-dev"


def plain(value: Any) -> Any:
    """*value* with Decimals as strings, for comparing and printing."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def outcome(result: Any) -> dict[str, Any]:
    """What one analysis says: kind, canonical URL, each product field, each link kind."""
    out: dict[str, Any] = {"kind": result.kind, "canonical_url": result.canonical_url}
    for name, value in (result.product or {}).items():
        out[f"product.{name}"] = plain(value)
    for name, value in result.links.items():
        out[f"links.{name}"] = value
    return out


def differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    """Per key that differs: [reference's value, this version's value]."""
    return {
        key: [old.get(key), new.get(key)]
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    }


def real_pages(dataset: Path) -> list[tuple[str, bytes]]:
    """(file URL, body) of each saved page of *dataset* (``html/*.html.gz``)."""
    folder = dataset / "html"
    return [
        (f"file:///pages/{path.name.removesuffix('.gz')}", gzip.decompress(path.read_bytes()))
        for path in sorted(folder.glob("*.html.gz"))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="main", help="git ref to compare with")
    parser.add_argument("--products", type=int, default=200)
    parser.add_argument("--variant", action="append", help="demo variant (default: all)")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--show", type=int, default=50, help="changed pages listed at most")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    groups: dict[str, list[tuple[str, bytes]]] = {}
    for variant in args.variant or VARIANTS:
        groups[variant] = [(u, h.encode()) for u, h in demo_pages(args.products, variant)]
    if args.dataset.is_dir():
        groups["extraction-dev"] = real_pages(args.dataset)
    report: dict[str, Any] = {"ref": args.ref, "products": args.products, "groups": {}}
    changed: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        reference = load_reference(args.ref, Path(tmp))
        for group, items in groups.items():
            fields: Counter[str] = Counter()
            pages = 0
            for url, body in items:
                old = outcome(reference(url=url, body=body, encoding="utf-8"))
                new = outcome(analyze(url=url, body=body, encoding="utf-8"))
                diff = differences(old, new)
                if diff:
                    pages += 1
                    fields.update(diff.keys())
                    changed.append({"group": group, "url": url, "diff": diff})
            report["groups"][group] = {
                "pages": len(items),
                "changed": pages,
                "changed_by_field": dict(sorted(fields.items())),
            }
    report["changed"] = sum(g["changed"] for g in report["groups"].values())
    report["changed_pages"] = changed[: args.show]
    if args.json:
        print(json.dumps(report, sort_keys=True, default=str))
    else:
        for group, summary in report["groups"].items():
            print(
                f"{group}: {summary['changed']} of {summary['pages']} pages changed "
                f"{summary['changed_by_field']}"
            )
        for page in report["changed_pages"]:
            print(f"\n{page['group']} {page['url']}")
            for key, (old, new) in page["diff"].items():
                print(f"  {key}: {str(old)[:100]!r} -> {str(new)[:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
