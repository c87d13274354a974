"""The dashboard's web application (Starlette): the page, its JSON and event stream, the actions
and ``/metrics``.

Reads are served from the sampler's latest status (no Redis command per request); the paged
lists (slow sites, dead letters, rejected seeds) read one page from Redis, a bounded number of
commands. Actions reuse the commands' own functions (``control``, ``deadletters``, ``seed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from distcrawl.commands import control, deadletters, seed
from distcrawl.frontier import connection
from distcrawl.frontier.store import FrontierKeys
from distcrawl.ops.status import (
    DEFAULT_PAGE_PRIORITIES,
    in_flight_by_shard,
    in_flight_of,
    record_site,
    site_budget,
    site_status,
)
from distcrawl.web.metrics import CONTENT_TYPE, render_metrics
from distcrawl.web.sampler import DEFAULT_INTERVAL, Sampler
from distcrawl.web.security import Guard
from distcrawl.web.store import ProductStore

__all__ = ["WebConfig", "create_app"]

#: rows per page of the paged lists, and the most a client may ask for
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
#: dead-letter records HSCAN reads per call while filling one page (bounded work per request)
_DEAD_SCAN_COUNT = 200
_DEAD_SCAN_CALLS = 5
#: seeds one POST may push
MAX_SEEDS = 1000
#: seconds an idle event stream waits before a keep-alive comment
_KEEPALIVE = 15.0

_HERE = resources.files("distcrawl.web")
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


@dataclass
class WebConfig:
    """What the dashboard needs to know about the crawl it shows."""

    keys: FrontierKeys
    redis_url: str
    heartbeat_timeout: float
    token: str | None = None
    page_priorities: Mapping[str, int] = field(default_factory=lambda: DEFAULT_PAGE_PRIORITIES)
    allow_private: bool | frozenset[str] = False
    interval: float = DEFAULT_INTERVAL
    store: ProductStore | None = None


class _SecurityHeaders:
    """Adds CSP and friends to every response: even text that escaped escaping cannot run."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _int_arg(request: Request, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        value = default
    return max(low, min(high, value))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def create_app(config: WebConfig) -> Starlette:
    guard = Guard(token=config.token or None)
    keys = config.keys
    aclient, sclient = _clients(config.redis_url)
    store = config.store
    sampler = Sampler(
        client=aclient,
        keys=keys,
        heartbeat_timeout=config.heartbeat_timeout,
        page_priorities=config.page_priorities,
        interval=config.interval,
        count_products=store.count if store is not None else None,
    )
    template = _HERE.joinpath("templates", "index.html").read_text("utf-8")

    def state() -> dict[str, Any]:
        return {
            "status": sampler.status,
            "store": sampler.store,
            "error": sampler.error,
            "writable": guard.writable,
        }

    # ------------------------------------------------------------------ reads

    async def index(request: Request) -> Response:
        page = template.replace("{{crawl}}", html.escape(keys.spider))
        page = page.replace("{{csrf}}", html.escape(guard.csrf))
        page = page.replace("{{writable}}", "1" if guard.writable else "0")
        return HTMLResponse(page)

    async def api_status(request: Request) -> Response:
        return JSONResponse(state())

    async def api_series(request: Request) -> Response:
        return JSONResponse(sampler.series())

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            first = {**state(), "series": sampler.series()}
            yield f"event: snapshot\ndata: {json.dumps(first)}\n\n"
            while True:
                await sampler.wait_change(_KEEPALIVE)
                if await request.is_disconnected():
                    return
                series = sampler.series()
                update = {**state(), "point": series[-1] if series else None}
                yield f"event: status\ndata: {json.dumps(update)}\n\n"

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    async def metrics(request: Request) -> Response:
        return Response(render_metrics(sampler), media_type=CONTENT_TYPE)

    async def api_sites(request: Request) -> Response:
        """``order=busiest``: the status' busiest sites (top N), paged; ``order=slowest``: every
        site waiting for its budget, the one waiting longest first, one page read from Redis."""
        per_page = _int_arg(request, "per_page", DEFAULT_PAGE_SIZE, 1, 20)
        page = _int_arg(request, "page", 0, 0, 1_000_000)
        if request.query_params.get("order", "busiest") != "slowest":
            rows = (sampler.status or {}).get("sites", [])
            start = page * per_page
            return JSONResponse(
                {"total": len(rows), "page": page, "rows": rows[start : start + per_page]}
            )
        # each shard's longest-waiting sites down to this page, merged: a bounded read
        shards = _shards(keys)
        pipe = aclient.pipeline(transaction=False)
        for shard in shards:
            pipe.zcard(shard.waiting)
            pipe.zrevrange(shard.waiting, 0, (page + 1) * per_page - 1, withscores=True)
        replies = await pipe.execute()
        total = sum(int(n) for n in replies[0::2])
        ranked = sorted(
            ((float(score), _text(site)) for chunk in replies[1::2] for site, score in chunk),
            reverse=True,
        )
        sites = [site for _, site in ranked[page * per_page : (page + 1) * per_page]]
        pipe = aclient.pipeline(transaction=False)
        for site in sites:
            pipe.hgetall(keys.site(site))
            pipe.zcard(keys.wait(site))
        by_shard = in_flight_by_shard((keys.site_keys(site), site) for site in sites)
        for key, names in by_shard.items():
            pipe.hmget(key, names)
        replies = await pipe.execute() if sites else []
        in_flight = in_flight_of(by_shard, replies[2 * len(sites) :])
        budgets = {
            site: site_budget(replies[2 * i], in_flight.get(site)) for i, site in enumerate(sites)
        }
        waiting = {site: int(replies[2 * i + 1]) for i, site in enumerate(sites)}
        rows = site_status({"site_budgets": budgets, "waiting": waiting})
        order = {site: i for i, site in enumerate(sites)}
        rows.sort(key=lambda r: order.get(r["site"], 0))
        return JSONResponse({"total": total, "page": page, "rows": rows})

    async def api_deadletters(request: Request) -> Response:
        """One page of dead-letter records, filtered by reason and site, read with a bounded
        number of calls (HLEN per shard, then a few HSCAN); ``cursor`` (``shard:cursor``, as
        the last page returned it) continues where that page stopped; null after the last."""
        limit = _int_arg(request, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        shards = _shards(keys)
        shard, cursor = _dead_cursor(request.query_params.get("cursor", ""), len(shards))
        reason = request.query_params.get("reason") or None
        site = (request.query_params.get("site") or "").lower() or None
        rows: list[dict[str, Any]] = []
        pipe = aclient.pipeline(transaction=False)
        for each in shards:
            pipe.hlen(each.dead)
        sizes = [int(n) for n in await pipe.execute()]
        for _ in range(_DEAD_SCAN_CALLS):
            while shard < len(shards) and not sizes[shard]:  # skip the empty shards
                shard, cursor = shard + 1, 0
            if shard >= len(shards):
                break
            reply: Any = await aclient.hscan(shards[shard].dead, cursor, count=_DEAD_SCAN_COUNT)
            cursor, chunk = int(reply[0]), reply[1]
            for dead_id, raw in chunk.items():
                record = _dead_record(raw)
                if reason and str(record.get("reason")) != reason:
                    continue
                if site and record_site(record).lower() != site:
                    continue
                rows.append({"id": _text(dead_id), "site": record_site(record), **record})
            if cursor == 0:
                shard += 1
            if shard >= len(shards) or len(rows) >= limit:
                break
        while shard < len(shards) and not sizes[shard]:
            shard, cursor = shard + 1, 0
        more = f"{shard}:{cursor}" if shard < len(shards) else None
        return JSONResponse({"rows": rows[:limit], "cursor": more})

    async def api_rejected(request: Request) -> Response:
        per_page = _int_arg(request, "per_page", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        page = _int_arg(request, "page", 0, 0, 1_000_000)
        pipe = aclient.pipeline(transaction=False)
        pipe.llen(keys.rejected)
        pipe.lrange(keys.rejected, page * per_page, (page + 1) * per_page - 1)
        total, raws = await pipe.execute()
        rows = []
        for raw in raws:
            record = _dead_record(raw)
            entry = record.get("raw")
            rows.append(
                {
                    "raw": _text(entry)[:500] if entry is not None else _text(raw)[:500],
                    "reason": str(record.get("reason") or "unknown"),
                    "kind": record.get("kind"),
                    "node": record.get("node"),
                    "at": record.get("at"),
                }
            )
        return JSONResponse({"total": int(total), "page": page, "rows": rows})

    async def api_products(request: Request) -> Response:
        limit = _int_arg(request, "limit", DEFAULT_PAGE_SIZE, 1, 50)
        if store is None:
            return JSONResponse({"configured": False, "rows": []})
        rows = await asyncio.to_thread(store.latest, limit)
        return JSONResponse({"configured": True, "reachable": rows is not None, "rows": rows or []})

    # ------------------------------------------------------------------ actions

    async def _body(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def action(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            refused = guard.refusal(request)
            if refused is not None:
                return JSONResponse({"ok": False, "error": refused[1]}, status_code=refused[0])
            try:
                outcome = await handler(await _body(request))
            except (redis.RedisError, OSError) as exc:
                return JSONResponse({"ok": False, "error": f"Redis: {exc}"}, status_code=503)
            except ValueError as exc:
                return JSONResponse({"ok": False, "error": str(exc)}, status_code=400)
            return JSONResponse({"ok": True, **outcome})

        return endpoint

    async def do_pause(body: dict[str, Any]) -> dict[str, Any]:
        outcome = await asyncio.to_thread(control.pause, sclient, keys)
        await sampler.refresh()
        return outcome

    async def do_resume(body: dict[str, Any]) -> dict[str, Any]:
        outcome = await asyncio.to_thread(control.resume, sclient, keys)
        await sampler.refresh()
        return outcome

    async def do_requeue(body: dict[str, Any]) -> dict[str, Any]:
        ids = body.get("ids")
        reason = body.get("reason")
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError("ids must be a list of dead-letter ids")
            wanted = ids
        elif isinstance(reason, str) and reason:

            def by_reason() -> list[str]:
                found = deadletters.matching(sclient, keys, sites=[], reasons=[reason])
                return [dead_id for dead_id, _ in found]

            wanted = await asyncio.to_thread(by_reason)
        else:
            raise ValueError("give the dead letters to re-queue: ids, or a reason")
        moved = await asyncio.to_thread(deadletters.requeue, sclient, keys, wanted)
        return {"requeued": moved, "asked": len(wanted)}

    async def do_seed(body: dict[str, Any]) -> dict[str, Any]:
        urls = body.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ValueError("urls must be a list of seeds (URLs or JSON seeds)")
        raws = [u.strip() for u in urls if u.strip()]
        if not raws:
            raise ValueError("no seeds given")
        if len(raws) > MAX_SEEDS:
            raise ValueError(f"at most {MAX_SEEDS} seeds per request")
        accepted, refused = seed.check(((r, r) for r in raws), allow=config.allow_private)
        if accepted:
            await asyncio.to_thread(sclient.lpush, keys.start_urls, *accepted)
        return {"queued": len(accepted), "refused": refused}

    # ------------------------------------------------------------------ the app

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler.start()
        try:
            yield
        finally:
            await sampler.stop()
            await aclient.aclose()
            sclient.close()
            if store is not None:
                store.close()

    static = StaticFiles(directory=str(_HERE.joinpath("static")))
    app = Starlette(
        routes=[
            Route("/", index),
            Route("/api/status", api_status),
            Route("/api/series", api_series),
            Route("/api/sites", api_sites),
            Route("/api/deadletters", api_deadletters),
            Route("/api/rejected", api_rejected),
            Route("/api/products", api_products),
            Route("/events", events),
            Route("/metrics", metrics),
            Route("/api/pause", action(do_pause), methods=["POST"]),
            Route("/api/resume", action(do_resume), methods=["POST"]),
            Route("/api/deadletters/requeue", action(do_requeue), methods=["POST"]),
            Route("/api/seed", action(do_seed), methods=["POST"]),
            Mount("/static", app=static, name="static"),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(_SecurityHeaders)
    app.state.sampler = sampler
    app.state.guard = guard
    return app


def _clients(url: str) -> tuple[Any, Any]:
    """An asyncio client (the sampler, the paged lists) and a blocking one (the actions, which
    reuse the commands' functions): the project's own, Redis Cluster aware."""
    return (
        connection.async_client(url, socket_timeout=30),
        connection.client(url, socket_timeout=30),
    )


def _shards(keys: FrontierKeys) -> list[Any]:
    """The crawl's shards (each with ``dead``, ``waiting``, ...); the crawl itself when its
    keys have no shards."""
    all_shards = getattr(keys, "all_shards", None)
    return list(all_shards()) if all_shards is not None else [keys]


def _dead_cursor(raw: str, shards: int) -> tuple[int, int]:
    """``shard:cursor`` of a dead-letter page (anything else: the first page)."""
    shard, _, cursor = raw.partition(":")
    try:
        position = int(shard), int(cursor)
    except ValueError:
        return 0, 0
    return position if 0 <= position[0] < shards and position[1] >= 0 else (0, 0)


def _dead_record(raw: Any) -> dict[str, Any]:
    """A dead-letter or rejected record without its request payload (long, only for
    re-queueing); an unreadable one says so."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError, TypeError):
        return {"reason": "unreadable_record"}
    if not isinstance(value, dict):
        return {"reason": "unreadable_record"}
    return {k: v for k, v in value.items() if k != "request"}
