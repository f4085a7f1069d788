// rmq dashboard: one page, hash routes, plain DOM. Every value from the API goes through esc().
"use strict";

const app = document.getElementById("app");
let overview = { admin: false, namesrvAddr: "" };
let refreshTimer = null;

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
const enc = encodeURIComponent;
function fmtTime(ms) {
  if (!ms || ms <= 0) return "";
  const d = new Date(ms), p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}
function fmtNum(n, digits = 0) { return n == null ? "" : Number(n).toFixed(digits); }
function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

async function api(path, body) {
  const opts = body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const res = await fetch(path, opts);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

function table(cols, rows, testid) {
  const head = cols.map((c) => `<th class="${c.num ? "num" : ""}">${esc(c.title)}</th>`).join("");
  const body = rows.map((r) => "<tr>" + cols.map((c) => `<td class="${c.num ? "num" : ""}">${c.html ? c.html(r) : esc(c.value(r))}</td>`).join("") + "</tr>").join("");
  return `<table data-testid="${esc(testid)}"><thead><tr>${head}</tr></thead><tbody>${body || `<tr><td colspan="${cols.length}" class="muted">none</td></tr>`}</tbody></table>`;
}

function show(html) { app.innerHTML = html; }
function fail(err) { show(`<div class="error" data-testid="error">${esc(err.message || err)}</div>`); }

// --- admin operations (forms shown on an admin dashboard only) --------------------------------------

function topicForm(t) {
  const q = t ? t.route.queues[0] || {} : {};
  const perms = [[6, "read and write"], [4, "read only"], [2, "write only"], [0, "none"]];
  return `<div class="card" data-testid="topic-ops"><h2 style="margin-top:0">${t ? "Update or delete topic" : "Create topic"}</h2>
    <form id="topic-form">
      ${t ? `<input type="hidden" name="topic" value="${esc(t.topic)}">` : '<label>Topic <input name="topic" required></label>'}
      <label>Read queues <input type="number" name="read" min="1" max="1024" value="${esc(q.readQueueNums ?? 8)}"></label>
      <label>Write queues <input type="number" name="write" min="1" max="1024" value="${esc(q.writeQueueNums ?? 8)}"></label>
      <label>Perm <select name="perm">${perms.map(([v, n]) => `<option value="${v}" ${v === (q.perm ?? 6) ? "selected" : ""}>${v} ${n}</option>`).join("")}</select></label>
      <label class="check"><input type="checkbox" name="order" ${t && t.order ? "checked" : ""}> ordered</label>
      <button type="submit">${t ? "Update" : "Create"}</button>
      ${t ? '<button type="button" class="danger" id="topic-delete">Delete topic</button>' : ""}
      <span id="topic-result" data-testid="topic-result"></span></form></div>`;
}

function groupForm(g) {
  const c = (g && g.config) || {};
  const flag = (k, d) => (c[k] ?? d ? "checked" : "");
  return `<div class="card" data-testid="group-ops"><h2 style="margin-top:0">${g ? "Update or delete group" : "Create subscription group"}</h2>
    <form id="group-form">
      ${g ? `<input type="hidden" name="group" value="${esc(g.group)}">` : '<label>Group <input name="group" required></label>'}
      <label>Retry max times <input type="number" name="retry" min="-1" max="1024" value="${esc(c.retryMaxTimes ?? 16)}"></label>
      <label class="check"><input type="checkbox" name="enable" ${flag("consumeEnable", true)}> consume enabled</label>
      <label class="check"><input type="checkbox" name="broadcast" ${flag("consumeBroadcastEnable", true)}> broadcast allowed</label>
      <label class="check"><input type="checkbox" name="orderly" ${flag("consumeMessageOrderly", false)}> orderly</label>
      <button type="submit">${g ? "Update" : "Create"}</button>
      ${g ? '<button type="button" class="danger" id="group-delete">Delete group</button>' : ""}
      <span id="group-result" data-testid="group-result"></span></form></div>`;
}

// Runs an admin POST from a form, showing its outcome beside the buttons; `after` gets the answer.
function bindOperation(formId, resultId, submit, del, after) {
  const form = document.getElementById(formId);
  if (!form) return;
  const run = async (path, body, done) => {
    const out = document.getElementById(resultId);
    try {
      const r = await api(path, body);
      out.innerHTML = `<span class="ok">${esc(done(r))}</span>`;
      if (after) after(path, r);
    } catch (e) { out.innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  };
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(submit.path, submit.body(form), submit.done); });
  const button = document.getElementById(del.button);
  if (button) button.addEventListener("click", () => {
    if (confirm(del.question(form))) run(del.path, del.body(form), del.done);
  });
}

