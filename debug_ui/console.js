// agentify debug console: one WebSocket (/ws) for live state, the JSON API for the rest.
// No build step and no dependencies. Every value from the gateway is rendered with
// textContent, never as HTML: log lines and backend output are untrusted text.
//
// The console token arrives once, in the address (?token=). The page moves it to this tab's
// sessionStorage, takes it out of the address bar and history, and sends it as a header
// (Authorization: Bearer) or, for the WebSocket, as a subprotocol. Never as a cookie: cookies
// ignore ports, so every other web server on 127.0.0.1 would receive it.
"use strict";

const MAX_LOGS = 3000;
const MAX_LOG_ROWS = 1000;
const LEVELS = { TRACE: 5, DEBUG: 10, INFO: 20, SUCCESS: 25, WARNING: 30, ERROR: 40, CRITICAL: 50 };

const state = {
  status: null,
  backends: new Map(),
  traces: new Map(),
  logs: [],
  selected: null,
  followNextTrace: false,
  retryMs: 500,
  confirmations: new Map(),  // open questions of the safety policy, by id, oldest first
  restartNotes: new Map(),  // why a restart was refused, by backend id
};

const $ = (id) => document.getElementById(id);

// ----- the token -----------------------------------------------------------------------------

const TOKEN_KEY = "agentify-console-token";

function takeTokenFromAddress() {
  const params = new URLSearchParams(location.search);
  const token = params.get("token");
  if (token === null) return;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
}

const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// Every API request of the page goes through here.
function api(path, options = {}) {
  const headers = { ...(options.headers || {}), Authorization: `Bearer ${token()}` };
  return fetch(path, { ...options, headers, credentials: "omit", cache: "no-store" });
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "style") Object.assign(node.style, value);  // CSSOM: allowed by the page's CSP
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node[key] = value;
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const clock = (seconds) => new Date(seconds * 1000).toTimeString().slice(0, 8);
const clockMs = (seconds) => clock(seconds) + "." + String(Math.floor((seconds % 1) * 1000)).padStart(3, "0");
const ms = (value) => (value === null || value === undefined ? "…" : value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(2)} s`);
const json = (value) => JSON.stringify(value, null, 2);

function duration(seconds) {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// ----- connection ---------------------------------------------------------------------------

function setConnection(name, text) {
  const pill = $("connection");
  pill.dataset.state = name;
  pill.textContent = text || name;
}

function banner(text) {
  $("banner").hidden = !text;
  $("banner").textContent = text || "";
}

function connect() {
  if (!token()) {
    setConnection("denied", "no token");
    banner("This tab has no console token. Open the URL with ?token= from agentify's start-up log line.");
    return;
  }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  // A browser WebSocket cannot send headers: the token goes as a second, header-safe subprotocol.
  const socket = new WebSocket(`${scheme}://${location.host}/ws`, ["agentify-console", `agentify-token.${base64url(token())}`]);
  socket.onopen = () => {
    state.retryMs = 500;
    setConnection("live");
    banner("");
  };
  socket.onmessage = (message) => receive(JSON.parse(message.data));
  socket.onclose = () => {
    setConnection("reconnecting", "reconnecting…");
    explainRefusal();
    setTimeout(connect, state.retryMs);
    state.retryMs = Math.min(state.retryMs * 2, 5000);
  };
}

// A WebSocket that is refused does not say why; the API does.
async function explainRefusal() {
  try {
    const response = await api("/api/status");
    if (response.status === 401 || response.status === 403) {
      setConnection("denied", "token refused");
      banner("The console token was refused (agentify restarted with a new one?). Open the URL from agentify's latest start-up log line.");
    }
  } catch (error) {
    banner("");  // the gateway is down: keep retrying quietly
  }
}

function receive(event) {
  if (event.kind === "snapshot") {
    applySnapshot(event.data);
  } else if (event.kind === "log") {
    addLog(event.data);
  } else if (event.kind === "trace") {
    upsertTrace(event.data);
    if (event.data.status !== "running") {
      refreshStatusSoon();
      renderBackends();  // their latency charts
    }
  } else if (event.kind === "backend") {
    state.backends.set(event.data.id, event.data);
    renderBackends();
    loadPinsSoon();  // a new listing may hold a changed tool
  } else if (event.kind === "confirm") {
    if (event.data.state === "asked") state.confirmations.set(event.data.id, event.data);
    else state.confirmations.delete(event.data.id);
    renderConfirmation();
  }
}

