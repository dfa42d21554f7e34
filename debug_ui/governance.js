// agentify debug console: the tools pinning withholds or flags (with their difference and an approve
// button) and the recent audit records. A gateway without pinning or an audit log says so in each panel.
// Loaded after console.js (its helpers: $, el, api, json, failure).
"use strict";

// Marks the panel of `name` as enabled or not; when not, says so in it and returns true.
function notEnabled(name, data, text) {
  $(`${name}-panel`).dataset.enabled = String(!!data.enabled);
  if (!data.enabled) $(name).replaceChildren(el("p", { class: "muted", text }));
  return !data.enabled;
}

let pinsTimer = null;
function loadPinsSoon() {
  clearTimeout(pinsTimer);
  pinsTimer = setTimeout(loadPins, 300);
}

async function loadPins() {
  const box = $("pins");
  try {
    const response = await api("/api/pins");
    if (!response.ok) throw new Error(await failure(response));
    renderPins(await response.json());
  } catch (error) {
    box.replaceChildren(el("p", { class: "muted", text: `cannot load the pinned tools: ${error.message || error}` }));
  }
}

function renderPins(data) {
  const box = $("pins");
  if (notEnabled("pins", data, "Pinning is not enabled on this gateway.")) return;
  if (!data.tools.length) {
    box.replaceChildren(el("p", { class: "muted", text: "Every tool is as it was first seen." }));
    return;
  }
  const byBackend = new Map();
  for (const tool of data.tools) {
    if (!byBackend.has(tool.backend)) byBackend.set(tool.backend, []);
    byBackend.get(tool.backend).push(tool);
  }
  box.replaceChildren(...[...byBackend].map(([backend, tools]) =>
    el("div", { class: "pin-backend", "data-pin-backend": backend },
      el("div", { class: "backend-head" },
        el("span", { class: "id", text: backend }),
        el("button", { type: "button", class: "small", text: "Approve", title: `accept the tools of ${backend} as they are now`, onclick: () => approvePins(backend) })),
      tools.map((tool) => el("div", { class: "pin" },
        el("div", {},
          el("span", { class: "mono", text: tool.tool }), " ",
          el("span", { class: `badge ${tool.withheld ? "failed" : "starting"}`, text: tool.withheld ? "withheld" : "flagged" })),
        el("div", { class: "meta", text: tool.reason || "" }),
        tool.difference
          ? el("details", {}, el("summary", { text: "difference" }), el("pre", { class: "diff", text: tool.difference }))
          : null)))));
}

async function approvePins(backend) {
  try {
    const response = await api(`/api/pins/${encodeURIComponent(backend)}/approve`, { method: "POST" });
    if (!response.ok) throw new Error(await failure(response));
  } catch (error) {
    $("pins").prepend(el("p", { class: "error", text: `cannot approve ${backend}: ${error.message || error}` }));
    return;
  }
  loadPins();
  loadAudit();
}

const AUDIT_SHOWN = 50;

async function loadAudit() {
  const box = $("audit");
  try {
    const response = await api(`/api/audit?limit=${AUDIT_SHOWN}`);
    if (!response.ok) throw new Error(await failure(response));
    renderAudit(await response.json());
  } catch (error) {
    box.replaceChildren(el("p", { class: "muted", text: `cannot load the audit records: ${error.message || error}` }));
  }
}

// A record's time as the log writes it: seconds since the epoch, or an ISO 8601 string.
const auditTime = (value) => (typeof value === "number" ? clock(value) : String(value || "").replace("T", " ").slice(0, 19));

function renderAudit(data) {
  const box = $("audit");
  if (notEnabled("audit", data, "The audit log is not enabled on this gateway.")) return;
  if (!data.records.length) {
    box.replaceChildren(el("p", { class: "muted", text: "No audit records yet." }));
    return;
  }
  box.replaceChildren(el("ol", { class: "audit-list" }, data.records.map((record) =>
    el("li", { class: "audit", "data-decision": record.decision || "" },
      el("span", { class: "time", text: auditTime(record.time) }),
      el("span", { class: "principal", text: record.principal || "local" }),
      el("span", { class: "what", text: [record.operation, record.target].filter(Boolean).join(" ") }),
      el("span", { class: `badge ${record.outcome === "ok" ? "ok" : "error"}`, text: [record.decision, record.outcome].filter(Boolean).join(" · ") })))));
}
