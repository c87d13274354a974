"""The revisit guide's example: a crawl of the changing demo shop in revisit mode records the
shop's changes in the change log, and status shows the revisit schedule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pymongo
import pytest
from docshell import Shell, block, free_port, wait_until

pytestmark = pytest.mark.slow


def _changes_logged(mongo_uri: str) -> int:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=5000)
    try:
        return int(client.get_default_database()["changes"].count_documents({}))
    finally:
        client.close()


def test_revisit_mode_records_the_shops_changes(tmp_path: Path) -> None:
    sh = Shell(tmp_path / "work", ports={"8000": str(free_port())})
    try:
        sh.run_ok(block("revisit-start"))
        mongo_uri = sh.run_ok('echo "$MONGO_URI"\n').output.strip().splitlines()[-1]
        # the shop changes every 5 s and pages come back every 10 s: wait for the first change
        assert wait_until(lambda: _changes_logged(mongo_uri) > 0, timeout=240, every=1), sh.stderr()
        out = sh.run_ok(block("revisit-status")).output
        revisit = json.loads(
            next(ln for ln in out.splitlines() if ln.startswith("{")).replace("'", '"')
            .replace("None", "null")
        )  # fmt: skip
        assert revisit["scheduled"] > 0, revisit
        changes = sh.run_ok(block("revisit-changes")).output
        assert " -> " in changes, changes
        sh.run_ok(block("revisit-stop"), timeout=120)
    finally:
        sh.close()
