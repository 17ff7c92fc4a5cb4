// mlroute's live fabric view: plain JavaScript + SVG, no libraries, served by the controller (works offline).
// Every poll period it reads the controller's REST views and redraws: switches in tiers, each directed link
// coloured and sized by its measured utilisation, pinned elephants as highlighted paths, jobs, the routing
// report (installed vs ECMP's estimate) and the last TE decision. Stable DOM hooks for tests and scripts:
// <g class="switch" data-dpid>, <line class="link" data-src data-dst data-util>, <path class="elephant-path"
// data-key data-path>, and <body data-state="ready" data-refreshes=N> after each complete refresh.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const TIER_ORDER = ["core", "spine", "aggregation", "edge", "leaf", "unknown"];
const SW_W = 46, SW_H = 20, ROW_GAP = 110, COL_MIN = 58, MARGIN = 84, HOST_R = 6;

const state = {
  config: { poll_interval_s: 2, mutations_enabled: false, objective: "flow" },
  refreshes: 0,
  hover: null,  // data-key of the hovered elephant, kept across redraws
  last: null,  // the views of the last refresh
};

// ---------------------------------------------------------------------------------------------- helpers
function el(tag, attrs, parent) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function html(tag, text, parent, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (cls) node.className = cls;
  if (parent) parent.appendChild(node);
  return node;
}

function bps(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  if (v >= 1e9) return (v / 1e9).toFixed(2) + " Gb/s";
  if (v >= 1e6) return (v / 1e6).toFixed(2) + " Mb/s";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + " kb/s";
  return v.toFixed(0) + " b/s";
}

function num(v, digits) {
  if (v === null || v === undefined) return "—";
  return typeof v === "number" ? v.toFixed(digits === undefined ? 0 : digits) : String(v);
}

function utilColour(u) {
  if (u === null || u === undefined) return "#b8bccb";
  const x = Math.max(0, Math.min(1, u));
  return `hsl(${Math.round(120 * (1 - x))}, ${55 + Math.round(25 * x)}%, ${45 + Math.round(3 * x)}%)`;
}

function elephantKey(e) {
  return `${e.src_ip}:${e.src_port}->${e.dst_ip}:${e.dst_port}/${e.proto === 17 ? "udp" : "tcp"}`;
}

