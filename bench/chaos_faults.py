"""Chaos: the server faults of the single-fault modes (--redis-outage, --redis-rewind,
--redis-oom, --redis-freeze, --node-freeze, --mongo-kill), injected once mid-crawl."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))


from chaos_checks import KEYS

#: seconds after a fault's end whose log lines still count as the fault's (its end line)
LOG_SETTLE = 10.0
#: --redis-oom sets maxmemory to this share of the memory Redis uses: it refuses every write
#: (a limit just above the use, as a growing crawl meets it, may be met late or never by a
#: crawl that frees as much as it writes)
OOM_SHARE = 0.5


class ServerFaults:
    """The server fault of a :class:`chaos_run.Chaos` run."""

    def _fault_name(self) -> str | None:
        args = self.args
        for name in ("redis_outage", "redis_rewind", "redis_oom", "redis_freeze", "node_freeze"):
            if getattr(args, name):
                return name.replace("_", "-")
        if args.mongo_kill:
            return "mongo-kill"
        return None

    def _mark_logs(self) -> None:
        """Where each node's log is now: the fault's lines are those written after this."""
        for node in self.nodes:
            self.log_marks[node.node_id] = _size(node.log_file)

    def _count_log_lines(self) -> None:
        """Lines each node logged since :meth:`_mark_logs` (a node started since: all), up to
        its line saying Redis is back where it wrote one (what follows is the crawl's)."""
        for node in self.nodes:
            try:
                with open(node.log_file, "rb") as log:
                    log.seek(self.log_marks.get(node.node_id, 0))
                    text = log.read()
            except OSError:
                text = b""
            back = text.find(b"Redis is back")
            if back >= 0:
                text = text[: text.find(b"\n", back) + 1 or len(text)]
            self.log_lines[node.node_id] = text.count(b"\n")

    def _inject(self, progress: float) -> None:
        """The server fault, in a thread of its own while the crawl goes on."""
        args, fault = self.args, self._fault_name()
        event: dict[str, Any] = {
            "fault": fault,
            "at_s": round(time.time() - self.started_at, 2),
            "progress": round(progress, 3),
        }
        if fault == "redis-outage":
            self.say(f"Redis stopped for {args.redis_outage:g}s at {progress:.0%} of the pages")
            self.services.redis.stop()
            time.sleep(args.redis_outage)
            self.services.redis.start()
            self.say("Redis started again")
        elif fault == "redis-rewind":
            # the copy is taken S seconds before the crash: what a lagging replica holds
            redis_dir = self.services.redis.data_dir
            copy = self.work / "redis-copy"
            shutil.copytree(redis_dir, copy)
            event["copied_at_s"] = round(time.time() - self.started_at, 2)
            time.sleep(args.redis_rewind)
            self.services.redis.kill()
            shutil.rmtree(redis_dir)
            shutil.copytree(copy, redis_dir)
            self.services.redis.start()
            self.say(
                f"Redis killed and restarted from its data of {args.redis_rewind:g}s earlier "
                f"at {progress:.0%} of the pages"
            )
        elif fault == "redis-oom":
            client = redis.Redis.from_url(self.services.redis_url)
            used = int(client.info("memory")["used_memory"])
            limit = int(used * OOM_SHARE)
            self._mark_logs()
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", limit)
            event["maxmemory"] = limit
            self.say(
                f"Redis maxmemory {limit} (used {used}, noeviction) for {args.redis_oom:g}s "
                f"at {progress:.0%} of the pages"
            )
            time.sleep(args.redis_oom)
            event["oom_errors"] = _oom_errors(client)
            client.config_set("maxmemory", 0)
            client.close()
            self.say("Redis maxmemory lifted")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "redis-freeze":
            pid = self.services.redis.pid
            assert pid is not None
            self._mark_logs()
            self.say(f"Redis frozen (SIGSTOP) for {args.redis_freeze:g}s at {progress:.0%}")
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(args.redis_freeze)
            finally:
                os.kill(pid, signal.SIGCONT)
            self.say("Redis resumed (SIGCONT)")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "node-freeze":
            r = redis.Redis.from_url(self.services.redis_url)
            holding = [
                (sum(int(r.hlen(sh.held(n.node_id))) for sh in KEYS.all_shards()), n)
                for n in self.nodes
                if n.alive
            ]
            r.close()
            leases, victim = max(holding, key=lambda t: t[0])
            self.frozen.add(victim.node_id)
            event.update(node=victim.node_id, leases_held=leases)
            self._mark_logs()
            self.say(
                f"{victim.node_id} frozen (SIGSTOP) for {args.node_freeze:g}s holding {leases} "
                f"leases at {progress:.0%}"
            )
            os.kill(victim.pid, signal.SIGSTOP)
            try:
                time.sleep(args.node_freeze)
            finally:
                os.kill(victim.pid, signal.SIGCONT)
            self.say(f"{victim.node_id} resumed (SIGCONT)")
            time.sleep(LOG_SETTLE)
            self._count_log_lines()
        elif fault == "mongo-kill":
            assert self.services.mongo is not None
            self.say(f"kill -9 MongoDB at {progress:.0%} of the pages")
            self.services.mongo.kill()
            time.sleep(args.mongo_down)
            self.services.mongo.start()
            self.say("MongoDB started again")
        event["done_s"] = round(time.time() - self.started_at, 2)
        self.fault_events.append(event)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _oom_errors(client: redis.Redis) -> int | None:
    """Commands Redis refused for memory so far (``errorstat_OOM``), where it counts them."""
    try:
        stats = client.info("errorstats")
    except redis.RedisError:
        return None
    oom = stats.get("errorstat_OOM")
    return int(oom["count"]) if isinstance(oom, dict) else None