function bindTopicForm(after) {
  bindOperation("topic-form", "topic-result", {
    path: "/api/topic/update",
    body: (f) => ({ topic: f.topic.value.trim(), readQueueNums: Number(f.read.value), writeQueueNums: Number(f.write.value), perm: Number(f.perm.value), order: f.order.checked }),
    done: (r) => `saved ${r.topic} on ${r.brokers.length} broker(s)`,
  }, {
    button: "topic-delete", path: "/api/topic/delete",
    question: (f) => `Delete topic ${f.topic.value} from every broker and name server?`,
    body: (f) => ({ topic: f.topic.value }),
    done: (r) => `deleted ${r.topic} from ${r.brokers.length} broker(s)`,
  }, after);
}

function bindGroupForm(after) {
  bindOperation("group-form", "group-result", {
    path: "/api/group/update",
    body: (f) => ({ group: f.group.value.trim(), retryMaxTimes: Number(f.retry.value), consumeEnable: f.enable.checked, consumeBroadcastEnable: f.broadcast.checked, consumeMessageOrderly: f.orderly.checked }),
    done: (r) => `saved ${r.group} on ${r.brokers.length} broker(s)`,
  }, {
    button: "group-delete", path: "/api/group/delete",
    question: (f) => `Delete subscription group ${f.group.value} (and its offsets) from every broker?`,
    body: (f) => ({ group: f.group.value, removeOffset: true }),
    done: (r) => `deleted ${r.group} from ${r.brokers.length} broker(s)`,
  }, after);
}

// --- cluster -----------------------------------------------------------------------------------------

function chart(samples) {
  const W = 900, H = 220, L = 50, R = 10, T = 10, B = 24;
  if (!samples.length) return `<p class="muted">collecting samples…</p>`;
  const max = Math.max(1, ...samples.map((s) => Math.max(s.put, s.get)));
  const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (k) => samples.map((s, i) => `${i ? "L" : "M"}${x(s.t).toFixed(1)},${y(s[k]).toFixed(1)}`).join(" ");
  let grid = "";
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    grid += `<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${fmtNum(v, v < 10 ? 1 : 0)}</text>`;
  }
  const span = Math.round((t1 - t0) / 1000);
  return `<svg class="chart" viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" data-testid="rate-chart">
    <g class="grid">${grid}</g>
    <text x="${L}" y="${H - 6}">−${span}s</text><text x="${W - R}" y="${H - 6}" text-anchor="end">now</text>
    <path class="put" d="${line("put")}"/><path class="get" d="${line("get")}"/></svg>
    <div class="legend"><span class="put">produce (msg/s)</span><span class="get">consume (msg/s)</span></div>`;
}

async function pageCluster() {
  const [c, r] = await Promise.all([api("/api/cluster"), api("/api/rates")]);
  const cols = [
    { title: "Cluster", value: (b) => b.cluster },
    { title: "Broker", value: (b) => b.brokerName },
    { title: "ID", value: (b) => b.brokerId, num: true },
    { title: "Role", value: (b) => b.role },
    { title: "Address", value: (b) => b.addr },
    { title: "Version", value: (b) => b.version || b.error || "" },
    { title: "Produce TPS", value: (b) => fmtNum(b.putTps, 1), num: true },
    { title: "Consume TPS", value: (b) => fmtNum(b.getTps, 1), num: true },
    { title: "Today in", value: (b) => b.msgPutToday, num: true },
    { title: "Today out", value: (b) => b.msgGetToday, num: true },
    { title: "Disk used", value: (b) => (b.diskRatio == null ? "" : (b.diskRatio * 100).toFixed(1) + "%" + (b.diskFull ? " FULL" : "")), num: true },
    { title: "POP in flight", value: (b) => (b.popInflight == null ? "" : b.popInflight), num: true },
    { title: "Revive backlog", value: (b) => (b.reviveBehindRecords == null ? "" : `${b.reviveBehindRecords} (${fmtNum(b.reviveBehindMs / 1000, 1)} s late)`), num: true },
    { title: "gRPC clients", value: (b) => (b.grpcProducers == null ? "" : `${b.grpcProducers} producers · ${b.grpcConsumers} consumers`) },
    { title: "Up since", value: (b) => fmtTime(b.bootTimestamp) },
  ];
  const last = r.samples[r.samples.length - 1] || { put: 0, get: 0 };
  show(`<h1>Cluster</h1>
    <div class="card">${table(cols, c.brokers, "brokers")}</div>
    <h2>Live rates <span class="muted" data-testid="rates-now">produce ${fmtNum(last.put, 1)}/s · consume ${fmtNum(last.get, 1)}/s</span></h2>
    <div class="card" id="chart">${chart(r.samples)}</div>`);
  refreshTimer = setInterval(async () => {
    try {
      const rr = await api("/api/rates");
      const el = document.getElementById("chart");
      if (el) el.innerHTML = chart(rr.samples);
    } catch (e) { /* the next tick tries again */ }
  }, Math.max(1000, r.intervalMs));
}