function applySnapshot(data) {
  state.status = data.status;
  state.backends = new Map(data.backends.map((b) => [b.id, b]));
  state.traces = new Map(data.traces.slice().reverse().map((t) => [t.id, t]));
  state.logs = data.logs.slice(-MAX_LOGS);
  state.confirmations = new Map((data.confirmations || []).map((q) => [q.id, q]));
  renderConfirmation();
  loadPins();
  loadAudit();
  renderStatus();
  renderBackends();
  renderTraceList();
  renderLogs();
  renderTraceDetail();
  if (!$("task-cwd").value && data.status.cwd) $("task-cwd").value = data.status.cwd;
}

let statusTimer = null;
function refreshStatusSoon() {
  clearTimeout(statusTimer);
  statusTimer = setTimeout(async () => {
    try {
      const response = await api("/api/status");
      if (response.ok) {
        state.status = await response.json();
        renderStatus();
      }
      loadAudit();
    } catch (error) {
      // the gateway went away; the WebSocket's reconnect brings a fresh snapshot
    }
  }, 250);
}

// ----- status and backends ------------------------------------------------------------------

function renderStatus() {
  const status = state.status;
  if (!status) return;
  $("version").textContent = `v${status.version} · pid ${status.pid}`;
  $("planner").textContent = status.planner.name || "none";
  $("planner").title = status.planner.reason;
  const t = status.tasks;
  $("tasks").textContent = `${t.total} (${t.running} running, ${t.ok} ok, ${t.error} failed)`;
  renderUptime();
}

function renderUptime() {
  if (state.status) $("uptime").textContent = duration(Date.now() / 1000 - state.status.startedAt);
}

// The header's count: each state named, so lazy backends not started yet (idle) and disabled ones
// are not taken for backends that failed to become ready.
const COUNT_ORDER = ["ready", "starting", "restarting", "idle", "needs_auth", "failed", "stopped", "disabled"];
const COUNT_WORDS = { needs_auth: "need auth" };

function backendCounts(list) {
  const counts = {};
  for (const backend of list) {
    const key = backend.enabled === false ? "disabled" : backend.state;
    counts[key] = (counts[key] || 0) + 1;
  }
  const known = COUNT_ORDER.filter((key) => counts[key]);
  const other = Object.keys(counts).filter((key) => !COUNT_ORDER.includes(key));
  return [...known, ...other].map((key) => `${counts[key]} ${COUNT_WORDS[key] || key}`).join(", ") || "none";
}

function renderBackends() {
  const list = [...state.backends.values()];
  $("backend-counts").textContent = backendCounts(list);
  const box = $("backends");
  box.replaceChildren();
  if (!list.length) box.append(el("p", { class: "muted", text: "no backends are configured" }));
  for (const backend of list) {
    const state_ = backend.enabled === false ? "disabled" : backend.state;
    const meta = [
      backend.url ? backend.url : null,
      backend.pid ? `pid ${backend.pid}` : null,
      backend.start === "lazy" ? "lazy" : null,
      `${backend.tools.length} tools`,
      backend.restarts ? `${backend.restarts} restarts` : null,
    ].filter(Boolean).join(" · ");
    const busy = backend.state === "starting" || backend.state === "restarting";
    const note = state.restartNotes.get(backend.id);
    box.append(
      el("div", { class: "backend", "data-backend": backend.id },
        el("div", { class: "backend-head" },
          el("span", { class: "id", text: backend.id }),
          el("span", { class: `badge ${state_}`, text: state_ }),
          el("button", {
            type: "button",
            class: "small secondary restart",
            text: backend.state === "idle" || backend.state === "stopped" ? "Start" : "Restart",
            title: backend.enabled === false ? "disabled in the config" : `restart ${backend.id} now`,
            disabled: backend.enabled === false || busy,
            onclick: () => restartBackend(backend.id),
          })),
        el("div", { class: "meta", text: [backend.description, meta].filter(Boolean).join(" — ") }),
        backend.lastError ? el("div", { class: "error", text: backend.lastError }) : null,
        note ? el("div", { class: "error restart-note", text: note }) : null,
        latencyChart(backend.id),
        backend.tools.length
          ? el("div", { class: "chips" }, backend.tools.map((tool) => backend.enabled === false
            ? el("span", { class: "chip", text: tool })
            : el("button", { type: "button", class: "chip tool", text: tool, title: `${tool}: schema and form`, onclick: () => openTool(backend.id, tool) })))
          : null,
        backend.stderrTail.length
          ? el("details", {}, el("summary", { text: `stderr (last ${backend.stderrTail.length} lines)` }),
              el("pre", { text: backend.stderrTail.join("\n") }))
          : null));
  }
}

