// Interop check through the sealing proxy: the TypeScript MCP client
// (@modelcontextprotocol/client, pinned in package.json), on the 2026-07-28
// wire with its own automatic input_required loop, calls one tool and
// answers every elicitation from its schema (name: "Alice", color:
// "blue", ok/confirm/approve: true).
//
// Usage (from this folder, with the pinned Node 22):
//   node_modules/.bin/node proxy-interop.mjs URL TOOL [ARGS_JSON]
// Prints one JSON line {text, isError, states: {sealed, plain}} (states:
// the requestStates the client echoed, mrtr tokens or not) and exits 0,
// or prints {"error": "..."} and exits 1. e2e
// (TestProxyInteropTypeScript) checks it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, tool, argsJSON] = process.argv.slice(2);
if (!url || !tool) {
  console.error('usage: node proxy-interop.mjs URL TOOL [ARGS_JSON]');
  process.exit(2);
}
const states = { sealed: 0, plain: 0 };
const recordingFetch = async (input, init = {}) => {
  if ((init.method ?? 'GET').toUpperCase() === 'POST' && typeof init.body === 'string') {
    try {
      const st = JSON.parse(init.body)?.params?.requestState;
      if (typeof st === 'string') st.startsWith('v1.') ? states.sealed++ : states.plain++;
    } catch { /* not JSON */ }
  }
  return fetch(input, init);
};

function answer(params) {
  const content = {};
  for (const k of Object.keys(params?.requestedSchema?.properties ?? {})) {
    content[k] = k === 'name' ? 'Alice' : k === 'color' ? 'blue' : ['ok', 'confirm', 'approve'].includes(k) ? true : 'x';
  }
  return { action: 'accept', content };
}

async function main() {
  const client = new Client(
    { name: 'mrtr-e2e-ts-proxy', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async (req) => answer(req.params ?? req));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
  try {
    const res = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON ?? '{}') });
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { text, isError: !!res.isError, states };
  } finally {
    await client.close();
  }
}

main().then(
  (out) => console.log(JSON.stringify(out)),
  (err) => {
    console.log(JSON.stringify({ error: `${err?.name ?? 'Error'}: ${err?.message ?? err}`, states }));
    process.exitCode = 1;
  },
);