// --- topics ------------------------------------------------------------------------------------------

async function pageTopics() {
  const data = await api("/api/topics");
  const kinds = ["normal", "retry", "dlq", "system"];
  const chosen = new Set(JSON.parse(sessionStorage.getItem("kinds") || '["normal","dlq"]'));
  const render = () => {
    const filter = (document.getElementById("topic-filter")?.value || "").toLowerCase();
    const rows = data.topics.filter((t) => chosen.has(t.kind) && t.topic.toLowerCase().includes(filter));
    document.getElementById("topic-table").innerHTML = table(
      [
        { title: "Topic", html: (t) => `<a href="#/topic/${enc(t.topic)}">${esc(t.topic)}</a>` },
        { title: "Kind", value: (t) => t.kind },
      ],
      rows,
      "topics",
    );
  };
  show(`<h1>Topics</h1>
    ${overview.admin ? topicForm(null) : ""}
    <div class="card"><form class="kinds" onsubmit="return false">
      <label>Filter <input id="topic-filter" placeholder="name"></label>
      ${kinds.map((k) => `<label><input type="checkbox" data-kind="${k}" ${chosen.has(k) ? "checked" : ""}> ${k}</label>`).join("")}
    </form></div>
    <div class="card" id="topic-table"></div>`);
  document.getElementById("topic-filter").addEventListener("input", render);
  app.querySelectorAll("input[data-kind]").forEach((cb) =>
    cb.addEventListener("change", () => {
      cb.checked ? chosen.add(cb.dataset.kind) : chosen.delete(cb.dataset.kind);
      sessionStorage.setItem("kinds", JSON.stringify([...chosen]));
      render();
    }),
  );
  render();
  bindTopicForm((path, r) => { location.hash = `#/topic/${enc(r.topic)}`; });
}

async function pageTopic(topic) {
  const t = await api(`/api/topic?topic=${enc(topic)}`);
  show(`<h1>Topic ${esc(t.topic)}</h1>
    <div class="grid">
      <div class="card"><dl class="kv">
        <dt>Messages stored</dt><dd data-testid="total-messages">${esc(t.totalMessages)}</dd>
        <dt>Produce TPS (1 min)</dt><dd>${fmtNum(t.inTps, 2)}</dd>
        <dt>Consumer groups</dt><dd>${t.consumerGroups.map((g) => `<a href="#/group/${enc(g)}">${esc(g)}</a>`).join(", ") || '<span class="muted">none</span>'}</dd>
        <dt>Search</dt><dd><a href="#/messages?topic=${enc(t.topic)}">messages of this topic</a></dd>
      </dl></div>
      <div class="card"><h2 style="margin-top:0">Route</h2>
        ${table([
          { title: "Broker", value: (b) => b.brokerName },
          { title: "Cluster", value: (b) => b.cluster },
          { title: "Addresses", value: (b) => Object.entries(b.addrs).map(([id, a]) => `${id}: ${a}`).join(", ") },
        ], t.route.brokers, "route-brokers")}
        ${table([
          { title: "Broker", value: (q) => q.brokerName },
          { title: "Read queues", value: (q) => q.readQueueNums, num: true },
          { title: "Write queues", value: (q) => q.writeQueueNums, num: true },
          { title: "Perm", value: (q) => q.perm, num: true },
        ], t.route.queues, "route-queues")}
      </div>
    </div>
    <h2>Queues</h2>
    <div class="card">${table([
      { title: "Broker", value: (q) => q.brokerName },
      { title: "Queue", value: (q) => q.queueId, num: true },
      { title: "Min offset", value: (q) => q.minOffset, num: true },
      { title: "Max offset", value: (q) => q.maxOffset, num: true },
      { title: "Last update", value: (q) => fmtTime(q.lastUpdateTimestamp) },
    ], t.queues, "topic-queues")}</div>
    ${overview.admin ? topicForm(t) : ""}`);
  bindTopicForm((path) => { if (path.endsWith("/delete")) location.hash = "#/topics"; });
}

// --- consumer groups ---------------------------------------------------------------------------------

async function pageGroups() {
  const data = await api("/api/groups");
  show(`<h1>Consumer groups</h1><div class="card">${table([
    { title: "Group", html: (g) => `<a href="#/group/${enc(g.group)}">${esc(g.group)}</a>` },
    { title: "Members online", value: (g) => g.members, num: true },
    { title: "Lag", value: (g) => (g.diffTotal == null ? "" : g.diffTotal), num: true },
    { title: "In flight (POP)", value: (g) => (g.inflight == null ? "" : g.inflight), num: true },
    { title: "Consume TPS", value: (g) => fmtNum(g.consumeTps, 1), num: true },
  ], data.groups, "groups")}</div>
    ${overview.admin ? groupForm(null) : ""}`);
  bindGroupForm((path, r) => { location.hash = `#/group/${enc(r.group)}`; });
}