// The latency of a backend's last calls, from the traces the page already holds: one bar per call,
// oldest on the left, its height relative to the slowest shown; failed calls in red.
const LATENCY_CALLS = 30;

function backendCalls(id) {
  const calls = [];
  for (const trace of state.traces.values()) {
    for (const span of trace.spans) {
      // The backend call's span, as OpenTelemetry names it ("tools/call <tool>", agentify.backend).
      const isCall = span.name.startsWith("tools/call ") && span.attributes["agentify.backend"] === id;
      if (isCall && span.durationMs !== null && span.durationMs !== undefined) {
        calls.push(span);
      }
    }
  }
  return calls.sort((a, b) => a.start - b.start).slice(-LATENCY_CALLS);
}

function latencyChart(id) {
  const calls = backendCalls(id);
  if (!calls.length) return null;
  const times = calls.map((span) => span.durationMs);
  const slowest = Math.max(...times, 1);
  const median = times.slice().sort((a, b) => a - b)[Math.floor((times.length - 1) / 2)];
  const summary = `${calls.length} call${calls.length === 1 ? "" : "s"} · median ${ms(median)} · last ${ms(times[times.length - 1])}`;
  return el("div", { class: "latency", "data-latency": id },
    el("div", { class: "latency-bars", title: summary },
      calls.map((span) => el("span", {
        class: `latency-bar${span.error ? " failed" : ""}`,
        title: `${span.attributes.tool}: ${ms(span.durationMs)}`,
        style: { height: `${Math.max((span.durationMs / slowest) * 100, 4)}%` },
      }))),
    el("div", { class: "latency-label", text: summary }));
}

async function loadConfig() {
  try {
    const response = await api("/api/config");
    $("config").textContent = response.ok ? json(await response.json()) : `HTTP ${response.status}`;
  } catch (error) {
    $("config").textContent = `cannot load the configuration: ${error}`;
  }
}

// ----- traces --------------------------------------------------------------------------------

function upsertTrace(trace) {
  const isNew = !state.traces.has(trace.id);
  state.traces.set(trace.id, trace);
  if (isNew && state.followNextTrace) {
    state.followNextTrace = false;
    state.selected = trace.id;
  }
  renderTraceList();
  if (trace.id === state.selected) renderTraceDetail();
}

// Spans are OpenTelemetry's: the backend call is named "tools/call <tool>" (the MCP conventions).
const stepOf = (span) => (span.attributes["mcp.method.name"] ? "call" : span.name);
const CONTENT = ["gen_ai.tool.call.arguments", "gen_ai.tool.call.result"];

// call_tool traces have no plan span: the tool the IDE's model chose is on the validate span.
const planSpan = (trace) =>
  trace.spans.find((s) => s.name === "plan") ||
  trace.spans.find((s) => s.name === "validate" && s.attributes["agentify.backend"]);

// Over stdio the one client is whoever started agentify: its traces carry no principal ("local").
const principalOf = (trace) => trace.principal || "local";

function traceSummary(trace) {
  const plan = planSpan(trace);
  const backend = plan && plan.attributes["agentify.backend"];
  const tool = backend ? `${backend}.${plan.attributes["gen_ai.tool.name"]}` : null;
  return [clock(trace.start), trace.kind, tool, trace.error ? trace.error.code : null]
    .filter(Boolean).join(" · ");
}

function renderTraceList() {
  const list = $("trace-list");
  const traces = [...state.traces.values()].sort((a, b) => b.start - a.start);
  list.replaceChildren(...traces.map((trace) =>
    el("li", {
      class: `trace-item${trace.id === state.selected ? " selected" : ""}`,
      "data-trace-id": trace.id,
      "data-status": trace.status,
      onclick: () => selectTrace(trace.id),
    },
      el("span", { class: `dot ${trace.status}` }),
      el("span", { class: "query", text: trace.input.query || trace.input.name || trace.input.input || "(no query)" }),
      el("span", { class: "principal", text: principalOf(trace), title: "who asked (the principal)" }),
      el("span", { class: "muted", text: ms(trace.durationMs) }),
      el("span", { class: "sub", text: traceSummary(trace) }))));
  if (!traces.length) list.append(el("li", { class: "muted", text: "no tasks yet" }));
}

