// Interop check: the TypeScript MCP client (@modelcontextprotocol/client,
// pinned in package.json) against an mrtr server, on the 2026-07-28 wire.
//
// Usage (from this folder, with the pinned Node 22):
//   node_modules/.bin/node interop.mjs http://127.0.0.1:PORT/mcp
//   (MRTR_INTEROP_BEARER=<token> to send a bearer token;
//    MRTR_INTEROP_VERSION=2025-11-25 to pin the client to the older wire,
//    where the server asks through the session instead)
//
// The client is pinned to 2026-07-28 (no fallback to the 2025 handshake) and
// runs its own automatic input_required loop: each elicitation/create input
// request goes to the handler below, and the call is retried with
// inputResponses and the echoed requestState. The handler plays the user:
// it approves `deploy` and plays `guess_number` by binary search on the
// higher/lower hints in the server's message.
//
// Prints one JSON line (the last line of stdout) and exits 0, or prints
// {"error": "..."} and exits 1. e2e (TestInteropTypeScript) checks it.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const VERSION = process.env.MRTR_INTEROP_VERSION || '2026-07-28';
const GUESS_MAX = 8;
const MAX_GAMES = 6; // play until a game needs >= 2 guesses (a first guess is right 1 time in 8)

const url = process.argv[2];
if (!url) {
  console.error('usage: node interop.mjs http://127.0.0.1:PORT/mcp');
  process.exit(2);
}

// MRTR_INTEROP_BEARER, when set, is sent as a bearer token on every request
// (e2e's auth tests run the server as an OAuth resource server).
const bearer = process.env.MRTR_INTEROP_BEARER ?? '';

// What the client really sent, so the test can tell which wire it spoke.
const wire = { methods: {}, versions: {}, withState: 0 };
const recordingFetch = async (input, init = {}) => {
  if (bearer) {
    const headers = new Headers(init.headers);
    headers.set('authorization', `Bearer ${bearer}`);
    init = { ...init, headers };
  }
  if ((init.method ?? 'GET').toUpperCase() === 'POST' && typeof init.body === 'string') {
    const headers = new Headers(init.headers);
    const v = headers.get('mcp-protocol-version') ?? '';
    wire.versions[v] = (wire.versions[v] ?? 0) + 1;
    try {
      const msg = JSON.parse(init.body);
      if (msg.method) {
        wire.methods[msg.method] = (wire.methods[msg.method] ?? 0) + 1;
        if (msg.method === 'tools/call' && typeof msg.params?.requestState === 'string') wire.withState++;
      }
    } catch { /* not JSON: leave it to the server */ }
  }
  return fetch(input, init);
};

// The user at the keyboard.
let approvals = 0;
let game = null; // { lo, hi, last, guesses, hints }

function answer(params) {
  const props = params?.requestedSchema?.properties ?? {};
  if ('approve' in props) {
    approvals++;
    return { action: 'accept', content: { approve: true } };
  }
  if ('guess' in props) {
    if (!game) throw new Error('guess requested outside a game');
    if (game.last !== 0) {
      const m = String(params.message ?? '').toLowerCase();
      const higher = m.includes('higher');
      const lower = m.includes('lower');
      if (higher && !lower) game.lo = game.last + 1;
      else if (lower && !higher) game.hi = game.last - 1;
      else throw new Error(`guess ${game.last}: no unambiguous higher/lower hint in ${JSON.stringify(params.message)}`);
    }
    if (game.lo > game.hi) throw new Error(`inconsistent hints: secret in [${game.lo}, ${game.hi}]`);
    game.last = Math.floor((game.lo + game.hi) / 2);
    game.guesses++;
    game.hints.push(String(params.message ?? ''));
    return { action: 'accept', content: { guess: game.last } };
  }
  throw new Error(`unexpected elicitation ${JSON.stringify(params)}`);
}

const text = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function main() {
  const client = new Client(
    { name: 'mrtr-e2e-ts', version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: VERSION >= '2026-07-28' ? { pin: VERSION } : 'legacy' },
    },
  );
  client.setRequestHandler('elicitation/create', async (req) => answer(req.params ?? req));
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
  const out = {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    era: client.getProtocolEra(),
  };
  try {
    const deploy = await client.callTool({ name: 'deploy', arguments: { service: 'billing', env: 'production' } });
    out.deploy = { text: text(deploy), isError: !!deploy.isError, approvals };

    for (let n = 1; n <= MAX_GAMES; n++) {
      game = { lo: 1, hi: GUESS_MAX, last: 0, guesses: 0, hints: [] };
      const res = await client.callTool({ name: 'guess_number', arguments: { max: GUESS_MAX } });
      out.guess = { text: text(res), isError: !!res.isError, secret: game.last, guesses: game.guesses, games: n, hints: game.hints };
      if (res.isError || game.guesses >= 2) break;
    }
  } finally {
    await client.close();
  }
  out.wire = wire;
  return out;
}

main().then(
  (out) => {
    console.log(JSON.stringify(out));
  },
  (err) => {
    const detail = err?.data !== undefined ? ` data=${JSON.stringify(err.data)}` : '';
    console.log(JSON.stringify({ error: `${err?.name ?? 'Error'}: ${err?.message ?? err}${detail}`, approvals, game, wire }));
    process.exitCode = 1;
  },
);
