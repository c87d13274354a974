"""The demo's command line: ``distcrawl demo`` and its options."""

from __future__ import annotations

import argparse

from distcrawl.demo.config import VARIANTS
from distcrawl.frontier.keys import MAX_SHARDS

__all__ = ["DEFAULT_TIMEOUT", "MAX_SITES", "add_arguments"]

#: seconds a demo crawl may take before the nodes are stopped and the run reported as failed
DEFAULT_TIMEOUT = 600.0
#: most demo shops a run may start (one per loopback address 127.0.0.1 ...)
MAX_SITES = 250


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _shards(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SHARDS}, got {value}")
    return value


def _sites(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_SITES:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SITES}, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--products", type=_positive_int, default=300, help="products in each demo shop"
    )
    parser.add_argument(
        "--sites",
        type=_sites,
        default=1,
        help="demo shops, each a site of its own on 127.0.0.1, 127.0.0.2, ... (default 1): "
        "several sites spread the crawl over the frontier's shards (and a cluster's masters)",
    )
    parser.add_argument(
        "--shards",
        type=_shards,
        default=None,
        help="frontier shards (DISTCRAWL_SHARDS for the nodes; default: DISTCRAWL_SHARDS "
        "from the environment, else 16)",
    )
    parser.add_argument(
        "--nodes", type=_positive_int, default=2, help="scrapy crawl processes to run (1 or more)"
    )
    parser.add_argument(
        "--variant",
        choices=VARIANTS,
        default="jsonld",
        help="how product pages are marked up: schema.org JSON-LD (default), or one of the "
        "templates without structured data (plain has a bundled site profile, demo-plain.toml; "
        "bootstrap prints stock lines, a hex 'UPC' and a titled description; crowded and "
        "crowded-de crowd each product with other products' prices, codes and buy buttons, "
        "crowded-de in German notation)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="site profile file or folder for the nodes (default: none, generic extraction)",
    )
    parser.add_argument("--latency", type=float, default=0.0, help="shop latency per page, ms")
    parser.add_argument("--error-rate", type=float, default=0.0, help="fraction of 503s")
    parser.add_argument(
        "--home",
        help="state folder for the embedded servers, kept after the run (default: a new "
        "temporary folder whose servers are stopped at the end, deleted after a clean run)",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --home: delete the crawl that home already holds (products and frontier)",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=0,
        metavar="MASTERS",
        help="run the frontier on a fresh local Redis Cluster of this many masters",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds before the nodes are stopped and the run fails "
        f"(default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument(
        "--incidents",
        action="store_true",
        help="stage two incidents (2 sites at least, jsonld): the first shop's product pages "
        "lose their price from what extraction reads after half its products, the second's "
        "fail with a new error (502) for a while; a local webhook receiver gets the nodes' "
        "notices; the summary adds findings, error_groups and webhook_notices",
    )
    parser.add_argument(
        "--web", action="store_true", help="serve the live dashboard during the crawl"
    )
    parser.add_argument("--web-port", type=int, default=8470, help="dashboard port (0 = any free)")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Scrapy setting for every node (repeatable)",
    )