// A task's own id, or an OpenTelemetry trace id (what results and log lines carry): its newest task.
function selectTrace(id) {
  const inTrace = [...state.traces.values()].filter((t) => t.traceId === id).sort((a, b) => b.start - a.start);
  state.selected = state.traces.has(id) || !inTrace.length ? id : inTrace[0].id;
  renderTraceList();
  renderTraceDetail();
}

function spanAttributes(span) {
  const shown = Object.entries(span.attributes).filter(([key]) => !CONTENT.includes(key));
  const parts = shown.map(([key, value]) => [el("b", { text: key }), `=${typeof value === "string" ? value : JSON.stringify(value)}  `]);
  if (span.error) parts.push([el("b", { text: "error" }), `=${span.error}`]);
  return el("div", { class: "span-attrs" }, parts);
}

function waterfall(trace) {
  const end = trace.end || Date.now() / 1000;
  const total = Math.max(end - trace.start, 0.001);
  return el("div", { class: "waterfall" }, trace.spans.map((span) => {
    const left = ((span.start - trace.start) / total) * 100;
    const width = (((span.end || end) - span.start) / total) * 100;
    const step = stepOf(span);
    return el("div", { class: "span-row", "data-span": step },
      el("span", { class: "span-name", text: span.name, title: span.name }),
      el("div", { class: "span-track" },
        el("div", { class: `span-bar ${step}${span.error ? " failed" : ""}`, style: { left: `${left}%`, width: `${width}%` } })),
      el("span", { class: "span-ms", text: ms(span.durationMs) }),
      spanAttributes(span));
  }));
}

function jsonBlock(title, value, open) {
  return el("details", { open: open.has(title) }, el("summary", { text: title }), el("pre", { class: "json", text: json(value) }));
}

function renderTraceDetail() {
  const box = $("trace-detail");
  const trace = state.traces.get(state.selected);
  if (!trace) {
    box.replaceChildren(el("p", { class: "muted", text: "Select a trace to see its spans." }));
    return;
  }
  const plan = planSpan(trace);
  const call = trace.spans.find((s) => stepOf(s) === "call");
  const request = { input: trace.input, plan: plan ? { ...plan.attributes } : null };
  const response = call ? { ...call.attributes, error: call.error } : trace.error;
  // Updates of the same trace keep the blocks the user opened.
  const open = box.dataset.trace === trace.id
    ? new Set([...box.querySelectorAll("details[open] > summary")].map((summary) => summary.textContent))
    : new Set();
  box.dataset.trace = trace.id;
  box.replaceChildren(...[
    el("div", { class: "trace-title" },
      el("span", { class: `badge ${trace.status}`, text: trace.status }),
      el("b", { text: trace.input.query || trace.kind }),
      el("span", { class: "muted", text: `total ${ms(trace.durationMs)}` }),
      el("span", { class: "muted", text: `by ${principalOf(trace)}` }),
      el("span", { class: "id", text: trace.traceId || trace.id })),
    trace.error ? el("div", { class: "trace-error", text: `${trace.error.code}: ${trace.error.message}` }) : null,
    waterfall(trace),
    jsonBlock("Request (input and plan)", request, open),
    jsonBlock("Response (backend call)", response || {}, open),
    jsonBlock("Raw trace", trace, open),
    el("div", { class: "trace-logs" },
      el("h2", { text: "Log lines of this task" }),
      el("ol", { class: "log-list", id: "trace-log-list" },
        state.logs.filter((r) => r.extra && r.extra.trace === (trace.traceId || trace.id)).map(logRow))),
  ].filter(Boolean));
}

// ----- logs ----------------------------------------------------------------------------------

function logMatches(record) {
  const floor = Number($("log-level").value);
  if ((LEVELS[record.level] || 0) < floor) return false;
  const needle = $("log-search").value.trim().toLowerCase();
  if (!needle) return true;
  const haystack = `${record.message} ${record.logger} ${Object.values(record.extra || {}).join(" ")}`.toLowerCase();
  return haystack.includes(needle);
}

function logRow(record) {
  const extra = record.extra || {};
  const source = extra.backend ? `backend=${extra.backend}` : record.logger;
  return el("li", { class: "log", "data-level": record.level },
    el("span", { class: "time", text: clockMs(record.time) }),
    el("span", { class: `level ${record.level}`, text: record.level }),
    el("span", { class: "source", text: source, title: source }),
    el("span", { class: "message" },
      extra.trace ? el("span", { class: "trace-tag", text: `[${extra.trace.slice(0, 8)}]`, onclick: () => selectTrace(extra.trace) }) : null,
      record.message));
}

