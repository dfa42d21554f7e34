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
// Prints one JSON line: {"protocolVersion", "capabilities", "asked": [messages], "results": [CallToolResult...],
//   "read": [ReadResourceResult...], "logs": [notifications/message params...]}.
import { openSync } from "node:fs";
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
const transport = spec.url
  ? new StreamableHTTPClientTransport(new URL(spec.url), {
      requestInit: { headers: { Authorization: `Bearer ${spec.token}` } },
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
const protocolVersion = client.getNegotiatedProtocolVersion();
const serverCapabilities = client.getServerCapabilities();
await client.close();
process.stdout.write(JSON.stringify({ protocolVersion, capabilities: serverCapabilities, asked, results, read, logs }) + "\n");