async function pageGroup(group) {
  const g = await api(`/api/group?group=${enc(group)}`);
  const rows = g.stats ? g.stats.offsets : [];
  const topics = [...new Set(rows.map((r) => r.topic))].sort((a, b) => a.startsWith("%") - b.startsWith("%") || a.localeCompare(b));
  const reset = overview.admin && topics.length
    ? `<div class="card"><h2 style="margin-top:0">Reset offset</h2><form id="reset-form">
        <label>Topic <select name="topic">${topics.map((t) => `<option>${esc(t)}</option>`).join("")}</select></label>
        <label>To the first message stored at or after <input type="datetime-local" step="1" name="time" value="${localInput(Date.now() - 3600000)}"></label>
        <button type="submit">Reset</button><span id="reset-result"></span></form></div>`
    : "";
  show(`<h1>Consumer group ${esc(g.group)}</h1>
    <div class="grid">
      <div class="card"><dl class="kv">
        <dt>Online</dt><dd>${g.online ? '<span class="ok">yes</span>' : "no"}</dd>
        <dt>Model</dt><dd>${esc(g.messageModel || "")} ${esc(g.consumeType || "")}</dd>
        <dt>Subscriptions</dt><dd>${Object.entries(g.subscriptions).map(([t, s]) => `${esc(t)} (${esc(s)})`).join(", ") || '<span class="muted">none</span>'}</dd>
        <dt>Total lag</dt><dd data-testid="lag-total">${g.stats ? esc(g.stats.diffTotal) : ""}</dd>
        <dt>In flight (POP)</dt><dd data-testid="inflight-total" title="popped, neither acked nor revived yet">${g.stats ? esc(g.stats.inflightTotal) : ""}</dd>
        <dt>Consume TPS</dt><dd>${g.stats ? fmtNum(g.stats.consumeTps, 1) : ""}</dd>
      </dl></div>
      <div class="card"><h2 style="margin-top:0">Members</h2>${table([
        { title: "Client id", value: (c) => c.clientId },
        { title: "Address", value: (c) => c.clientAddr },
        { title: "Language", value: (c) => c.language },
        { title: "Version", value: (c) => c.versionDesc },
      ], g.members, "members")}</div>
    </div>
    ${reset}
    <h2>Lag per queue</h2>
    <div class="card">${g.stats ? "" : `<p class="muted">${esc(g.statsError || "no offsets")}</p>`}${table([
      { title: "Topic", value: (r) => r.topic },
      { title: "Broker", value: (r) => r.brokerName },
      { title: "Queue", value: (r) => r.queueId, num: true },
      { title: "Broker offset", value: (r) => r.brokerOffset, num: true },
      { title: "Consumer offset", value: (r) => r.consumerOffset, num: true },
      { title: "Lag", html: (r) => `<span class="${r.diff > 0 ? "lag-pos" : ""}">${esc(r.diff)}</span>`, num: true },
      { title: "In flight", value: (r) => r.inflight, num: true },
      { title: "Last consumed", value: (r) => fmtTime(r.lastTimestamp) },
    ], rows, "lag")}</div>
    ${overview.admin ? groupForm(g) : ""}`);
  bindGroupForm((path) => { if (path.endsWith("/delete")) location.hash = "#/groups"; });
  const form = document.getElementById("reset-form");
  if (form) form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = document.getElementById("reset-result");
    try {
      const ts = new Date(form.time.value).getTime();
      const r = await api("/api/group/reset", { group: g.group, topic: form.topic.value, timestamp: ts });
      out.innerHTML = `<span class="ok"> reset ${r.offsets.length} queues${r.consumersNotified ? " (consumers told)" : ""}</span>`;
    } catch (e) { out.innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  });
}

// --- producers ---------------------------------------------------------------------------------------

async function pageProducers() {
  const data = await api("/api/producers");
  const errors = data.errors.map((e) => `<div class="error">${esc(e.brokerName)} (${esc(e.addr)}): ${esc(e.error)}</div>`).join("");
  show(`<h1>Producers</h1>${errors}<div class="card">${table([
    { title: "Broker", value: (p) => p.brokerName },
    { title: "Producer group", value: (p) => p.group },
    { title: "Client id", value: (p) => p.clientId },
    { title: "Address", value: (p) => p.clientAddr },
    { title: "Language", value: (p) => p.language },
    { title: "Version", value: (p) => p.version },
    { title: "Last heartbeat", value: (p) => fmtTime(p.lastUpdateTimestamp) },
  ], data.producers, "producers")}</div>`);
}

