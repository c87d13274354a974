"""A graceful stop asked for before Scrapy starts its log is kept from the moment ``scrapy
crawl``'s options are read (found by the fault search: a SIGTERM 2.3 s after the start of a
node on a loaded machine ended it with status -15, before the command's run began); before
that, Python is still importing Scrapy and the node has touched nothing.

Each case runs in a process of its own: a SIGTERM that is not kept ends it."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Scrapy's order: the options are read, then its log starts (CrawlerProcess), then the
#: command runs; here the process signals itself right after the options
SCRIPT = """
import argparse, os, signal
from scrapy.settings import Settings
from distcrawl.commands.crawl import Command

if {ignored}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
command = Command()
command.settings = Settings()
parser = argparse.ArgumentParser()
command.add_options(parser)
opts, args = parser.parse_known_args(["catalog"])
command.process_options(args, opts)
os.kill(os.getpid(), signal.SIGTERM)
print(command.stop_asked(), signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
"""


@pytest.mark.parametrize(
    ("ignored", "printed"),
    [(False, "[15] False"), (True, "[] True")],
    ids=["kept", "ignored-stays-ignored"],
)
def test_a_sigterm_once_the_options_are_read_is_kept_for_the_crawl(
    ignored: bool, printed: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(ignored=ignored)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == printed
