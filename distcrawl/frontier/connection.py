"""The one place a Redis client is made from ``REDIS_URL``: a single server or a Redis Cluster.

``redis://host:port/0`` (or ``rediss://`` for TLS) names one server. A Redis Cluster is named
by ``redis+cluster://host:port`` (``rediss+cluster://`` for TLS), with more seed nodes as
``redis+cluster://h1:p1,h2:p2``, or by a plain ``redis://`` URL together with the setting
``DISTCRAWL_REDIS_CLUSTER = True`` (env ``DISTCRAWL_REDIS_CLUSTER=1``). A cluster has one
database only: a path other than ``/`` or ``/0`` is refused with a clear error.

The clients are redis-py's: :class:`redis.Redis` / :class:`redis.cluster.RedisCluster` for
commands and tools, :mod:`redis.asyncio` ones for a node's I/O on the reactor. On a cluster the
frontier's script runs with FCALL (or EVALSHA) routed by the slot of its key (one slot per call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
from redis._parsers.commands import CommandPolicies, RequestPolicy, ResponsePolicy
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.policies import BasePolicyResolver, PolicyResolver, StaticPolicyResolver

from distcrawl.base.config import SETTINGS

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "CLUSTER_SCHEMES",
    "DEFAULT_REDIS_URL",
    "REDIS_FAILURES",
    "RedisTarget",
    "RedisURLError",
    "async_client",
    "client",
    "is_cluster_client",
    "is_cluster_url",
    "parse_redis_url",
    "settings_url",
]

#: what a failed Redis call raises: redis-py's errors and the socket's, and the AttributeError or
#: TypeError that redis-py's asyncio clients raise when a connection is closed under a command
#: (its stream writer or transport is None by then). Code that degrades gracefully while Redis is
#: away (a page budget, a shared robots.txt) catches all of them: any of them is an outage, never
#: a reason to fail the request that was waiting on the call.
REDIS_FAILURES: tuple[type[Exception], ...] = (redis.RedisError, OSError, AttributeError, TypeError)

#: URL schemes naming a Redis Cluster -> the scheme of one of its nodes
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
#: the URL used when ``REDIS_URL`` is empty and nothing embedded is wanted
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class RedisURLError(ValueError):
    """``REDIS_URL`` cannot be used as given."""


@dataclass(frozen=True)
class RedisTarget:
    """What a ``REDIS_URL`` names: a node URL redis-py understands and, for a cluster, the
    seed nodes (host, port)."""

    url: str
    cluster: bool
    seeds: tuple[tuple[str, int], ...] = ()


def parse_redis_url(url: str, *, cluster: bool = False) -> RedisTarget:
    """Read *url*; *cluster* (the ``DISTCRAWL_REDIS_CLUSTER`` setting) makes a plain URL a
    cluster's seed node."""
    url = url or DEFAULT_REDIS_URL
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise RedisURLError(f"REDIS_URL is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme in CLUSTER_SCHEMES:
        scheme, cluster = CLUSTER_SCHEMES[scheme], True
    elif scheme == "unix" and cluster:
        raise RedisURLError("a Redis Cluster is reached over TCP, not a unix socket")
    if not cluster:
        return RedisTarget(url=url, cluster=False)
    if parts.path not in ("", "/", "/0"):
        raise RedisURLError(
            f"a Redis Cluster has database 0 only, REDIS_URL names {parts.path.lstrip('/')!r}"
        )
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    seeds: list[tuple[str, int]] = []
    for hostport in hostlist.split(","):
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        host = host.strip("[]") or "127.0.0.1"
        try:
            seeds.append((host, int(port or 6379)))
        except ValueError:
            raise RedisURLError(f"bad port in REDIS_URL: {hostport!r}") from None
    first = f"{seeds[0][0]}:{seeds[0][1]}"
    node_url = urlunsplit((scheme, f"{userinfo}{at}{first}", "/0", parts.query, ""))
    return RedisTarget(url=node_url, cluster=True, seeds=tuple(seeds))


#: REDIS_PARAMS keys that end up in the frontier's connection URL
_URL_PARAMS = frozenset({"host", "port", "db", "password", "username", "ssl", "url"})
#: scrapy-redis' own REDIS_PARAMS defaults (not something a project chose)
_DEFAULT_PARAMS = frozenset(
    {"socket_timeout", "socket_connect_timeout", "retry_on_timeout", "encoding"}
)


def redis_url_from_settings(settings: BaseSettings) -> tuple[str | None, list[str]]:
    """scrapy-redis' connection settings as the frontier's Redis URL: ``REDIS_URL``, else
    ``REDIS_HOST`` / ``REDIS_PORT`` / ``REDIS_DB`` and ``REDIS_PARAMS`` (host, port, db,
    username, password, ssl, url). Returns the URL (None if nothing names a server) and the
    ``REDIS_PARAMS`` keys it cannot honour."""
    params = dict(settings.getdict("REDIS_PARAMS"))
    unused = sorted(k for k in params if k not in _URL_PARAMS | _DEFAULT_PARAMS)
    url = settings.get("REDIS_URL") or params.get("url")
    if url:
        return str(url), unused
    host = settings.get("REDIS_HOST") or params.get("host")
    port = settings.get("REDIS_PORT") or params.get("port")
    if not host and not port:
        return None, unused
    db = settings.get("REDIS_DB") or params.get("db") or 0
    auth = ""
    if params.get("password"):
        auth = f"{quote(str(params.get('username') or ''), safe='')}:"
        auth += f"{quote(str(params['password']), safe='')}@"
    scheme = "rediss" if params.get("ssl") else "redis"
    return f"{scheme}://{auth}{host or '127.0.0.1'}:{int(port or 6379)}/{int(db)}", unused


def settings_url(settings: BaseSettings) -> str:
    """``REDIS_URL`` as every component should read it: with ``DISTCRAWL_REDIS_CLUSTER`` on, a
    plain ``redis://`` / ``rediss://`` URL becomes the ``+cluster`` form, so the URL alone says
    which client to make."""
    url: str = redis_url_from_settings(settings)[0] or DEFAULT_REDIS_URL
    if SETTINGS.value(settings, "DISTCRAWL_REDIS_CLUSTER"):
        scheme, sep, rest = url.partition("://")
        if sep and scheme.lower() in ("redis", "rediss"):
            return f"{scheme}+cluster://{rest}"
        if sep and scheme.lower() not in CLUSTER_SCHEMES:
            raise RedisURLError(f"DISTCRAWL_REDIS_CLUSTER is on, REDIS_URL is {scheme}://")
    return url


class _KeyedScripts(BasePolicyResolver):
    """Scripts go to the node of the slot of their keys, found from the call itself.

    Without this, redis-py's blocking cluster pipelines ask the server for the keys of every
    EVALSHA (``COMMAND GETKEYS`` on the default node: one more round trip per script call,
    and as much Redis CPU as a third of a page's). Other commands resolve as redis-py's own
    static policies say."""

    _KEYED = CommandPolicies(
        request_policy=RequestPolicy.DEFAULT_KEYED, response_policy=ResponsePolicy.DEFAULT_KEYED
    )

    def __init__(self, fallback: PolicyResolver | None = None) -> None:
        names = ("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro")
        scripts = dict.fromkeys(names, self._KEYED)
        super().__init__({"core": scripts}, fallback or StaticPolicyResolver())

    def with_fallback(self, fallback: PolicyResolver) -> PolicyResolver:
        return _KeyedScripts(fallback)


def _fcall_slot(keyslot: Any, args: tuple[Any, ...]) -> int | None:
    """The slot of an ``FCALL``'s first key, read from the call itself as redis-py reads an
    ``EVALSHA``'s (it asks the server ``COMMAND GETKEYS`` for an ``FCALL``: one more round trip
    per call); None for any other command."""
    if len(args) > 3 and str(args[0]).upper() in ("FCALL", "FCALL_RO") and int(args[2]) > 0:
        return int(keyslot(args[3]))
    return None


class _Cluster(RedisCluster):
    """redis-py's cluster client whose pipelines route scripts as the client does (its
    ``pipeline()`` does not hand the client's policy resolver on), ``FCALL`` by its key."""

    def determine_slot(self, *args: Any) -> Any:
        slot = _fcall_slot(self.keyslot, args)
        return super().determine_slot(*args) if slot is None else slot

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)  # type: ignore[no-untyped-call]
        pipe._policy_resolver = self._policy_resolver
        pipe.determine_slot = self.determine_slot
        return pipe


