// agentify debug console: a tool's form and the confirmations asked in the page.
// Loaded after console.js (its helpers: $, el, api, json, failure, showResult, selectTrace).
//
// Clicking a tool in the backend list opens its dialog: the form is built from the tool's input
// schema (strings, numbers, booleans, enums, lists of strings); any other property is a JSON box,
// and the whole arguments object can be written as JSON. "Call" goes through POST /api/tools/call,
// the path of the MCP tool call_tool, so the gateway's checks and safety policy apply: a call that
// must be confirmed opens the confirmation dialog, answered through POST /api/confirmations/{id}.
"use strict";

const toolForm = { tool: null, fields: [] };

async function openTool(backendId, toolName) {
  const dialog = $("tool-dialog");
  toolForm.tool = null;
  toolForm.fields = [];
  dialog.dataset.tool = `${backendId}.${toolName}`;
  $("tool-name").textContent = `${backendId} · ${toolName}`;
  $("tool-description").textContent = "loading…";
  $("tool-confirm").hidden = true;
  $("tool-fields").replaceChildren();
  $("tool-fields").hidden = false;
  $("tool-as-json").checked = false;
  $("tool-as-json").disabled = false;
  $("tool-json").hidden = true;
  $("tool-json").value = "";
  $("tool-schema").textContent = "";
  $("tool-result").hidden = true;
  $("tool-state").textContent = "";
  $("tool-call").disabled = true;
  if (!dialog.open) dialog.showModal();
  let tools;
  try {
    const response = await api(`/api/tools?backend=${encodeURIComponent(backendId)}`);
    if (!response.ok) throw new Error(await failure(response));
    tools = await response.json();
  } catch (error) {
    $("tool-description").textContent = `cannot load the tool: ${error.message || error}`;
    return;
  }
  const tool = tools.find((t) => t.tool === toolName);
  if (!tool) {
    $("tool-description").textContent = `${backendId} does not offer ${toolName} now (its tools changed, or it is not ready).`;
    return;
  }
  toolForm.tool = tool;
  $("tool-name").textContent = `${tool.backend} · ${tool.tool}`;
  $("tool-description").textContent = tool.description || tool.title || "";
  if (tool.confirm) {
    $("tool-confirm").hidden = false;
    $("tool-confirm").textContent = `Asks for your confirmation before it runs: ${tool.confirm}.`;
  }
  $("tool-schema").textContent = json(tool.inputSchema);
  buildForm(tool.inputSchema || {});
  $("tool-call").disabled = false;
}

