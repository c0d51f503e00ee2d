// Interop check through the sealing proxy: the TypeScript MCP client
// (@modelcontextprotocol/client, pinned in package.json), on the 2026-07-28
// wire with its own automatic input_required loop, calls one tool and
// answers every elicitation from its schema (name: "Alice", color:
// "blue", ok/confirm/approve: true; any other field its default or a value
// of its type, first choice or format, e.g. email "alice@example.com").
//
// Usage (from this folder, with the pinned Node 22):
//   node_modules/.bin/node proxy-interop.mjs URL TOOL [ARGS_JSON [auto]]
// The client is pinned to 2026-07-28; with "auto" it negotiates instead
// (versionNegotiation mode 'auto': server/discover, falling back to a
// 2025-11-25 initialize).
// Prints one JSON line {text, isError, protocolVersion, states: {sealed,
// plain}} (protocolVersion: the one negotiated; states: the requestStates
// the client echoed, mrtr tokens or not) and exits 0, or prints
// {"error": "..."} and exits 1. e2e (TestProxyInteropTypeScript,
// TestBridgeTSClient) checks it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, tool, argsJSON, negotiate] = process.argv.slice(2);
if (!url || !tool || (negotiate !== undefined && negotiate !== 'auto')) {
  console.error('usage: node proxy-interop.mjs URL TOOL [ARGS_JSON [auto]]');
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
  for (const [k, p] of Object.entries(params?.requestedSchema?.properties ?? {})) content[k] = value(k, p ?? {});
  return { action: 'accept', content };
}

// value answers one field: by name where the test servers expect a value, else the
// field's default, else something of its type, choices and format.
function value(k, p) {
  if (k === 'name') return 'Alice';
  if (k === 'color') return 'blue';
  if (['ok', 'confirm', 'approve'].includes(k)) return true;
  if (p.default !== undefined) return p.default;
  const first = (s) => s?.enum?.[0] ?? (s?.oneOf ?? s?.anyOf)?.[0]?.const;
  const type = Array.isArray(p.type) ? p.type.find((t) => t !== 'null') : p.type;
  if (type === 'boolean') return true;
  if (type === 'integer' || type === 'number') return p.minimum ?? 1;
  if (type === 'array') return first(p.items) === undefined ? [] : [first(p.items)];
  if (first(p) !== undefined) return first(p);
  return { email: 'alice@example.com', uri: 'https://example.com/alice', date: '2000-01-01', 'date-time': '2000-01-01T00:00:00Z' }[p.format] ?? 'x';
}

async function main() {
  const client = new Client(
    { name: 'mrtr-e2e-ts-proxy', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: negotiate === 'auto' ? 'auto' : { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async (req) => answer(req.params ?? req));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
  try {
    const res = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON ?? '{}') });
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { text, isError: !!res.isError, protocolVersion: client.getNegotiatedProtocolVersion(), states };
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
