// For scripts/bench_http.py: call_tool p50 from the TypeScript client (@modelcontextprotocol/client), the
// client IDEs are built on, over stdio and streamable HTTP, in interleaved rounds on one session each.
//
// Usage: node --no-warnings scripts/bench_ts_client.mjs '<json>' where json is
//   {"targets": {NAME: {"command", "args", "env"} | {"url", "token"?}, "call": {"name", "arguments"}}},
//    "calls": N, "rounds": R}
// Prints one JSON line: {NAME: p50 in ms}. (--no-warnings: the client adds an abort listener per HTTP
// request to one signal, and Node warns past 1,500 of them.)
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const spec = JSON.parse(process.argv[2]);
const sessions = {};
for (const [name, target] of Object.entries(spec.targets)) {
  const client = new Client({ name: "agentify-bench", version: "1.0.0" }, { versionNegotiation: { mode: "legacy" } });
  const headers = target.token ? { Authorization: `Bearer ${target.token}` } : {};
  await client.connect(
    target.url
      ? new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers } })
      : new StdioClientTransport({ command: target.command, args: target.args, env: target.env, stderr: "ignore" }),
  );
  sessions[name] = { client, call: target.call, samples: [] };
}
async function round(session, count) {
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const result = await session.client.callTool(session.call);
    if (result.isError) throw new Error(JSON.stringify(result.content));
    session.samples.push(performance.now() - start);
  }
}
for (const session of Object.values(sessions)) await round(session, 50); // warm-up
const perRound = Math.max(Math.floor(spec.calls / spec.rounds), 1);
for (const session of Object.values(sessions)) session.samples = [];
for (let r = 0; r < spec.rounds; r++) {
  for (const session of Object.values(sessions)) await round(session, perRound);
}
const p50 = {};
for (const [name, session] of Object.entries(sessions)) {
  const sorted = session.samples.sort((a, b) => a - b);
  p50[name] = sorted[Math.floor(sorted.length / 2)];
  await session.client.close();
}
process.stdout.write(JSON.stringify(p50) + "\n");