class _AsyncCluster(AsyncRedisCluster):
    """redis-py's asyncio cluster client, ``FCALL`` routed by its key (its pipelines ask the
    client)."""

    async def _determine_slot(self, command: str, *args: Any) -> int:
        slot = _fcall_slot(self.keyslot, (command, *args))
        return await super()._determine_slot(command, *args) if slot is None else slot


def client(url: str, **kwargs: Any) -> Any:
    """A blocking client: :class:`redis.Redis`, or :class:`redis.cluster.RedisCluster`."""
    target = parse_redis_url(url)
    if not target.cluster:
        return redis.Redis.from_url(target.url, **kwargs)
    kwargs.pop("health_check_interval", None)
    if len(target.seeds) > 1:
        kwargs["startup_nodes"] = [
            ClusterNode(host, port)  # type: ignore[no-untyped-call]
            for host, port in target.seeds
        ]
    kwargs.setdefault("policy_resolver", _KeyedScripts())
    return _Cluster.from_url(target.url, **kwargs)


def async_client(url: str, **kwargs: Any) -> Any:
    """An asyncio client: :class:`redis.asyncio.Redis`, or its ``RedisCluster``."""
    target = parse_redis_url(url)
    if not target.cluster:
        return aioredis.from_url(target.url, **kwargs)
    kwargs.pop("health_check_interval", None)
    if len(target.seeds) > 1:
        kwargs["startup_nodes"] = [AsyncClusterNode(host, port) for host, port in target.seeds]
    return _AsyncCluster.from_url(target.url, **kwargs)


def is_cluster_url(url: str) -> bool:
    return parse_redis_url(url).cluster


def is_cluster_client(redis_client: Any) -> bool:
    return isinstance(redis_client, (RedisCluster, AsyncRedisCluster))