// --- messages ----------------------------------------------------------------------------------------

function messageTable(msgs) {
  return table([
    { title: "Message id", html: (m) => `<a href="#/message/${enc(m.topic)}/${enc(m.offsetMsgId)}">${esc(m.msgId)}</a>` },
    { title: "Tags", value: (m) => m.tags },
    { title: "Keys", value: (m) => m.keys },
    { title: "Queue", value: (m) => `${m.brokerName}/${m.queueId}@${m.queueOffset}` },
    { title: "Stored", value: (m) => fmtTime(m.storeTimestamp) },
    { title: "Size", value: (m) => m.bodyLength, num: true },
  ], msgs, "results");
}

async function pageMessages(params) {
  const topic = params.get("topic") || "";
  const now = Date.now();
  show(`<h1>Messages</h1>
    <div class="card"><form id="search-form">
      <label>Topic <input name="topic" required value="${esc(topic)}"></label>
      <label>By <select name="by"><option value="time">time range</option><option value="key">key</option><option value="id">message id</option></select></label>
      <label class="by-time">From <input type="datetime-local" step="1" name="begin" value="${localInput(now - 3600000)}"></label>
      <label class="by-time">To <input type="datetime-local" step="1" name="end" value="${localInput(now + 60000)}"></label>
      <label class="by-key" hidden>Key <input name="key"></label>
      <label class="by-id" hidden>Message id <input name="id" size="34"></label>
      <button type="submit">Search</button>
    </form></div>
    <div id="search-result"></div>`);
  const form = document.getElementById("search-form");
  const sync = () => ["time", "key", "id"].forEach((k) => app.querySelectorAll(`.by-${k}`).forEach((el) => (el.hidden = form.by.value !== k)));
  form.by.addEventListener("change", sync);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = document.getElementById("search-result");
    out.innerHTML = '<p class="muted">searching…</p>';
    try {
      const t = form.topic.value.trim();
      if (form.by.value === "id") {
        location.hash = `#/message/${enc(t)}/${enc(form.id.value.trim())}`;
        return;
      }
      const q = form.by.value === "key"
        ? `key=${enc(form.key.value.trim())}`
        : `begin=${new Date(form.begin.value).getTime()}&end=${new Date(form.end.value).getTime()}`;
      const r = await api(`/api/messages?topic=${enc(t)}&${q}`);
      out.innerHTML = `<div class="card"><p data-testid="result-count">${r.messages.length} message(s)${r.truncated ? " (more not shown)" : ""}</p>${messageTable(r.messages)}</div>`;
    } catch (e) { out.innerHTML = `<div class="error" data-testid="error">${esc(e.message)}</div>`; }
  });
}

function bodyViews(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  let json = null;
  try { json = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { json = null; }
  const hex = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    hex.push(i.toString(16).padStart(8, "0") + "  " + row.map((x) => x.toString(16).padStart(2, "0")).join(" ").padEnd(48) + "  " + row.map((x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : ".")).join(""));
  }
  return { text, json, hex: hex.join("\n") };
}

const TRACE_TYPES = { Pub: "sent", SubBefore: "delivered", SubAfter: "consumed" };

// The message's trace records (written by clients with message trace on), below its page.
async function loadTrace(msgId) {
  const el = () => document.getElementById("trace");
  try {
    const t = await api(`/api/trace?id=${enc(msgId)}`);
    if (!el()) return;
    el().innerHTML = t.traces.length
      ? table([
          { title: "Type", value: (v) => `${v.type} (${TRACE_TYPES[v.type] || ""})` },
          { title: "Group", value: (v) => v.group },
          { title: "Client host", value: (v) => v.clientHost },
          { title: "Time", value: (v) => fmtTime(v.timestamp) },
          { title: "Cost", value: (v) => (v.costTime == null ? "" : `${v.costTime} ms`), num: true },
          { title: "Status", html: (v) => (v.status == null ? `<span class="muted">retry ${esc(v.retryTimes)}</span>` : `<span class="${v.status === "success" ? "ok" : "lag-pos"}">${esc(v.status)}</span>`) },
        ], t.traces, "trace")
      : '<p class="muted" data-testid="no-trace">no trace records (clients write them with message trace on)</p>';
  } catch (e) { if (el()) el().innerHTML = `<div class="error">${esc(e.message)}</div>`; }
}

