"""Run the documentation's shell blocks as a user types them: in one bash session, one block
after another, so exports, background jobs (``cmd & pid=$!``) and files carry over (the docs
walk, tests/docs/test_walk.py, types every page's blocks into one).

A session works in a folder of its own that looks like the project directory (``distcrawl/``,
``dev.py``, ``scrapy.cfg`` linked in), with ``.venv/bin`` first on the ``PATH`` and no
``REDIS_*``, ``MONGO_*`` or ``DISTCRAWL_*`` from the test's environment. Every process the
session starts is in its process group, which :meth:`Shell.close` ends; the embedded servers
(which detach) are stopped through their home folder.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from distcrawl.servers.embedded import stop_services

ROOT = Path(__file__).resolve().parents[2]

BIN = Path(sys.executable).parent
_DONE = "__DOCS_BLOCK_DONE__"
_ERR = "__DOCS_BLOCK_ERROR__"

__all__ = ["BIN", "ROOT", "Result", "Shell", "wait_until"]


@dataclass
class Result:
    output: str
    errors: list[str]  # "status: command" of each command that failed

    def ok(self) -> bool:
        return not self.errors


class Shell:
    """One bash session in *workdir*."""

    def __init__(
        self,
        workdir: Path,
        *,
        ports: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        link: tuple[str, ...] = ("distcrawl", "dev.py", "bench"),
    ) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        for name in link:
            target = workdir / name
            if not target.exists():
                target.symlink_to(ROOT / name)
        #: fixed ports of the docs -> the free ports this session uses instead
        self.ports = dict(ports or {})
        if not (workdir / "scrapy.cfg").exists():
            # its scrapyd deploy targets name the docs' ports too
            (workdir / "scrapy.cfg").write_text(self.substitute((ROOT / "scrapy.cfg").read_text()))
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("REDIS_", "MONGO_", "DISTCRAWL_", "SCRAPY_"))
        }
        base.update(PATH=f"{BIN}{os.pathsep}{base.get('PATH', '')}", COLUMNS="120")
        base.update(env or {})
        self.stderr_path = workdir / "shell.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=workdir,
            env=base,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._count = 0
        # each failing command of a block is reported on stdout, where the block's end is
        self._send(f"trap '__rc=$?; echo; echo \"{_ERR} $__rc: $BASH_COMMAND\"' ERR\n")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def substitute(self, text: str) -> str:
        for fixed, free in self.ports.items():
            text = re.sub(rf"(?<![0-9]){fixed}(?![0-9])", free, text)
        return text

    def run(self, text: str, timeout: float = 300) -> Result:
        """Type *text* into the session and wait for it to finish (stdin: /dev/null)."""
        self._count += 1
        marker = f"{_DONE} {self._count}"
        self._send(
            "{\n"
            + self.substitute(text).rstrip("\n")
            + f"\n}} < /dev/null\necho; echo '{marker}'\n"
        )
        output: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(
                    f"block did not finish in {timeout}s:\n{text}\n--- output:\n"
                    + "".join(output)[-3000:]
                    + f"\n--- stderr:\n{self.stderr()}"
                ) from None
            if line is None:
                raise RuntimeError(
                    f"the shell exited during:\n{text}\n--- output:\n{''.join(output)[-3000:]}"
                    f"\n--- stderr:\n{self.stderr()}"
                )
            if line.rstrip("\n").endswith(marker):  # a last line without a newline: on it
                output.append(line.rstrip("\n")[: -len(marker)])
                break
            output.append(line)
        errors = [ln.split(" ", 1)[1].strip() for ln in output if ln.startswith(_ERR)]
        text_out = "".join(ln for ln in output if not ln.startswith(_ERR))
        return Result(text_out, errors)

    def run_ok(self, text: str, timeout: float = 300) -> Result:
        result = self.run(text, timeout)
        assert result.ok(), (
            f"failed: {result.errors}\n--- block:\n{text}\n--- output:\n{result.output[-3000:]}"
            f"\n--- stderr:\n{self.stderr()}"
        )
        return result

    def stderr(self, tail: int = 4000) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-tail:]

    def close(self, homes: tuple[Path, ...] = ()) -> None:
        """End every process of the session (its process group), then stop the embedded
        servers of *homes* (default: the session's ``.distcrawl``)."""
        for home in homes or (self.workdir / ".distcrawl",):
            if home.exists():
                stop_services(home)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:
            # the shell is gone; its children may not be
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        self._stderr.close()


def wait_until(condition: Callable[[], object], timeout: float = 120, every: float = 0.2) -> bool:
    """Poll *condition* until it is true or *timeout* passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())
