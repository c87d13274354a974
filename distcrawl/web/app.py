"""The dashboard's web application (Starlette): the page, its JSON and event stream, the actions
and ``/metrics``.

Reads are served from the sampler's latest status (no Redis command per request); the paged
lists (slow sites, dead letters, rejected seeds) read one page from Redis, a bounded number of
commands. Reads and actions are those of the operations layer (:mod:`distcrawl.ops`), the
same the command line uses.
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
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from distcrawl.frontier import connection
from distcrawl.frontier.keys import FrontierKeys
from distcrawl.ops import control, deadletters, errors, seeds, sites
from distcrawl.ops.bands import DEFAULT_PAGE_PRIORITIES
from distcrawl.ops.products import ProductStore
from distcrawl.ops.reads import arun
from distcrawl.ops.status import DEFAULT_REVISIT_GRACE, products_accounted
from distcrawl.storage.observe import ObserveStore
from distcrawl.web.metrics import CONTENT_TYPE, render_metrics
from distcrawl.web.sampler import DEFAULT_INTERVAL, Sampler
from distcrawl.web.security import Guard, HostCheck
from distcrawl.web.snapshots import snapshot_page

__all__ = ["WebConfig", "create_app"]

#: rows per page of the paged lists, and the most a client may ask for
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
#: dead-letter records HSCAN reads per call while filling one page, and the most calls a page
#: makes (bounded work per request)
_DEAD_SCAN_COUNT = 200
_DEAD_SCAN_CALLS = 5
#: seeds one POST may push
MAX_SEEDS = 1000
#: characters of a refused entry shown
_RAW_SHOWN = 500
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
    revisit_grace: float = DEFAULT_REVISIT_GRACE
    allow_private: bool | frozenset[str] = False
    interval: float = DEFAULT_INTERVAL
    store: ProductStore | None = None
    #: host names the dashboard answers to besides loopback names or IP addresses
    #: (``DISTCRAWL_WEB_HOSTS``; see :class:`~distcrawl.web.security.HostCheck`)
    hosts: tuple[str, ...] = ()
    #: MongoDB's error snapshots (None: the groups are listed without them)
    observe: ObserveStore | None = None


class _Hosts:
    """Answers 421 (400) to a request whose ``Host`` the dashboard does not serve, before
    anything else sees it: no page, no data, no CSRF value for a rebound name."""

    def __init__(self, app: ASGIApp, check: HostCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = self.check.refusal(Headers(scope=scope).get("host"))
            if refused is not None:
                status, why = refused
                await PlainTextResponse(why, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


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


def create_app(
    config: WebConfig, *, bind: str | None = None, addresses: tuple[str, ...] = ()
) -> Starlette:
    """The dashboard's app; ``bind``: the address it listens on, whose ``Host`` names it
    answers to (None: any, for an app mounted behind a server that checks them);
    ``addresses``: where it listens (``host:port``), recorded in the crawl for its nodes."""
    guard = Guard(token=config.token or None)
    keys = config.keys
    aclient, sclient = _clients(config.redis_url)
    store = config.store
    sampler = Sampler(
        client=aclient,
        keys=keys,
        heartbeat_timeout=config.heartbeat_timeout,
        page_priorities=config.page_priorities,
        revisit_grace=config.revisit_grace,
        interval=config.interval,
        store_figures=store.figures if store is not None else None,
        addresses=addresses,
    )
    template = _HERE.joinpath("templates", "index.html").read_text("utf-8")

    def state() -> dict[str, Any]:
        status = sampler.status
        accounted = None
        if status is not None and sampler.store.get("configured"):
            accounted = products_accounted({**status, "store": sampler.store})
        return {
            "status": status,
            "store": sampler.store,
            "products_accounted": accounted,
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
        defaults = (sampler.status or {}).get("site_defaults")
        found = await arun(aclient, sites.slowest(keys, page, per_page, defaults=defaults))
        return JSONResponse({"total": found.total, "page": page, "rows": found.rows})

    async def api_deadletters(request: Request) -> Response:
        """One page of dead-letter records, filtered by reason and site, read with a bounded
        number of calls (HLEN per shard, then a few HSCAN); ``cursor`` (as the last page
        returned it) continues where that page stopped; null after the last."""
        limit = _int_arg(request, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        query = request.query_params
        found = await deadletters.apage(
            aclient,
            keys,
            deadletters.Filter.of([query.get("site") or ""], [query.get("reason") or ""]),
            start=deadletters.Cursor.parse(query.get("cursor", ""), keys.shards),
            limit=limit,
            calls=_DEAD_SCAN_CALLS,
            count=_DEAD_SCAN_COUNT,
        )
        rows = [letter.summary() for letter in found.letters]
        more = str(found.next) if found.next is not None else None
        return JSONResponse({"rows": rows, "cursor": more})

    async def api_rejected(request: Request) -> Response:
        per_page = _int_arg(request, "per_page", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        page = _int_arg(request, "page", 0, 0, 1_000_000)
        found = await deadletters.arefused(aclient, keys, page, per_page)
        rows = [{**entry, "raw": entry["raw"][:_RAW_SHOWN]} for entry in found.entries]
        return JSONResponse({"total": found.total, "page": page, "rows": rows})

    async def api_products(request: Request) -> Response:
        limit = _int_arg(request, "limit", DEFAULT_PAGE_SIZE, 1, 50)
        if store is None:
            return JSONResponse({"configured": False, "rows": []})
        rows = await asyncio.to_thread(store.latest, limit)
        return JSONResponse({"configured": True, "reachable": rows is not None, "rows": rows or []})

    async def api_errors(request: Request) -> Response:
        """The crawl's error groups, the most failures first, each with its first
        occurrence's summary (``limit``, ``site``): one read of the groups, one of MongoDB."""
        limit = _int_arg(request, "limit", 20, 1, 1000)
        site = request.query_params.get("site") or ""

        def read() -> dict[str, Any]:
            found = errors.list_groups(
                sclient, keys, mongo=config.observe, sites=[site] if site else []
            )
            total = len(found["groups"])
            return {**found, "total": total, "groups": found["groups"][:limit]}

        return JSONResponse(await asyncio.to_thread(read))

    async def _group(request: Request) -> tuple[Any, Any] | Response:
        wanted = request.path_params["group"]
        try:
            return await asyncio.to_thread(
                errors.find_group, sclient, keys, wanted, mongo=config.observe
            )
        except (errors.GroupNotFound, errors.AmbiguousGroup) as exc:
            return PlainTextResponse(str(exc), status_code=404)

    async def error_page(request: Request) -> Response:
        """A group and its first occurrence as a page (every value escaped)."""
        found = await _group(request)
        if isinstance(found, Response):
            return found
        group, snapshot = found
        return HTMLResponse(snapshot_page(keys.spider, group, snapshot))

    async def error_body(request: Request) -> Response:
        """The first occurrence's body as an attachment in plain text: never rendered."""
        found = await _group(request)
        if isinstance(found, Response):
            return found
        group, snapshot = found
        if snapshot is None:
            return PlainTextResponse("no snapshot of this group is kept", status_code=404)
        return Response(
            snapshot.body,
            media_type="text/plain; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{group.id}.body.txt"'},
        )

    async def api_error(request: Request) -> Response:
        found = await _group(request)
        if isinstance(found, Response):
            return found
        group, snapshot = found
        shot = snapshot.as_dict() if snapshot is not None else None
        return JSONResponse({**group.as_dict(), "snapshot": shot})

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
                found = deadletters.matching(sclient, keys, reasons=[reason])
                return [letter.id for letter in found]

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
        checked = seeds.check(((r, r) for r in raws), allow=config.allow_private)
        if checked.accepted:
            await asyncio.to_thread(seeds.push, sclient, keys, checked.accepted)
        return {"queued": len(checked.accepted), "refused": checked.refused}

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
            if config.observe is not None:
                config.observe.close()

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
            Route("/api/errors", api_errors),
            Route("/api/errors/{group}", api_error),
            Route("/errors/{group}", error_page),
            Route("/errors/{group}/body", error_body),
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
    if bind is not None:
        app.add_middleware(_Hosts, check=HostCheck.of(bind, config.hosts))
    app.add_middleware(_SecurityHeaders)  # outermost: refusals carry its headers too
    app.state.sampler = sampler
    app.state.guard = guard
    return app


def _clients(url: str) -> tuple[Any, Any]:
    """An asyncio client (the sampler, the paged lists) and a blocking one (the actions): the
    project's own, Redis Cluster aware."""
    return (
        connection.async_client(url, socket_timeout=30),
        connection.client(url, socket_timeout=30),
    )