function dpidLabel(dpid) {
  return String(dpid);
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// ---------------------------------------------------------------------------------------------- layout
// Rows from the top tier down; the host-facing tier is ordered by dpid and every tier above it by the mean
// position of its neighbours below (a barycentre pass), so a fat-tree's pods line up under their cores.
function layout(topology, links, showHosts) {
  const tiers = new Map();
  for (const s of topology.switches) {
    const tier = TIER_ORDER.includes(s.tier) ? s.tier : "unknown";
    if (!tiers.has(tier)) tiers.set(tier, []);
    tiers.get(tier).push(s.dpid);
  }
  const rows = TIER_ORDER.filter((t) => tiers.has(t)).map((t) => ({ tier: t, dpids: tiers.get(t) }));
  const neighbours = new Map();
  for (const l of links) {
    if (!neighbours.has(l.src)) neighbours.set(l.src, new Set());
    neighbours.get(l.src).add(l.dst);
  }
  const order = new Map();  // dpid -> index within its row
  for (let r = rows.length - 1; r >= 0; r--) {
    const row = rows[r];
    const below = r + 1 < rows.length ? new Set(rows[r + 1].dpids) : null;
    const weight = (d) => {
      if (!below) return d;
      const ns = [...(neighbours.get(d) || [])].filter((n) => below.has(n)).map((n) => order.get(n));
      return ns.length ? ns.reduce((a, b) => a + b, 0) / ns.length : Infinity;
    };
    const w = new Map(row.dpids.map((d) => [d, weight(d)]));
    row.dpids.sort((a, b) => (w.get(a) - w.get(b)) || (a - b));
    row.dpids.forEach((d, i) => order.set(d, i));
  }
  // a dual-stack host is one binding per address (IPv4, IPv6, link-local), all at its port with its MAC: one node
  const hostsBySwitch = new Map();
  const nodes = new Map();  // dpid/port/mac -> node
  for (const h of topology.hosts || []) {
    const key = `${h.dpid}/${h.port}/${h.mac}`;
    if (!nodes.has(key)) {
      const node = { ...h, ips: [] };
      nodes.set(key, node);
      if (!hostsBySwitch.has(h.dpid)) hostsBySwitch.set(h.dpid, []);
      hostsBySwitch.get(h.dpid).push(node);
    }
    nodes.get(key).ips.push(h.ip);
  }
  for (const node of nodes.values()) {  // IPv4 first, then global IPv6, then link-local
    const rank = (ip) => (ip.includes(":") ? (ip.startsWith("fe80:") ? 2 : 1) : 0);
    node.ips.sort((a, b) => rank(a) - rank(b));
    node.ip = node.ips[0];
  }
  const maxHostsPerSwitch = Math.max(1, ...[...hostsBySwitch.values()].map((hs) => hs.length));
  const widest = Math.max(1, ...rows.map((r) => r.dpids.length));
  const bottom = rows.length ? rows[rows.length - 1].dpids.length : 1;
  const hostCols = showHosts ? bottom * maxHostsPerSwitch : 0;
  const width = 2 * MARGIN + Math.max(widest * COL_MIN, hostCols * 2.6 * HOST_R * 1.4, 480);
  const pos = new Map();
  rows.forEach((row, r) => {
    const step = (width - 2 * MARGIN) / row.dpids.length;
    row.dpids.forEach((d, i) => pos.set(d, { x: MARGIN + (i + 0.5) * step, y: 40 + r * ROW_GAP }));
  });
  const hostPos = new Map();  // a host node's first address -> its position
  const addressPos = new Map();  // every address of a host node -> the same
  const hostY = 40 + rows.length * ROW_GAP - 20;
  if (showHosts) {
    for (const [dpid, hs] of hostsBySwitch) {
      const p = pos.get(dpid);
      if (!p) continue;
      const spread = Math.min(COL_MIN * 0.8, (width - 2 * MARGIN) / bottom * 0.8);
      hs.forEach((h, i) => {
        const dx = hs.length > 1 ? -spread / 2 + (spread * i) / (hs.length - 1) : 0;
        const at = { x: p.x + dx, y: hostY, host: h };
        hostPos.set(h.ip, at);
        for (const ip of h.ips) addressPos.set(ip, at);
      });
    }
  }
  const height = (showHosts && hostPos.size ? hostY + 30 : 40 + (rows.length - 1) * ROW_GAP + 30);
  return { rows, pos, hostPos, addressPos, width, height };
}

// ---------------------------------------------------------------------------------------------- drawing
function drawFabric(data) {
  const svg = document.getElementById("fabric");
  const showHosts = document.getElementById("show-hosts").checked;
  const links = data.links || data.topology.links.map((l) => ({ ...l, utilisation: null, elephants: 0, live: true }));
  const { rows, pos, hostPos, addressPos, width, height } = layout(data.topology, links, showHosts);
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.dataset.switches = String(pos.size);
  svg.dataset.links = String(links.length);

  for (const row of rows) {
    const y = pos.get(row.dpids[0]).y;
    el("text", { class: "tier-label", x: 6, y: y + 4 }, svg).textContent = row.tier;
  }
  const hostLayer = el("g", { class: "hosts" }, svg);
  const linkLayer = el("g", { class: "links" }, svg);
  const elephantLayer = el("g", { class: "elephants" }, svg);
  const switchLayer = el("g", { class: "switches" }, svg);

  for (const [ip, p] of hostPos) {
    const sw = pos.get(p.host.dpid);
    el("line", { class: "host-link", x1: sw.x, y1: sw.y + SW_H / 2, x2: p.x, y2: p.y - HOST_R }, hostLayer);
    const g = el("g", { class: "host", "data-ip": ip, transform: `translate(${p.x},${p.y})` }, hostLayer);
    el("circle", { r: HOST_R }, g);
    el("text", { y: HOST_R + 10 }, g).textContent = ip.split(ip.includes(":") ? ":" : ".").slice(-1)[0];
    g.dataset.ips = p.host.ips.join(" ");
    el("title", {}, g).textContent =
      `host ${p.host.ips.join(", ")} (${p.host.mac}) at switch ${p.host.dpid} port ${p.host.port}`;
  }

  // Each direction is its own line, offset to the right of its direction of travel, so both are visible.
  for (const l of links) {
    const a = pos.get(l.src), b = pos.get(l.dst);
    if (!a || !b) continue;
    const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
    const off = 2.5, ox = (-dy / len) * off, oy = (dx / len) * off;
    const u = l.utilisation;
    const line = el("line", {
      class: "link" + (u === null || u === undefined ? " unmeasured" : "") + (l.live === false ? " down" : ""),
      x1: a.x + ox, y1: a.y + oy, x2: b.x + ox, y2: b.y + oy,
      stroke: utilColour(u), "stroke-width": (1.5 + 4 * (u || 0)).toFixed(2),
      "data-src": l.src, "data-dst": l.dst, "data-src-port": l.src_port, "data-dst-port": l.dst_port,
      "data-util": u === null || u === undefined ? "" : u.toFixed(4), "data-elephants": l.elephants || 0,
    }, linkLayer);
    el("title", {}, line).textContent =
      `${l.src}:${l.src_port} → ${l.dst}:${l.dst_port}\n` +
      `tx ${bps(l.tx_bps)}, rx ${bps(l.rx_bps)}, ` +
      `utilisation ${u === null || u === undefined ? "—" : (100 * u).toFixed(1) + " %"}\n` +
      `pinned elephants: ${l.elephants || 0}${l.live === false ? "\nDOWN" : ""}`;
  }

  const jobOf = jobsByHost(data.jobs);
  const pinned = (data.elephants || []).filter((e) => Array.isArray(e.path) && e.path.length);
  pinned.forEach((e, i) => {
    const points = [];
    const src = addressPos.get(e.src_ip), dst = addressPos.get(e.dst_ip);
    if (src) points.push(src);
    for (const d of e.path) if (pos.has(d)) points.push(pos.get(d));
    if (dst) points.push(dst);
    if (points.length < 2) return;
    const shift = (i - (pinned.length - 1) / 2) * 1.6;  // overlapping elephants stay distinguishable
    const dAttr = points
      .map((p, j) => `${j ? "L" : "M"}${(p.x + shift).toFixed(1)},${(p.y + shift / 2).toFixed(1)}`).join(" ");
    const key = elephantKey(e);
    const path = el("path", {
      class: "elephant-path" + (state.hover === key ? " hover" : ""), d: dAttr,
      stroke: elephantColour(i),
      "data-key": key, "data-path": e.path.join(","), "data-rate": e.rate_bps,
    }, elephantLayer);
    const details = elephantDetails(e, jobOf);
    el("title", {}, path).textContent = details;  // the browser's own hover text, and readable in the DOM
    path.addEventListener("mousemove", (ev) => showTooltip(ev, details));
    path.addEventListener("mouseenter", () => setHover(key));
    path.addEventListener("mouseleave", () => { hideTooltip(); setHover(null); });
  });

  for (const [dpid, p] of pos) {
    const sw = data.topology.switches.find((s) => s.dpid === dpid);
    const g = el("g", { class: "switch", "data-dpid": dpid, "data-tier": sw.tier,
                        transform: `translate(${p.x - SW_W / 2},${p.y - SW_H / 2})` }, switchLayer);
    el("rect", { width: SW_W, height: SW_H }, g);
    el("text", { x: SW_W / 2, y: SW_H / 2 }, g).textContent = dpidLabel(dpid);
    el("title", {}, g).textContent = `switch ${dpid} (${sw.tier})`;
  }
}

// Blues, purples and magentas only: the greens, yellows and reds belong to link utilisation.
function elephantColour(i) {
  const hues = [265, 215, 305, 190, 285, 235, 325, 250];
  return `hsl(${hues[i % hues.length]}, ${i < hues.length ? 80 : 50}%, ${i % 2 ? 45 : 55}%)`;
}

function jobsByHost(jobs) {
  const out = new Map();
  for (const j of (jobs && jobs.jobs) || []) for (const ip of j.hosts) out.set(ip, j.name);
  return out;
}

function elephantDetails(e, jobOf) {
  return [
    `${e.proto === 17 ? "UDP" : "TCP"} ${e.src_ip}:${e.src_port} → ${e.dst_ip}:${e.dst_port}`,
    `rate ${bps(e.rate_bps)}   demand ${bps(e.demand_bps)}   ${e.active ? "active" : "idle (pattern memory)"}`,
    `job ${jobOf.get(e.src_ip) || "—"}`,
    `path ${Array.isArray(e.path) ? e.path.join(" → ") : "ECMP (switch hash, not pinned)"}`,
  ].join("\n");
}

function showTooltip(ev, text) {
  const tip = document.getElementById("tooltip");
  tip.textContent = text;
  tip.hidden = false;
  tip.style.left = ev.clientX + 14 + "px";
  tip.style.top = ev.clientY + 14 + "px";
}

function hideTooltip() {
  document.getElementById("tooltip").hidden = true;
}

function setHover(key) {
  state.hover = key;
  for (const node of document.querySelectorAll(".elephant-path, #elephants tr[data-key]")) {
    node.classList.toggle("hover", key !== null && node.dataset.key === key);
  }
}

// ---------------------------------------------------------------------------------------------- panels
function fillRows(tbody, rows) {
  tbody.replaceChildren();
  for (const cells of rows) {
    const tr = html("tr", null, tbody);
    cells.forEach((c, i) => html(i ? "td" : "th", c, tr, i ? "num" : ""));
  }
}

function drawRouting(routing) {
  const inst = routing.installed || {}, ecmp = routing.ecmp || {};
  const fraction = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + " %");
  fillRows(document.querySelector("#routing tbody"), [
    ["mode / fabric", `${routing.mode} / ${routing.fabric}`, ""],
    ["elephants", num(routing.elephants), ""],
    ["max link load", num(inst.max_link_load), num(ecmp.max_link_load)],
    ["links at max", num(inst.links_at_max), num(ecmp.links_at_max)],
    ["flows sharing a link", num(inst.flows_sharing), num(ecmp.flows_sharing)],
    ["min rate", bps(inst.min_rate), bps(ecmp.min_rate)],
    ["median rate", bps(inst.median_rate), bps(ecmp.median_rate)],
    ["of non-blocking ideal", fraction(inst.fraction_of_ideal), fraction(ecmp.fraction_of_ideal)],
  ]);
  const table = document.getElementById("routing");
  table.dataset.installedMax = inst.max_link_load === undefined ? "" : inst.max_link_load;
  table.dataset.ecmpMax = ecmp.max_link_load === undefined ? "" : ecmp.max_link_load;

  const d = routing.last_decision;
  const rows = d ? [
    ["applied", d.applied ? "yes" : "no"],
    ["reason", d.reason],
    ["moved flows", num(d.moved)],
    ["max link load before → after", `${num(d.max_link_load_before)} → ${num(d.max_link_load_after)}`],
    ["optimiser", num(d.optimiser_ms, 1) + " ms"],
  ] : [["", "no decision yet"]];
  fillRows(document.querySelector("#decision tbody"), rows);
  const decision = document.getElementById("decision");
  decision.dataset.before = d && d.max_link_load_before !== null && d.max_link_load_before !== undefined
    ? d.max_link_load_before : "";
  decision.dataset.after = d && d.max_link_load_after !== null && d.max_link_load_after !== undefined
    ? d.max_link_load_after : "";
}