async function pageMessage(topic, id) {
  const m = await api(`/api/message?topic=${enc(topic)}&id=${enc(id)}`);
  const views = bodyViews(m.body);
  const mode = views.json != null ? "json" : "text";
  const dlq = m.topic.startsWith("%DLQ%");
  const resend = dlq && overview.admin
    ? `<button id="resend" data-testid="resend">Resend to ${esc(m.properties.RETRY_TOPIC || "?")}</button> <span id="resend-result"></span>` : "";
  show(`<h1>Message ${esc(m.msgId)}</h1>
    <div class="grid">
      <div class="card"><dl class="kv" data-testid="message-detail">
        <dt>Topic</dt><dd><a href="#/topic/${enc(m.topic)}">${esc(m.topic)}</a></dd>
        <dt>Message id</dt><dd>${esc(m.msgId)}</dd>
        <dt>Offset message id</dt><dd>${esc(m.offsetMsgId)}</dd>
        <dt>Tags</dt><dd>${esc(m.tags)}</dd>
        <dt>Keys</dt><dd>${esc(m.keys)}</dd>
        <dt>Queue</dt><dd>${esc(m.brokerName)} / ${esc(m.queueId)} @ ${esc(m.queueOffset)}</dd>
        <dt>Born</dt><dd>${esc(fmtTime(m.bornTimestamp))} from ${esc(m.bornHost)}</dd>
        <dt>Stored</dt><dd>${esc(fmtTime(m.storeTimestamp))} on ${esc(m.storeHost)}</dd>
        <dt>Reconsume times</dt><dd>${esc(m.reconsumeTimes)}</dd>
      </dl>${resend}</div>
      <div class="card"><h2 style="margin-top:0">Properties</h2>${table([
        { title: "Name", value: (p) => p[0] }, { title: "Value", value: (p) => p[1] },
      ], Object.entries(m.properties), "properties")}</div>
    </div>
    <h2>Body <span class="muted">${esc(m.bodyLength)} bytes</span></h2>
    <div class="card"><div class="tabs">
      <button class="secondary" data-mode="text">Text</button>
      <button class="secondary" data-mode="json" ${views.json == null ? "disabled title='not JSON'" : ""}>JSON</button>
      <button class="secondary" data-mode="hex">Hex</button></div>
      <pre class="body" data-testid="body"></pre></div>
    <h2>Message trace <span class="muted">RMQ_SYS_TRACE_TOPIC</span></h2>
    <div class="card" id="trace"><p class="muted">loading…</p></div>`);
  loadTrace(m.msgId);
  const pre = app.querySelector("pre.body");
  const choose = (k) => {
    pre.textContent = views[k] ?? "";
    app.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b.dataset.mode === k));
  };
  app.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => choose(b.dataset.mode)));
  choose(mode);
  const btn = document.getElementById("resend");
  if (btn) btn.addEventListener("click", async () => {
    const out = document.getElementById("resend-result");
    try {
      const r = await api("/api/dlq/resend", { topic: m.topic, msgId: m.offsetMsgId });
      out.innerHTML = `<span class="ok" data-testid="resend-result">sent to ${esc(r.topic)} as ${esc(r.msgId)}</span>`;
    } catch (e) { out.innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  });
}

// --- ACL (the brokers' plain_acl.yml: accounts and global white list) -------------------------------

function aclAccountForm() {
  const perms = ["", "PUB|SUB", "PUB", "SUB", "DENY"];
  const sel = (n) => `<select name="${n}">${perms.map((p) => `<option value="${p}">${p || "(keep)"}</option>`).join("")}</select>`;
  return `<div class="card" data-testid="acl-ops"><h2 style="margin-top:0">Create or update account</h2>
    <form id="acl-form">
      <label>Access key <input name="accessKey" required></label>
      <label>Secret key <input name="secretKey" type="password" required autocomplete="new-password"></label>
      <label>White address <input name="white" placeholder="192.168.1.*"></label>
      <label>Default topic perm ${sel("topicDefault")}</label>
      <label>Default group perm ${sel("groupDefault")}</label>
      <label>Topic perms <input name="topicPerms" placeholder="topicA=PUB,topicB=SUB"></label>
      <label>Group perms <input name="groupPerms" placeholder="groupA=SUB"></label>
      <label class="check"><input type="checkbox" name="admin"> admin</label>
      <button type="submit">Save on every broker</button>
      <span id="acl-result" data-testid="acl-result"></span></form></div>`;
}