function buildForm(schema) {
  const box = $("tool-fields");
  const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const names = properties ? Object.keys(properties) : [];
  if (!names.length && schema.additionalProperties === false) {
    box.append(el("p", { class: "muted", text: "This tool takes no arguments." }));
    return;
  }
  if (!names.length) {  // no properties to show: only JSON can say what to send
    box.append(el("p", { class: "muted", text: "The form cannot show this schema: write the arguments as JSON." }));
    $("tool-as-json").checked = true;
    $("tool-as-json").disabled = true;
    $("tool-json").hidden = false;
    $("tool-json").value = "{}";
    return;
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  names.forEach((name, index) => {
    const field = makeField(name, properties[name] || {}, required.has(name), index);
    toolForm.fields.push(field);
    box.append(field.node);
  });
}

const PRIMITIVE = ["string", "number", "boolean"];
const LONG_TEXT = /content|text|body|code|script|query|message|prompt/i;

function fieldKind(schema) {
  const types = Array.isArray(schema.type) ? schema.type.filter((t) => t !== "null") : [schema.type];
  const type = types.length === 1 ? types[0] : undefined;
  if (Array.isArray(schema.enum) && schema.enum.length && schema.enum.every((v) => PRIMITIVE.includes(typeof v))) return "enum";
  if (type === "string") return "string";
  if (type === "integer" || type === "number") return "number";
  if (type === "boolean") return "boolean";
  const items = schema.items;
  if (type === "array" && items && !Array.isArray(items) && items.type === "string" && !items.enum) return "strings";
  return "json";
}

// One argument's input: `read()` gives {set, value} or {error}.
function makeField(name, schema, required, index) {
  const id = `tool-arg-${index}`;
  const kind = fieldKind(schema);
  const hasDefault = Object.prototype.hasOwnProperty.call(schema, "default");
  const defaultText = hasDefault ? `default: ${JSON.stringify(schema.default)}` : "";
  let input;
  let read;
  if (kind === "enum" || kind === "boolean") {
    const values = kind === "enum" ? schema.enum : [true, false];
    input = el("select", { id },
      required && !hasDefault ? null : el("option", { value: "", text: hasDefault ? `(${defaultText})` : "(not set)" }),
      values.map((value, i) => el("option", { value: String(i), text: String(value) })));
    read = () => (input.value === "" ? { set: false } : { set: true, value: values[Number(input.value)] });
  } else if (kind === "string") {
    input = LONG_TEXT.test(name) ? el("textarea", { id, rows: 3 }) : el("input", { id, type: "text" });
    input.placeholder = defaultText;
    read = () => (input.value === "" ? { set: false } : { set: true, value: input.value });
  } else if (kind === "number") {
    const integer = schema.type === "integer" || (Array.isArray(schema.type) && schema.type.includes("integer"));
    input = el("input", { id, type: "number", step: integer ? "1" : "any", placeholder: defaultText });
    read = () => {
      if (input.value.trim() === "") return { set: false };
      const value = Number(input.value);
      if (!Number.isFinite(value)) return { error: "is not a number" };
      if (integer && !Number.isInteger(value)) return { error: "must be a whole number" };
      return { set: true, value };
    };
  } else if (kind === "strings") {
    input = el("textarea", { id, rows: 3, placeholder: `one per line${defaultText ? `; ${defaultText}` : ""}` });
    read = () => {
      const lines = input.value.split("\n").filter((line) => line !== "");
      return lines.length ? { set: true, value: lines } : { set: false };
    };
  } else {
    input = el("textarea", { id, rows: 3, class: "mono", placeholder: `JSON${defaultText ? `; ${defaultText}` : ""}` });
    read = () => {
      if (input.value.trim() === "") return { set: false };
      try {
        return { set: true, value: JSON.parse(input.value) };
      } catch (error) {
        return { error: `is not valid JSON (${error.message})` };
      }
    };
  }
  const type = kind === "json" ? "JSON" : kind === "strings" ? "list of strings" : kind === "enum" ? "one of" : String(schema.type);
  const node = el("div", { class: "field", "data-arg": name, "data-kind": kind },
    el("label", { for: id },
      el("span", { class: "mono", text: name }),
      required ? el("span", { class: "required", text: " *", title: "required" }) : null,
      el("span", { class: "muted", text: ` ${type}` })),
    input,
    schema.description ? el("div", { class: "hint muted", text: schema.description }) : null);
  return { name, required, node, read };
}

// The arguments to send; throws an Error naming what cannot be read.
function collectArguments() {
  if ($("tool-as-json").checked) {
    let value;
    try {
      value = JSON.parse($("tool-json").value || "{}");
    } catch (error) {
      throw new Error(`the arguments are not valid JSON: ${error.message}`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("the arguments must be a JSON object");
    return value;
  }
  const args = {};
  const problems = [];
  for (const field of toolForm.fields) {
    const got = field.read();
    if (got.error) problems.push(`${field.name} ${got.error}`);
    else if (got.set) args[field.name] = got.value;
  }
  if (problems.length) throw new Error(problems.join("; "));
  return args;
}

function toggleJson() {
  const asJson = $("tool-as-json").checked;
  if (asJson) {
    try {
      $("tool-json").value = json(formArguments());
    } catch (error) {
      $("tool-json").value = "{}";
    }
  }
  $("tool-json").hidden = !asJson;
  $("tool-fields").hidden = asJson;
}

// What the form holds, leaving out what it cannot read (for the switch to JSON).
function formArguments() {
  const args = {};
  for (const field of toolForm.fields) {
    const got = field.read();
    if (got.set) args[field.name] = got.value;
  }
  return args;
}

async function callTool(submit) {
  submit.preventDefault();
  const tool = toolForm.tool;
  if (!tool) return;
  let args;
  try {
    args = collectArguments();
  } catch (error) {
    $("tool-state").textContent = error.message;
    return;
  }
  $("tool-call").disabled = true;
  $("tool-state").textContent = tool.confirm ? "waiting for your confirmation…" : "calling…";
  try {
    const response = await api("/api/tools/call", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: tool.name, arguments: args }),
    });
    if (!response.ok) throw new Error(await failure(response));
    showResult(await response.json(), "tool");
    $("tool-state").textContent = "";
  } catch (error) {
    $("tool-state").textContent = String(error.message || error);
  } finally {
    $("tool-call").disabled = false;
  }
}

// ----- confirmations -------------------------------------------------------------------------

let shownQuestion = null;

// Shows the oldest open question; closes the dialog when none is left (answered here, elsewhere, or expired).
function renderConfirmation() {
  const dialog = $("confirm-dialog");
  const next = state.confirmations.values().next().value;
  if (!next) {
    shownQuestion = null;
    if (dialog.open) dialog.close();
    return;
  }
  if (shownQuestion === next.id && dialog.open) return;
  shownQuestion = next.id;
  dialog.dataset.question = next.id;
  $("confirm-title").textContent = `Run ${next.tool} on ${next.backend}?`;
  $("confirm-message").textContent = next.message;
  $("confirm-state").textContent = "";
  $("confirm-accept").disabled = false;
  $("confirm-decline").disabled = false;
  if (!dialog.open) dialog.showModal();
}

async function answerConfirmation(answer) {
  const id = shownQuestion;
  if (!id) return;
  $("confirm-accept").disabled = true;
  $("confirm-decline").disabled = true;
  try {
    const response = await api(`/api/confirmations/${encodeURIComponent(id)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ answer }),
    });
    if (!response.ok) $("tool-state").textContent = await failure(response);
  } catch (error) {
    $("tool-state").textContent = `the answer did not reach agentify: ${error}`;
  }
  state.confirmations.delete(id);
  renderConfirmation();
}

function startTools() {
  $("tool-form").addEventListener("submit", callTool);
  $("tool-as-json").addEventListener("change", toggleJson);
  $("tool-close").addEventListener("click", () => $("tool-dialog").close());
  $("confirm-accept").addEventListener("click", () => answerConfirmation("accept"));
  $("confirm-decline").addEventListener("click", () => answerConfirmation("decline"));
  // Escape on the question is a no, never a silent yes.
  $("confirm-dialog").addEventListener("cancel", (event) => {
    event.preventDefault();
    answerConfirmation("decline");
  });
}

document.addEventListener("DOMContentLoaded", startTools);