function drawJobs(jobs, elephants, routing) {
  const model = (routing.installed && routing.installed.jobs) || {};
  const tbody = document.querySelector("#jobs tbody");
  tbody.replaceChildren();
  const list = (jobs && jobs.jobs) || [];
  if (!list.length) fillRows(tbody, [["no jobs configured", "", "", "", ""]]);
  for (const j of list) {
    // a job finishes a ring step when its slowest flow does: that rate is the job's speed
    const hosts = new Set(j.hosts);
    const mine = elephants.filter((e) => hosts.has(e.src_ip) && e.active);
    const slowest = mine.length ? Math.min(...mine.map((e) => e.rate_bps)) : null;
    const tr = html("tr", null, tbody);
    tr.dataset.job = j.name;
    tr.dataset.slowestBps = slowest === null ? "" : String(slowest);
    html("th", j.name, tr);
    html("td", String(j.hosts.length), tr, "num");
    html("td", String(mine.length), tr, "num");
    html("td", bps(slowest), tr, "num");
    html("td", bps(model[j.name] ? model[j.name].min_rate : null), tr, "num");
  }
}

function drawElephants(elephants, jobs) {
  const jobOf = jobsByHost(jobs);
  const tbody = document.querySelector("#elephants tbody");
  tbody.replaceChildren();
  for (const e of elephants) {
    const key = elephantKey(e);
    const tr = html("tr", null, tbody);
    tr.dataset.key = key;
    if (state.hover === key) tr.classList.add("hover");
    html("td", key, tr);
    html("td", bps(e.rate_bps), tr, "num");
    html("td", bps(e.demand_bps), tr, "num");
    html("td", jobOf.get(e.src_ip) || "—", tr);
    html("td", Array.isArray(e.path) ? e.path.join("→") : "ECMP", tr);
    tr.addEventListener("mouseenter", () => setHover(key));
    tr.addEventListener("mouseleave", () => setHover(null));
  }
}