async function pageAcl() {
  const data = await api("/api/acl");
  const canChange = overview.admin && data.aclEnabled;
  const list = (v) => (v == null ? "" : v.join(", "));
  const brokers = data.brokers.map((b) => `<h2>${esc(b.brokerName)} <span class="muted">${esc(b.addr)} · ${esc(b.cluster)}</span></h2>
    ${b.aclEnabled ? `<div class="card"><dl class="kv">
        <dt>Global white addresses</dt><dd data-testid="global-white">${esc(list(b.globalWhiteAddrs)) || '<span class="muted">none</span>'}</dd>
      </dl>
      ${table([
        { title: "Access key", value: (a) => a.accessKey },
        { title: "Secret key", value: (a) => (a.secretKey ? "******" : "") },
        { title: "White address", value: (a) => a.whiteRemoteAddress },
        { title: "Admin", value: (a) => (a.admin ? "yes" : "no") },
        { title: "Default topic perm", value: (a) => a.defaultTopicPerm },
        { title: "Default group perm", value: (a) => a.defaultGroupPerm },
        { title: "Topic perms", value: (a) => list(a.topicPerms) },
        { title: "Group perms", value: (a) => list(a.groupPerms) },
        ...(canChange ? [{ title: "", html: (a) => `<button type="button" class="danger" data-delete="${esc(a.accessKey)}">Delete</button>` }] : []),
      ], b.accounts, "acl-accounts")}
      <h2>Rules files</h2>${table([
        { title: "File", value: (v) => v.aclFilePath },
        { title: "Version", value: (v) => v.counter, num: true },
        { title: "Last update", value: (v) => fmtTime(v.timestamp) },
      ], b.versions, "acl-versions")}</div>`
    : `<div class="card muted" data-testid="acl-off">${esc(b.error)}</div>`}`).join("");
  const white = data.brokers.find((b) => b.aclEnabled);
  show(`<h1>ACL</h1>
    ${data.aclEnabled ? "" : '<p class="muted" data-testid="acl-off-all">ACL is off on every broker (aclEnable=false): nothing to show or change.</p>'}
    ${brokers}
    ${canChange ? aclAccountForm() + `<div class="card"><h2 style="margin-top:0">Global white list</h2><form id="white-form">
        <label>Addresses (comma separated) <input name="addrs" size="50" value="${esc(list(white.globalWhiteAddrs))}"></label>
        <button type="submit">Replace on every broker</button><span id="white-result" data-testid="white-result"></span></form></div>` : ""}`);
  if (!canChange) return;
  const split = (v) => v.split(",").map((x) => x.trim()).filter((x) => x);
  bindOperation("acl-form", "acl-result", {
    path: "/api/acl/account/update",
    body: (f) => {
      const b = { accessKey: f.accessKey.value.trim(), secretKey: f.secretKey.value, admin: f.admin.checked };
      if (f.white.value.trim()) b.whiteRemoteAddress = f.white.value.trim();
      if (f.topicDefault.value) b.defaultTopicPerm = f.topicDefault.value;
      if (f.groupDefault.value) b.defaultGroupPerm = f.groupDefault.value;
      if (f.topicPerms.value.trim()) b.topicPerms = split(f.topicPerms.value);
      if (f.groupPerms.value.trim()) b.groupPerms = split(f.groupPerms.value);
      return b;
    },
    done: (r) => `saved ${r.accessKey} on ${r.brokers.length} broker(s)`,
  }, {}, () => setTimeout(route, 600));
  bindOperation("white-form", "white-result", {
    path: "/api/acl/white",
    body: (f) => ({ globalWhiteAddrs: split(f.addrs.value) }),
    done: (r) => `replaced on ${r.brokers.length} broker(s)`,
  }, {}, () => setTimeout(route, 600));
  app.querySelectorAll("button[data-delete]").forEach((b) => b.addEventListener("click", async () => {
    if (!confirm(`Delete account ${b.dataset.delete} from every broker?`)) return;
    try { await api("/api/acl/account/delete", { accessKey: b.dataset.delete }); route(); } catch (e) { alert(e.message); }
  }));
}

// --- operations (name servers, broker write permission) ---------------------------------------------