function addLog(record) {
  state.logs.push(record);
  if (state.logs.length > MAX_LOGS) state.logs.splice(0, state.logs.length - MAX_LOGS);
  if (logMatches(record)) {
    const list = $("log-list");
    list.append(logRow(record));
    while (list.childElementCount > MAX_LOG_ROWS) list.firstElementChild.remove();
    followLogs();
  }
  if (record.extra && record.extra.trace && record.extra.trace === state.selected) {
    const traceLogs = $("trace-log-list");
    if (traceLogs) traceLogs.append(logRow(record));
  }
  $("log-count").textContent = `${$("log-list").childElementCount} shown`;
}

function renderLogs() {
  const rows = state.logs.filter(logMatches).slice(-MAX_LOG_ROWS).map(logRow);
  $("log-list").replaceChildren(...rows);
  $("log-count").textContent = `${rows.length} shown`;
  followLogs();
}

function followLogs() {
  if ($("log-follow").checked) $("log-list").scrollTop = $("log-list").scrollHeight;
}

// ----- the task box --------------------------------------------------------------------------

async function runTask(submit) {
  submit.preventDefault();
  const query = $("task-query").value.trim();
  if (!query) return;
  const cwd = $("task-cwd").value.trim();
  const body = { query, context: cwd ? { currentWorkingDirectory: cwd } : null };
  $("task-run").disabled = true;
  $("task-state").textContent = "running…";
  state.followNextTrace = true;
  try {
    const response = await api("/api/tasks", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    showResult(await response.json());
    $("task-state").textContent = "";
  } catch (error) {
    $("task-state").textContent = String(error);
  } finally {
    $("task-run").disabled = false;
  }
}

// An MCP result in one of the page's result boxes (`prefix`: "task" or "tool").
function showResult(result, prefix = "task") {
  const meta = result._meta || {};
  const info = meta["agentify/plan"] || meta["agentify/error"] || {};
  const failed = !!result.isError;
  $(`${prefix}-result`).hidden = false;
  $(`${prefix}-result-badge`).className = `badge ${failed ? "error" : "ok"}`;
  $(`${prefix}-result-badge`).textContent = failed ? (meta["agentify/error"] || {}).code || "error" : "ok";
  $(`${prefix}-result-trace`).textContent = info.traceId ? `trace ${info.traceId}` : "";
  $(`${prefix}-result-trace`).onclick = (click) => {
    click.preventDefault();
    if (info.traceId) selectTrace(info.traceId);
  };
  const texts = (result.content || []).map((block) => (block.type === "text" ? block.text : `[${block.type} content]`));
  $(`${prefix}-result-text`).textContent = texts.join("\n") || json(result);
  if (info.traceId) selectTrace(info.traceId);
}

async function failure(response) {
  try {
    const body = await response.json();
    return typeof body.detail === "string" ? body.detail : `HTTP ${response.status}: ${json(body.detail)}`;
  } catch (error) {
    return `HTTP ${response.status}`;
  }
}

// ----- a backend's restart -------------------------------------------------------------------

async function restartBackend(id) {
  state.restartNotes.delete(id);
  try {
    const response = await api(`/api/backends/${encodeURIComponent(id)}/restart`, { method: "POST" });
    if (response.ok) state.backends.set(id, await response.json());
    else state.restartNotes.set(id, await failure(response));
  } catch (error) {
    state.restartNotes.set(id, `cannot restart: ${error}`);
  }
  renderBackends();  // the state then follows live, from the backend's events
}

// ----- start ---------------------------------------------------------------------------------

function start() {
  takeTokenFromAddress();
  $("task-form").addEventListener("submit", runTask);
  $("task-query").addEventListener("keydown", (key) => {
    if (key.key === "Enter" && (key.ctrlKey || key.metaKey)) $("task-form").requestSubmit();
  });
  $("log-level").addEventListener("change", renderLogs);
  $("log-search").addEventListener("input", renderLogs);
  $("config-box").addEventListener("toggle", () => { if ($("config-box").open) loadConfig(); });
  setInterval(renderUptime, 1000);
  connect();
}

document.addEventListener("DOMContentLoaded", start);
