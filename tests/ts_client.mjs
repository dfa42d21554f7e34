// Drives agentify with the TypeScript v2 client (@modelcontextprotocol/client), as IDEs on it do.
//
// Usage: node tests/ts_client.mjs '<json>' where json is
//   {"command", "args", "env", "stderrFile", "mode": "legacy"|"auto",
//    "elicitation": "accept"|"decline"|"cancel"|null, "calls": [{"name", "arguments"}], "readLinks"?: bool}
// or, over streamable HTTP, {"url", "token", ...} instead of command, args, env and stderrFile.
// With "elicitation": null the client declares no elicitation capability; "content" is what an accepted form
// holds (none by default: a confirmation's). With "readLinks", every
// resource_link of the results is read with resources/read afterwards. With "logLevel", the client asks
// for log messages at that level (logging/setLevel on 2025-11-25, each call's _meta on 2026-07-28).
// With "aborts": [{"method": "tools/call"|"resources/read", "params", "when": {"file", "pattern", "count"}}],
// each of those requests is sent with an AbortSignal (after the calls) and aborted once `file` has `count` lines matching `pattern` (the
// backend runs it); over HTTP, every request the transport sends is recorded, and the notifications sent
// are let finish before the client closes.
// Prints one JSON line: {"protocolVersion", "capabilities", "asked": [messages], "results": [CallToolResult...],
//   "read": [ReadResourceResult...], "logs": [notifications/message params...],
//   "aborted": [the error each aborted request ended with], "sent": [{"http", "method", "id", "session",
//   "aborted"}: each HTTP request, its JSON-RPC method and id, its Mcp-Session-Id, whether its fetch was aborted
//   before the client closed]}.
import { openSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const spec = JSON.parse(process.argv[2]);
const capabilities = spec.elicitation ? { elicitation: { form: {} } } : {};
const client = new Client(
  { name: "agentify-ts-test", version: "1.0.0" },
  { capabilities, versionNegotiation: { mode: spec.mode } },
);
const asked = [];
if (spec.elicitation) {
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push({ message: request.params.message, schema: request.params.requestedSchema });
    const content = spec.content ?? {};
    return spec.elicitation === "accept" ? { action: "accept", content } : { action: spec.elicitation };
  });
}
const sent = [];
const notifying = []; // the POSTs of notifications: a client that goes on running lets them finish
let closing = false;
const recording = async (url, init) => {
  let body = null;
  try {
    body = typeof init?.body === "string" ? JSON.parse(init.body) : null;
  } catch {
    body = null;
  }
  const entry = {
    http: init?.method ?? "GET",
    method: body?.method ?? null,
    id: body?.id ?? null,
    session: new Headers(init?.headers).get("mcp-session-id"),
    aborted: false,
  };
  sent.push(entry);
  init?.signal?.addEventListener("abort", () => {
    entry.aborted = !closing; // close() aborts every fetch: only an abort before it counts
  });
  const answer = fetch(url, init);
  if (body?.method?.startsWith("notifications/")) notifying.push(answer.catch(() => null));
  return answer;
};
const transport = spec.url
  ? new StreamableHTTPClientTransport(new URL(spec.url), {
      requestInit: { headers: { Authorization: `Bearer ${spec.token}` } },
      fetch: recording,
    })
  : new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: spec.env,
      stderr: openSync(spec.stderrFile, "a"),
    });
const logs = [];
client.setNotificationHandler("notifications/message", (notification) => {
  logs.push(notification.params);
});
await client.connect(transport);
if (spec.logLevel && spec.mode === "legacy") await client.setLoggingLevel(spec.logLevel);
const meta = spec.logLevel ? { _meta: { "io.modelcontextprotocol/logLevel": spec.logLevel } } : {};
const results = [];
for (const call of spec.calls) {
  results.push(await client.callTool({ name: call.name, arguments: call.arguments, ...meta }));
}
const read = [];
for (const result of spec.readLinks ? results : []) {
  for (const block of result.content ?? []) {
    if (block.type === "resource_link") read.push(await client.readResource({ uri: block.uri }));
  }
}
const matching = (when) => {
  let text = "";
  try {
    text = readFileSync(when.file, "utf8");
  } catch {
    return 0;
  }
  return text.split("\n").filter((line) => new RegExp(when.pattern).test(line)).length;
};
const aborted = [];
for (const abort of spec.aborts ?? []) {
  const controller = new AbortController();
  const send = abort.method === "resources/read" ? client.readResource : client.callTool;
  const pending = send.call(client, abort.params, { signal: controller.signal });
  const settled = pending.then(
    () => "answered",
    (error) => String(error),
  );
  const deadline = Date.now() + 60_000;
  while (matching(abort.when) < abort.when.count && Date.now() < deadline) await sleep(50);
  controller.abort("the test aborts it");
  aborted.push(await settled);
}
const protocolVersion = client.getNegotiatedProtocolVersion();
const serverCapabilities = client.getServerCapabilities();
await Promise.all(notifying); // the SDK sends notifications/cancelled without waiting for it
closing = true;
await client.close();
process.stdout.write(
  JSON.stringify({ protocolVersion, capabilities: serverCapabilities, asked, results, read, logs, aborted, sent }) +
    "\n",
);
