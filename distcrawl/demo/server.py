"""The bundled demo shop: a real HTTP server on loopback that knows its own ground truth.

It serves a deterministic catalog (``distcrawl.demo.catalog``), injects faults on demand
(latency, random 503s, 429s with Retry-After, products that always fail, hostile pages) and
keeps a log of every request, so tests and benchmarks can check a crawl against the truth.
On demand the catalog changes with time (``distcrawl.demo.changes``: prices and stock move,
products come and go) and pages answer ``ETag`` / ``Last-Modified`` and ``304 Not Modified``
as a real shop does.
The same controls are exposed over HTTP under ``/_shop/`` for a shop in another process, and
``distcrawl shop`` (or ``python -m distcrawl.demo.server``) serves one from the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from distcrawl.demo.catalog import DEFAULT_PAGE_SIZE, DEFAULT_PRODUCTS, DEFAULT_SEED
from distcrawl.demo.config import (
    DEFAULT_ERROR_STATUS,
    DEFAULT_GONE_STATUS,
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_RETRY_AFTER,
    GONE_STATUSES,
    VARIANTS,
    ShopConfig,
)
from distcrawl.demo.faults import ROBOTS_FAULTS
from distcrawl.demo.shop import DemoShop

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["DemoShop", "ShopConfig", "add_arguments", "main", "run"]


# -- the ``distcrawl shop`` sub-command ---------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--products", type=int, default=DEFAULT_PRODUCTS, help="catalog size")
    parser.add_argument(
        "--variant", choices=VARIANTS, default="jsonld", help="page markup (default: jsonld)"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="a loopback address")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="random seed of the catalog (same seed, same shop)",
    )
    parser.add_argument(
        "--page-size", type=int, default=DEFAULT_PAGE_SIZE, help="products per listing page"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="MS", help="delay of every answer"
    )
    parser.add_argument(
        "--latency-jitter",
        type=float,
        default=0.0,
        metavar="MS",
        help="plus a random delay of up to MS",
    )
    parser.add_argument(
        "--error-rate",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of requests answered with --error-status",
    )
    parser.add_argument(
        "--error-status",
        type=int,
        default=DEFAULT_ERROR_STATUS,
        help=f"HTTP status of the random errors (default: {DEFAULT_ERROR_STATUS})",
    )
    parser.add_argument(
        "--fail-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products that always answer 500 (chosen from --seed)",
    )
    parser.add_argument(
        "--rate-limit-429",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of requests answered 429 with Retry-After",
    )
    parser.add_argument(
        "--retry-after",
        type=int,
        default=DEFAULT_RETRY_AFTER,
        metavar="SECONDS",
        help="the Retry-After of 429 and 503 answers",
    )
    parser.add_argument("--hostile", action="store_true", help="add the hostile pages")
    parser.add_argument(
        "--crawl-delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a Crawl-delay line in robots.txt",
    )
    parser.add_argument(
        "--robots-fault",
        choices=ROBOTS_FAULTS,
        default="",
        help="robots.txt answers 404 or 503, never answers (hang) or closes the connection",
    )
    parser.add_argument(
        "--hang", action="store_true", help="no page but robots.txt is ever answered"
    )
    parser.add_argument(
        "--no-tracking-params",
        dest="tracking_params",
        action="store_false",
        help="link every product without ?utm_source=..&ref=..",
    )
    changes = parser.add_argument_group(
        "a shop that changes",
        "Every --change-interval seconds (a change epoch), prices and stock change, products "
        "are added and removed, deterministically from --seed and the time; "
        "GET /_shop/changes lists every change and when it was made.",
    )
    changes.add_argument(
        "--change-interval",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="length of a change epoch (default 0: the catalog never changes)",
    )
    changes.add_argument(
        "--change-rate",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="share of the live products whose price and/or stock change in each epoch",
    )
    changes.add_argument(
        "--add-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products added in each epoch",
    )
    changes.add_argument(
        "--remove-products",
        type=int,
        default=0,
        metavar="COUNT",
        help="products removed in each epoch (their pages answer --gone-status)",
    )
    changes.add_argument(
        "--change-cycles",
        type=int,
        default=0,
        metavar="EPOCHS",
        help="stop changing after this many epochs (default 0: never stop)",
    )
    changes.add_argument(
        "--change-start",
        type=float,
        default=None,
        metavar="UNIX_TIME",
        help="when epoch 0 began (default: when the shop starts); equal starts, equal shops",
    )
    changes.add_argument(
        "--gone-status",
        type=int,
        choices=GONE_STATUSES,
        default=DEFAULT_GONE_STATUS,
        help=f"status of a removed product's page (default {DEFAULT_GONE_STATUS}; 200: the page "
        "stays as last published and only the listings drop it)",
    )
    changes.add_argument(
        "--conditional",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="answer ETag / Last-Modified and 304 Not Modified on home, category, listing "
        "and product pages (default: on when the shop changes)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT, after printing ``{"url": ..., "pid": ...}``."""
    try:
        config = ShopConfig(
            products=args.products,
            variant=args.variant,
            seed=args.seed,
            page_size=args.page_size,
            host=args.host,
            port=args.port,
            latency_ms=args.latency,
            latency_jitter_ms=args.latency_jitter,
            error_rate=args.error_rate,
            error_status=args.error_status,
            fail_products=args.fail_products,
            rate_limit_429=args.rate_limit_429,
            retry_after=args.retry_after,
            hostile=args.hostile,
            crawl_delay=args.crawl_delay,
            robots_fault=args.robots_fault,
            hang=args.hang,
            tracking_params=args.tracking_params,
            change_interval=args.change_interval,
            change_rate=args.change_rate,
            change_add=args.add_products,
            change_remove=args.remove_products,
            change_cycles=args.change_cycles,
            change_start=args.change_start,
            gone_status=args.gone_status,
            conditional=args.conditional,
        )
    except ValueError as exc:
        print(f"distcrawl shop: {exc}", file=sys.stderr)
        return 2
    stopping = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    try:
        shop = DemoShop(config)
    except ValueError as exc:
        print(f"distcrawl shop: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        shop.start()
    except OSError as exc:  # the port is taken, or the address is not this machine's
        print(
            f"distcrawl shop: cannot listen on {config.host}:{config.port}: "
            f"{exc.strerror or exc} (another shop still running? stop it, or give another "
            "--port; --port 0 picks a free one)",
            file=sys.stderr,
        )
        return 1
    try:
        print(json.dumps({"url": shop.url, "pid": os.getpid()}), flush=True)
        while not stopping.wait(0.2):
            pass
    finally:
        shop.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distcrawl.demo.server", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
