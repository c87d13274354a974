// distcrawl dashboard: live status over server-sent events, charts with uPlot.
// Everything from the crawl (names, URLs, error texts) is put in the page with textContent,
// never as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).content;
  const CSRF = meta("csrf-token");
  const WRITABLE = meta("writable") === "1";
  const NODES_PER_PAGE = 25;
  const POLL_MS = 3000;
  const HISTORY = 600;

  const state = { status: null, store: {}, nodesPage: 0, sitesOrder: "busiest", sitesPage: 0,
    deadReason: "", deadSite: "", deadCursor: "", deadNext: null, rejectedPage: 0 };

  // ------------------------------------------------------------------ formatting
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "-";
    if (typeof v !== "number") return String(v);
    const d = digits === undefined ? (Math.abs(v) >= 10 || Number.isInteger(v) ? 0 : 1) : digits;
    return v.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: 0 });
  }
  function duration(s) {
    if (s === null || s === undefined) return "unknown";
    if (s < 10) return s.toFixed(1) + "s";
    s = Math.round(s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d";
  }
  function setText(id, text) { $(id).textContent = text; }
  function td(tr, text, cls) {
    const cell = document.createElement("td");
    cell.textContent = text === null || text === undefined ? "-" : String(text);
    if (cls) cell.className = cls;
    tr.appendChild(cell);
    return cell;
  }
  function fill(tbody, rows, render, empty) {
    const frag = document.createDocumentFragment();
    for (const row of rows) {
      const tr = document.createElement("tr");
      render(tr, row);
      frag.appendChild(tr);
    }
    if (!rows.length) {
      const tr = document.createElement("tr");
      td(tr, empty || "none", "dim").colSpan = 9;
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
  }

  // ------------------------------------------------------------------ charts
  const COLOURS = ["#2763c4", "#d9822b", "#2e9e4f", "#b3261e", "#7b4bc4", "#0f8a8a", "#c4278e", "#7a6a00", "#555", "#999"];
  const charts = { frontier: null, rates: null };
  let frontierKeys = [];
  let rateNodes = [];
  const history = [];

  function width(el) { return Math.max(300, el.clientWidth - 4); }
  function makeChart(el, labels) {
    const series = [{}].concat(labels.map((label, i) => ({ label, stroke: COLOURS[i % COLOURS.length], width: 2 })));
    const data = [[]].concat(labels.map(() => []));
    el.replaceChildren();
    return new uPlot({ width: width(el), height: 240, series, scales: { x: { time: true } },
      axes: [{}, { size: 60 }], legend: { live: false } }, data, el);
  }
  function frontierSeries(p) {
    return Object.keys(p.queued_by_kind).map((k) => "queued " + k).concat(["parked", "in flight"]);
  }
  function rebuildCharts() {
    if (!history.length) return;
    const last = history[history.length - 1];
    const fk = frontierSeries(last);
    const nodes = Object.keys(last.nodes || {}).sort();
    if (!charts.frontier || fk.join() !== frontierKeys.join()) {
      frontierKeys = fk;
      charts.frontier = makeChart($("chart-frontier"), fk);
    }
    if (!charts.rates || nodes.join() !== rateNodes.join()) {
      rateNodes = nodes;
      charts.rates = makeChart($("chart-rates"), ["responses/s total", "products/s total"].concat(nodes.map((n) => "responses/s " + n)));
    }
    const kinds = Object.keys(last.queued_by_kind);
    const f = [history.map((p) => p.t)];
    for (const k of kinds) f.push(history.map((p) => (p.queued_by_kind || {})[k] ?? null));
    f.push(history.map((p) => p.parked));
    f.push(history.map((p) => p.in_flight));
    charts.frontier.setData(f);
    const r = [history.map((p) => p.t), history.map((p) => p.responses_per_s), history.map((p) => p.products_per_s)];
    for (const n of rateNodes) r.push(history.map((p) => (p.nodes || {})[n] ?? null));
    charts.rates.setData(r);
    $("chart-frontier").dataset.points = String(history.length);
    $("chart-rates").dataset.points = String(history.length);
  }
  function addPoint(p) {
    if (!p) return;
    if (history.length && history[history.length - 1].t >= p.t) return;
    history.push(p);
    while (history.length > HISTORY) history.shift();
    rebuildCharts();
  }
  window.addEventListener("resize", () => {
    for (const [id, c] of [["chart-frontier", charts.frontier], ["chart-rates", charts.rates]]) {
      if (c) c.setSize({ width: width($(id)), height: 240 });
    }
  });

  // ------------------------------------------------------------------ the status
  function render(msg) {
    const s = msg.status;
    state.status = s;
    state.store = msg.store || {};
    const err = $("error");
    err.hidden = !msg.error;
    err.textContent = msg.error || "";
    if (!s) return;
    const f = s.frontier, t = s.totals;
    const badge = $("state");
    // the crawl's state and every node state any node is in, as `status` says them
    badge.textContent = s.state;
    badge.className = "badge " + s.state;
    const others = Object.entries(t.nodes_by_state || {}).filter(([k, v]) => v && k !== "live");
    setText("nodes-summary", [`${t.live_nodes} live`].concat(others.map(([k, v]) => `${v} ${k}`)).join(", ") + " nodes");
    setText("updated", "Redis time " + new Date(s.server_time_ms).toLocaleTimeString());
    setText("queued", num(f.queued));
    setText("queued-kinds", Object.entries(f.queued_by_kind).map(([k, v]) => `${k} ${num(v)}`).join(", "));
    setText("parked", num(f.parked));
    setText("in-flight", num(f.in_flight));
    setText("seen", num(f.seen));
    // the rates `status` shows (the nodes' own, over the last minute); the chart follows the
    // crawl more closely (10 s)
    const why = s.unreadable || {};
    setText("responses-rate", t.responses_per_min === null ? "-" : num(t.responses_per_min / 60, 1));
    setText("products-rate", t.products_per_min === null ? "-" : num(t.products_per_min / 60, 1));
    setText("responses-total", t.responses_per_min === null && why.rates ? why.rates : num(t.responses) + " responses");
    setText("products-total", num(t.products) + " products counted by the nodes");
    setText("eta", s.drained ? "drained" : s.revisit ? "continuous" : duration(s.eta_seconds));
    setText("backlog", why.eta_seconds || "backlog " + num(f.backlog));
    setText("dead", num(s.dead_letters.total));
    setText("rejected", num(f.rejected));
    const st = state.store;
    // this crawl's products (seen since its start) apart from the collection's, of every crawl
    if (!st.configured) { setText("stored", "-"); setText("store-state", "not watched"); }
    else {
      setText("stored", num(st.this_crawl));
      const total = st.in_collection === null || st.in_collection === undefined ? "" :
        `${num(st.in_collection)} in ${st.collection} (every crawl); `;
      setText("store-state", st.reachable ? total + `writing ${num(st.writes_per_s, 1)}/s` +
        (st.this_crawl === null && st.error ? `; ${st.error}` : "") :
        "OUTAGE since " + new Date(st.outage_since * 1000).toLocaleTimeString() + ": " + (st.error || "MongoDB unreachable"));
    }
    const acc = msg.products_accounted;
    setText("accounted", acc && acc.difference ? `the nodes counted ${num(acc.counted_by_nodes)}; this crawl stored ${num(acc.stored_by_this_crawl)}: ${acc.why.join("; ")}` : "");
    const mem = s.redis_memory;
    if (!mem) { setText("redis-memory", "-"); setText("redis-memory-state", why.redis_memory || "INFO not readable"); }
    else {
      const mb = (n) => num(n / 1048576) + " MB";
      setText("redis-memory", mem.maxmemory_bytes ? `${Math.round(mem.used_share * 100)}%` : mb(mem.used_bytes));
      setText("redis-memory-state", mem.warning ||
        (mem.maxmemory_bytes ? `${mb(mem.used_bytes)} of ${mb(mem.maxmemory_bytes)}, ${mem.policy}` : "no maxmemory"));
    }
    renderNodes();
    renderFindings(s.findings || { total: 0, latest: [] });
    if (state.sitesOrder === "busiest") renderSites(pageOf(s.sites, state.sitesPage, 10), s.sites.length);
    renderDeadCounts(s.dead_letters);
  }

  function pageOf(rows, page, per) { return rows.slice(page * per, (page + 1) * per); }

  function renderNodes() {
    const nodes = state.status.nodes;
    const pages = Math.max(1, Math.ceil(nodes.length / NODES_PER_PAGE));
    state.nodesPage = Math.min(state.nodesPage, pages - 1);
    setText("nodes-count", `${nodes.length} node(s)`);
    setText("nodes-page", `${state.nodesPage + 1} / ${pages}`);
    fill($("nodes-body"), pageOf(nodes, state.nodesPage, NODES_PER_PAGE), (tr, n) => {
      tr.className = n.state;
      td(tr, n.node);
      td(tr, n.state + (n.recovered ? " (recovered)" : ""));
      td(tr, n.heartbeat_age_s === null ? "-" : duration(n.heartbeat_age_s) + " ago", "num");
      td(tr, num(n.in_flight), "num");
      td(tr, num(n.responses), "num");
      td(tr, num(n.products), "num");
      td(tr, num(n.responses_per_min), "num");
      td(tr, num(n.errors), "num");
      td(tr, num(n.journal_held), "num");
    }, "no nodes yet");
  }

  function renderSites(rows, total) {
    setText("sites-page", `${state.sitesPage + 1} / ${Math.max(1, Math.ceil(total / 10))} (${num(total)} sites)`);
    fill($("sites-body"), rows, (tr, s) => {
      td(tr, s.site);
      td(tr, num(s.responses_per_min || 0), "num");
      // the limit in force: the site's own, or the live nodes' default (as `status` says it)
      const defaults = (state.status || {}).site_defaults || {};
      td(tr, s.limit_rate !== null ? num(s.limit_rate) + (s.limit_rate_from === "default" ? " default" : "") :
        defaults.rate === null || defaults.rate === undefined ? "?" : "none", "num");
      td(tr, s.allowed_rate === null ? "-" : num(s.allowed_rate), "num");
      td(tr, s.factor.toFixed(2), "num");
      td(tr, s.crawl_delay_s === null || s.crawl_delay_s === undefined ? "-" : num(s.crawl_delay_s), "num");
      td(tr, num(s.in_flight), "num");
      td(tr, num(s.waiting), "num");
      // its hold, Crawl-delay and cut (cause, when, factor, when it wears off), as `status` says it
      const why = s.slower_because || (s.cut ? s.cut.why : "");
      td(tr, why, s.hold ? "held " + s.hold.cause : (s.cut ? "cut " + s.cut.cause : ""));
    }, "no busy site");
  }

  function filterLink(tr, text, onClick) {
    const cell = td(tr, "");
    const a = document.createElement("a");
    a.className = "filter";
    a.textContent = text;
    a.addEventListener("click", onClick);
    cell.appendChild(a);
  }
  function renderDeadCounts(d) {
    const reasons = Object.entries(d.by_reason).sort((a, b) => b[1] - a[1]).slice(0, 20);
    fill($("dead-reasons"), reasons, (tr, [reason, n]) => {
      filterLink(tr, reason, () => { state.deadReason = reason; state.deadSite = ""; loadDead(""); });
      td(tr, num(n), "num");
    });
    const sites = Object.entries(d.by_site).sort((a, b) => b[1] - a[1]);
    fill($("dead-sites"), sites, (tr, [site, n]) => {
      filterLink(tr, site, () => { state.deadSite = site; state.deadReason = ""; loadDead(""); });
      td(tr, num(n), "num");
    });
  }

  function renderFindings(f) {
    setText("findings-count", f.total ? `${num(f.total)} (latest first)` : "");
    fill($("findings-body"), f.latest, (tr, x) => {
      tr.className = "finding";
      td(tr, x.message);
      td(tr, x.baseline === "last_crawl" ? "against the last crawl" : "against earlier products", "dim");
    }, "none: every watched field holds its share");
  }

  // ------------------------------------------------------------------ paged lists
  async function getJSON(url) {
    const res = await fetch(url, { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    return res.json();
  }
  async function loadSites() {
    if (state.sitesOrder !== "slowest") return;
    const data = await getJSON(`/api/sites?order=slowest&page=${state.sitesPage}&per_page=10`);
    renderSites(data.rows, data.total);
  }
  async function loadDead(cursor) {
    state.deadCursor = cursor;
    const q = new URLSearchParams({ cursor: cursor || "", limit: "20" });
    if (state.deadReason) q.set("reason", state.deadReason);
    if (state.deadSite) q.set("site", state.deadSite);
    const data = await getJSON("/api/deadletters?" + q);
    state.deadNext = data.cursor;
    setText("dead-filter", state.deadReason ? `reason ${state.deadReason}` : state.deadSite ? `site ${state.deadSite}` : "");
    $("requeue-reason").hidden = !(WRITABLE && state.deadReason);
    $("dead-more").disabled = data.cursor === null;
    fill($("dead-body"), data.rows, (tr, r) => {
      td(tr, r.id);
      td(tr, r.reason);
      td(tr, r.site);
      td(tr, r.url, "url");
      td(tr, r.attempts, "num");
      td(tr, [r.status ? "HTTP " + r.status : "", r.node || ""].filter(Boolean).join(" · "));
      const cell = td(tr, "");
      if (WRITABLE) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = "re-queue";
        b.addEventListener("click", () => act("/api/deadletters/requeue", { ids: [r.id] }));
        cell.appendChild(b);
      }
    });
  }
  async function loadRejected() {
    const data = await getJSON(`/api/rejected?page=${state.rejectedPage}&per_page=10`);
    setText("rejected-page", `${state.rejectedPage + 1} / ${Math.max(1, Math.ceil(data.total / 10))}`);
    fill($("rejected-body"), data.rows, (tr, r) => {
      td(tr, r.raw, "url");
      td(tr, r.reason);
      td(tr, r.kind);
      td(tr, r.node);
    });
  }
  async function loadProducts() {
    const data = await getJSON("/api/products?limit=10");
    fill($("products-body"), data.rows, (tr, p) => {
      td(tr, p.name);
      td(tr, p.price === null ? "-" : `${p.price} ${p.currency || ""}`);
      td(tr, p.url, "url");
    }, data.configured ? (data.reachable ? "no product yet" : "MongoDB unreachable") : "not watched");
  }
  async function loadGroups() {
    const data = await getJSON("/api/errors?limit=20");
    setText("groups-count", data.total ? `${num(data.total)} group(s), ${data.groups.length} shown` : "");
    fill($("groups-body"), data.groups, (tr, g) => {
      td(tr, g.kind);
      td(tr, g.site || "(any site)");
      td(tr, num(g.count), "num");
      td(tr, g.last_seen_ms ? new Date(g.last_seen_ms).toLocaleTimeString() : "-");
      td(tr, g.template, "url");
      // the link names the group by its id: the page shows what was kept of its first occurrence
      const cell = td(tr, "");
      const a = document.createElement("a");
      a.href = "/errors/" + encodeURIComponent(g.id);
      a.className = "snapshot";
      a.textContent = g.snapshot ? "snapshot" : "details";
      cell.appendChild(a);
    }, "no error so far");
  }
  async function poll() {
    try {
      await Promise.all([loadSites(), loadDead(state.deadCursor), loadRejected(), loadProducts(), loadGroups()]);
    } catch (e) {
      $("error").hidden = false;
      $("error").textContent = "dashboard: " + e.message;
    }
  }

  // ------------------------------------------------------------------ actions
  const tokenInput = $("token");
  tokenInput.value = sessionStorage.getItem("distcrawl-token") || "";
  tokenInput.addEventListener("change", () => sessionStorage.setItem("distcrawl-token", tokenInput.value));
  async function act(url, body) {
    const msg = $("action-msg");
    msg.className = "";
    msg.textContent = "…";
    const res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": CSRF,
        Authorization: "Bearer " + tokenInput.value },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try { data = await res.json(); } catch (e) { data = { error: `HTTP ${res.status}` }; }
    if (res.ok) {
      msg.className = data.refused && data.refused.length ? "refused" : "ok";
      msg.textContent = "done: " + url.replace("/api/", "") + (data.requeued !== undefined ? `, ${data.requeued} re-queued` : "") +
        (data.queued !== undefined ? `, ${data.queued} queued, ${data.refused.length} refused` : "");
      if (data.refused && data.refused.length) msg.textContent += " (" + data.refused.map((r) => `${r.seed}: ${r.reason}`).join("; ") + ")";
    } else {
      msg.className = "refused";
      msg.textContent = "refused: " + (data.error || `HTTP ${res.status}`);
    }
    poll();
    return res.ok;
  }
  if (!WRITABLE) {
    $("readonly").hidden = false;
    for (const id of ["pause", "resume", "seed", "token"]) $(id).disabled = true;
  }
  $("pause").addEventListener("click", () => act("/api/pause"));
  $("resume").addEventListener("click", () => act("/api/resume"));
  $("seed").addEventListener("click", () => {
    const urls = $("seeds").value.split("\n").map((s) => s.trim()).filter(Boolean);
    act("/api/seed", { urls });
  });
  $("requeue-reason").addEventListener("click", () => act("/api/deadletters/requeue", { reason: state.deadReason }));
  $("dead-clear").addEventListener("click", () => { state.deadReason = ""; state.deadSite = ""; loadDead(""); });
  $("dead-first").addEventListener("click", () => loadDead(""));
  $("dead-more").addEventListener("click", () => loadDead(state.deadNext));
  $("nodes-prev").addEventListener("click", () => { state.nodesPage = Math.max(0, state.nodesPage - 1); if (state.status) renderNodes(); });
  $("nodes-next").addEventListener("click", () => { state.nodesPage += 1; if (state.status) renderNodes(); });
  function sitesTab(order) {
    state.sitesOrder = order;
    state.sitesPage = 0;
    $("sites-busiest").setAttribute("aria-pressed", String(order === "busiest"));
    $("sites-slowest").setAttribute("aria-pressed", String(order === "slowest"));
    if (order === "busiest" && state.status) renderSites(pageOf(state.status.sites, 0, 10), state.status.sites.length);
    else loadSites();
  }
  $("sites-busiest").addEventListener("click", () => sitesTab("busiest"));
  $("sites-slowest").addEventListener("click", () => sitesTab("slowest"));
  $("sites-prev").addEventListener("click", () => { state.sitesPage = Math.max(0, state.sitesPage - 1); sitesTab2(); });
  $("sites-next").addEventListener("click", () => { state.sitesPage += 1; sitesTab2(); });
  function sitesTab2() {
    if (state.sitesOrder === "busiest" && state.status) renderSites(pageOf(state.status.sites, state.sitesPage, 10), state.status.sites.length);
    else loadSites();
  }
  $("rejected-prev").addEventListener("click", () => { state.rejectedPage = Math.max(0, state.rejectedPage - 1); loadRejected(); });
  $("rejected-next").addEventListener("click", () => { state.rejectedPage += 1; loadRejected(); });

  // ------------------------------------------------------------------ the stream
  function connect() {
    const events = new EventSource("/events");
    events.addEventListener("snapshot", (e) => {
      const msg = JSON.parse(e.data);
      history.length = 0;
      for (const p of msg.series) history.push(p);
      rebuildCharts();
      render(msg);
    });
    events.addEventListener("status", (e) => {
      const msg = JSON.parse(e.data);
      addPoint(msg.point);
      render(msg);
    });
    events.addEventListener("error", () => {
      const badge = $("state");
      badge.textContent = "disconnected";
      badge.className = "badge down";
    });
  }
  connect();
  poll();
  setInterval(poll, POLL_MS);
  window.distcrawlDashboard = { history, charts };
})();
