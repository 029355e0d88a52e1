// What an agent does with band over MCP, with the official MCP TypeScript SDK, over stdio or HTTP:
// the same steps and the same JSON report as tests/mcp/agent.py (read its docstring).
//
// Usage: node agent.mjs stdio BAND_EXE SERVER_ARGS...
//        node agent.mjs http URL
// $MCP_NODE_MODULES is the node_modules folder that holds @modelcontextprotocol/sdk (.ci/run's
// target/ci-node/node_modules).

import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createInterface } from "node:readline";

const modules = process.env.MCP_NODE_MODULES;
const sdk = (p) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ResultSchema } = await sdk("types.js");

// The SDK (1.32) hands a notification to its handler a microtask later but a response at once,
// so a progress notification read in the same chunk as its call's result finds its handler
// already gone and is dropped ("unknown token": typescript-sdk#2580, open). band sends every
// notification of a call before its result; a client whose reads lag (a loaded machine) still
// sees them in one chunk. This hands the SDK one message per turn of the event loop, in the
// order they came, which is what the SDK's fix (#2378: dispatch in arrival order) does.
function oneMessageATurn(transport) {
  let deliver;
  const queue = [];
  const next = () => {
    const [message, extra] = queue.shift();
    deliver(message, extra);
    if (queue.length) setImmediate(next);
  };
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => deliver && ((message, extra) => queue.push([message, extra]) === 1 && setImmediate(next)),
    set: (f) => (deliver = f),
  });
  return transport;
}

const [mode, ...rest] = process.argv.slice(2);
const transport = oneMessageATurn(
  mode === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(rest[0])),
);
const client = new Client({ name: "band-tests", version: "0" });
// What the SDK finds wrong (a dropped notification among it) goes with a failure's message.
client.onerror = (e) => process.stderr.write(`client error: ${e.message}\n`);
await client.connect(transport);

const report = {};
report.tools = (await client.listTools()).tools.map((t) => t.name).sort();

const ok = await client.callTool({ name: "text__count", arguments: { text: "hello big world" } });
report.ok = { is_error: Boolean(ok.isError), structured: ok.structuredContent ?? null };

const bad = await client.callTool({ name: "text__count", arguments: { text: 5 } });
report.bad = { is_error: Boolean(bad.isError), headline: bad.content[0].text.split(":")[0] };

const progress = [];
const ticks = await client.callTool({ name: "probe__ticks", arguments: { name: "x" } }, undefined, {
  onprogress: (p) => progress.push(p.message),
});
report.progress = {
  is_error: Boolean(ticks.isError),
  messages: progress.filter((m) => m && m.includes("step ")).map((m) => m.slice(m.indexOf("step "))),
};
// A failed call says why (absent when it succeeded, so the two clients' reports stay equal).
if (ticks.isError) report.progress.error = ticks.content?.[0]?.text ?? null;

const abort = new AbortController();
let uid = null;
let ticked;
const firstTick = new Promise((resolve) => (ticked = resolve));
const call = client.callTool({ name: "probe__sleepy", arguments: { name: "x" } }, undefined, {
  signal: abort.signal,
  timeout: 600000,
  onprogress: (p) => {
    if (uid === null && p.message && p.message.includes("tick uid=")) {
      uid = Number(p.message.split("uid=")[1].split(/\s/)[0]);
      ticked();
    }
  },
});
await firstTick;
abort.abort();
let cancelled = false;
try {
  await call;
} catch {
  cancelled = abort.signal.aborted;
}
report.cancel = { cancelled, uid };
// The session stays open: the test sees the run gone (a cancel, not a disconnect), then says go on.
process.stderr.write(`cancelled uid=${uid}\n`);
await new Promise((resolve) => createInterface({ input: process.stdin }).once("line", resolve));

const listed = await client.request({ method: "skills/list", params: {} }, ResultSchema);
report.skills_list = listed.skills.map((s) => s.frontmatter.name).sort();
const got = await client.request({ method: "skills/get", params: { uri: "skill://text/SKILL.md" } }, ResultSchema);
report.skills_get = {
  name: got.skill.frontmatter.name,
  files: got.skill.resources.map((r) => r.uri).sort(),
};

const sorted = (v) =>
  Array.isArray(v)
    ? v.map(sorted)
    : v && typeof v === "object"
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]))
      : v;
process.stdout.write(JSON.stringify(sorted(report)) + "\n");
await client.close();
process.exit(0);