function drawSwitches(switches) {
  // each table's fill against its capacity: a lab switch's small table shows before it refuses a rule
  const tbody = document.querySelector("#switches tbody");
  tbody.replaceChildren();
  for (const s of (switches && switches.switches) || []) {
    const tr = html("tr", null, tbody);
    tr.dataset.dpid = String(s.dpid);
    html("th", dpidLabel(s.dpid) + (s.connected ? "" : " (down)"), tr);
    html("td", s.profile ? s.profile.name : "—", tr);
    // te.detection auto: sflow where the switch's export is heard, flowstats (counting rules) elsewhere
    const detection = html("td", s.detection || "—", tr);
    detection.dataset.detection = s.detection || "";
    for (const t of ["0", "1", "2"]) {
      const table = s.tables[t] || {};
      const cap = table.capacity === null || table.capacity === undefined ? "?" : String(table.capacity);
      const entries = table.entries === null || table.entries === undefined ? "—" : String(table.entries);
      const td = html("td", `${entries} / ${cap} (${table.mlroute_entries || 0})`, tr, "num");
      td.dataset.table = t;
      td.dataset.entries = entries === "—" ? "" : entries;
      td.dataset.capacity = cap === "?" ? "" : cap;
      if (table.capacity && table.entries !== null && table.entries >= 0.9 * table.capacity) td.classList.add("full");
    }
    html("td", String(s.over_budget || 0), tr, "num");
    const errors = Object.values(s.errors || {}).reduce((a, b) => a + b, 0);
    html("td", String(errors), tr, "num");
  }
}