async function pageOps() {
  const data = await api("/api/ops");
  show(`<h1>Operations</h1>
    <div class="card"><h2 style="margin-top:0">Name servers</h2>
      <p>In use: <span data-testid="namesrv-list">${esc(data.namesrvAddrs.join(";"))}</span></p>
      ${overview.admin ? `<form id="namesrv-form">
        <label>Name server list (host:port;host:port) <input name="addrs" size="50" value="${esc(data.namesrvAddrs.join(";"))}"></label>
        <button type="submit">Switch</button><span id="namesrv-result" data-testid="namesrv-result"></span></form>` : ""}</div>
    <h2>Broker write permission</h2>
    <div class="card">${table([
      { title: "Cluster", value: (b) => b.cluster },
      { title: "Broker", value: (b) => b.brokerName },
      { title: "Write permission", html: (b) => (b.writable == null ? '<span class="muted">unknown</span>' : b.writable ? '<span class="ok">writable</span>' : '<span class="lag-pos">read only</span>') },
      { title: "Per name server", value: (b) => b.namesrvs.map((n) => `${n.namesrvAddr}: ${n.error ? n.error : "perm " + n.perm + (n.writable == null ? "" : n.writable ? " (read, write)" : " (no write)")}`).join(", ") },
      ...(overview.admin ? [{ title: "", html: (b) => `<button type="button" class="danger" data-wipe="${esc(b.brokerName)}">Wipe write perm</button> <button type="button" data-add="${esc(b.brokerName)}">Add write perm</button>` }] : []),
    ], data.brokers, "write-perms")}<span id="perm-result" data-testid="perm-result"></span></div>`);
  const form = document.getElementById("namesrv-form");
  if (form) form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = document.getElementById("namesrv-result");
    try {
      const r = await api("/api/ops/namesrv", { namesrvAddr: form.addrs.value });
      await loadOverview();
      document.getElementById("namesrv").textContent = "name server " + overview.namesrvAddr;
      out.innerHTML = `<span class="ok">switched from ${esc(r.previous)} to ${esc(r.namesrvAddr)}</span>`;
    } catch (e) { out.innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  });
  const perm = async (path, broker) => {
    try {
      const r = await api(path, { brokerName: broker });
      await route();
      document.getElementById("perm-result").innerHTML = `<span class="ok">${esc(path.endsWith("wipeWritePerm") ? "wiped" : "added")} write perm of ${esc(r.brokerName)} (${esc(Object.entries(r.namesrvs).map(([n, c]) => `${n}: ${c} topics`).join(", "))})</span>`;
    } catch (e) { document.getElementById("perm-result").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  };
  app.querySelectorAll("button[data-wipe]").forEach((b) => b.addEventListener("click", () => {
    if (confirm(`Take write permission from ${b.dataset.wipe} in every name server?`)) perm("/api/ops/wipeWritePerm", b.dataset.wipe);
  }));
  app.querySelectorAll("button[data-add]").forEach((b) => b.addEventListener("click", () => perm("/api/ops/addWritePerm", b.dataset.add)));
}

// --- login (the brokers have ACL on) -----------------------------------------------------------------

async function pageLogin() {
  show(`<h1>Log in</h1><div class="card"><p class="muted">Changes need an ACL admin account of the brokers; without one the dashboard is read-only.</p>
    <form id="login-form">
      <label>Access key <input name="accessKey" required autocomplete="username"></label>
      <label>Secret key <input name="secretKey" type="password" required autocomplete="current-password"></label>
      <button type="submit">Log in</button><span id="login-result" data-testid="login-result"></span></form></div>`);
  const form = document.getElementById("login-form");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("/api/login", { accessKey: form.accessKey.value.trim(), secretKey: form.secretKey.value });
      await loadOverview();
      location.hash = "#/cluster";
    } catch (e) { document.getElementById("login-result").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  });
}

async function loadOverview() {
  try { overview = await api("/api/overview"); } catch (e) { /* shown by the page */ }
  const mode = document.getElementById("mode");
  mode.textContent = overview.admin ? "admin" : "read-only";
  mode.classList.toggle("admin", overview.admin);
  const user = document.getElementById("user");
  user.innerHTML = !overview.login ? ""
    : overview.user ? `<span data-testid="user">${esc(overview.user)}</span> <button class="secondary" id="logout">Log out</button>`
    : '<a href="#/login" data-testid="login-link">Log in</a>';
  const out = document.getElementById("logout");
  if (out) out.addEventListener("click", async () => { await api("/api/logout", {}); await loadOverview(); route(); });
}

// --- routing -----------------------------------------------------------------------------------------

async function route() {
  if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; }
  const hash = location.hash.replace(/^#\/?/, "") || "cluster";
  const [pathPart, queryPart] = hash.split("?");
  const parts = pathPart.split("/").map((p) => { try { return decodeURIComponent(p); } catch (e) { return p; } });
  const params = new URLSearchParams(queryPart || "");
  const page = { topic: "topics", group: "groups", message: "messages" }[parts[0]] || parts[0];
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  show('<p class="muted">loading…</p>');
  try {
    switch (parts[0]) {
      case "cluster": await pageCluster(); break;
      case "topics": await pageTopics(); break;
      case "topic": await pageTopic(parts[1]); break;
      case "groups": await pageGroups(); break;
      case "group": await pageGroup(parts[1]); break;
      case "producers": await pageProducers(); break;
      case "login": await pageLogin(); break;
      case "acl": await pageAcl(); break;
      case "ops": await pageOps(); break;
      case "messages": await pageMessages(params); break;
      case "message": await pageMessage(parts[1], parts[2]); break;
      default: show(`<div class="error">no page ${esc(parts[0])}</div>`);
    }
    app.dataset.loaded = parts[0];
  } catch (e) { fail(e); app.dataset.loaded = "error"; }
}

async function main() {
  await loadOverview();
  document.getElementById("namesrv").textContent = "name server " + overview.namesrvAddr;
  window.addEventListener("hashchange", route);
  await route();
}
main();
