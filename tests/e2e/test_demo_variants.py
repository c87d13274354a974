"""End to end, no profile: each demo-shop template crawled by a real node, fields checked."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pymongo
import pytest
from crawl_nodes import Node

from distcrawl.demo.checks import check_fields, check_store

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("variant", ["plain", "dlist", "specs", "text", "crowded", "crowded-de"])
def test_template_crawls_completely_with_right_fields(
    variant: str, redis_url: str, mongo_uri: str, redis_cli: Path, shop_factory: Any, tmp_path: Path
) -> None:
    shop = shop_factory(products=300, variant=variant)
    subprocess.run(
        [str(redis_cli), "-u", redis_url, "lpush", "catalog:start_urls", shop.url],
        check=True,
        capture_output=True,
    )
    node = Node(redis_url=redis_url, mongo_uri=mongo_uri, log_dir=tmp_path, node_id=variant)
    try:
        assert node.wait() == 0
    finally:
        node.kill()
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri)
    try:
        collection = client.get_default_database()["products"]
        store = check_store(collection, shop.expected_product_urls())
        fields = check_fields(collection, shop.catalog, shop.url, variant)
    finally:
        client.close()
    assert (store["stored"], store["missing"], store["duplicates"]) == (300, 0, 0), store
    assert fields["fields_wrong"] == 0, fields