// ---------------------------------------------------------------------------------------------- refresh loop
async function refresh() {
  const names = ["topology", "links", "elephants", "jobs", "routing", "switches"];
  const results = await Promise.allSettled(names.map((n) => getJSON(`/mlroute/${n}`)));
  const data = {}, errors = [];
  results.forEach((r, i) => {
    if (r.status === "fulfilled") data[names[i]] = r.value;
    else errors.push(r.reason.message);
  });
  state.last = data;
  try {
    if (data.topology) drawFabric(data);
    if (data.routing) drawRouting(data.routing);
    drawJobs(data.jobs, data.elephants || [], data.routing || {});
    drawElephants(data.elephants || [], data.jobs);
    drawSwitches(data.switches);
    const t = data.topology || { switches: [], links: [], hosts: [] };
    document.getElementById("summary").textContent =
      `${t.switches.length} switches, ${t.links.length} directed links, ${t.hosts.length} hosts, ` +
      `${(data.elephants || []).length} elephants` + (errors.length ? ` — ${errors.join("; ")}` : "");
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    state.refreshes += 1;
    document.body.dataset.refreshes = String(state.refreshes);
    document.body.dataset.state = errors.length ? "partial" : "ready";
  } catch (err) {
    document.body.dataset.state = "error";
    document.getElementById("summary").textContent = "drawing failed: " + err.message;
  }
  setTimeout(refresh, 1000 * state.config.poll_interval_s);
}

// ---------------------------------------------------------------------------------------------- actions
function tokenGiven() {
  return document.getElementById("token").value.trim() !== "";
}

function updateButtons() {
  const enabled = state.config.mutations_enabled && tokenGiven();
  document.getElementById("switch-objective").disabled = !enabled;
  document.getElementById("recompute").disabled = !enabled;
}

async function post(path, body) {
  const out = document.getElementById("action-result");
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json",
                 Authorization: "Bearer " + document.getElementById("token").value.trim() },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json().catch(() => ({}));
    out.className = response.ok ? "ok" : "bad";
    out.textContent = response.ok ? summariseAnswer(answer) : `${response.status}: ${answer.error || "refused"}`;
  } catch (err) {
    out.className = "bad";
    out.textContent = err.message;
  }
}

function summariseAnswer(a) {
  if ("applied" in a) {
    return `${a.applied ? "applied" : "kept"}: ${a.reason}, ${a.moved} moved, ${num(a.optimiser_ms, 1)} ms`;
  }
  if ("objective" in a) return `objective: ${a.objective}`;
  return "done";
}

async function start() {
  try {
    state.config = { ...state.config, ...(await getJSON("/mlroute/ui-config")) };
  } catch (err) {
    // an older controller without /mlroute/ui-config: keep the defaults (2 s, read-only)
  }
  document.getElementById("objective").value = state.config.objective || "flow";
  document.getElementById("token").addEventListener("input", updateButtons);
  document.getElementById("show-hosts").addEventListener("change", redraw);
  document.getElementById("switch-objective").addEventListener("click",
    () => post("/mlroute/objective", { objective: document.getElementById("objective").value }));
  document.getElementById("recompute").addEventListener("click", () => post("/mlroute/recompute"));
  if (!state.config.mutations_enabled) {
    document.getElementById("token").placeholder = "rest.token not set";
    document.getElementById("token").disabled = true;
  }
  updateButtons();
  refresh();
}

function redraw() {
  // the hosts checkbox changes the layout: redraw the last data at once instead of waiting a period
  if (state.last && state.last.topology) drawFabric(state.last);
}

start();
