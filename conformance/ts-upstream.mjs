// A TypeScript MCP server (@modelcontextprotocol/server, pinned in
// package.json) whose tools keep their state the way many servers in the
// field do: in a plain, readable requestState (a JSON string, no codec, no
// HMAC). internal/e2e (proxy_ts_test.go) runs it directly and behind the
// mrtr proxy to show what the proxy adds.
//
// Usage (from this folder, with the pinned Node 22):
//   node_modules/.bin/node ts-upstream.mjs PORT [codec]
// Prints "listening http://127.0.0.1:PORT/mcp" once it serves.
//
// With "codec" the same tools keep their state the way the SDK offers to
// protect it: createRequestStateCodec (HMAC-SHA256, a random key, bound to
// the method), its payload naming the tool it was minted for, which each
// tool checks. internal/e2e (probe_test.go) probes both.
//
// Tools (2026-07-28 wire):
//   transfer {to, amount}: asks `confirm`, keeps {to, amount} in the state;
//     on the retry it transfers what the STATE says (trusting it).
//   audit {}: asks `confirm`; on the retry it reports the state it got.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { McpServer, createMcpHandler, inputRequired, acceptedContent, createRequestStateCodec, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const port = Number(process.argv[2] ?? 0);
const codec = process.argv[3] === 'codec'
  ? createRequestStateCodec({ key: randomBytes(32), bind: (ctx) => ctx.mcpReq.method })
  : undefined;

// mint and open keep a tool's state: plain JSON, or through the codec
// with the tool's name in the payload.
const mint = async (tool, payload, ctx) => codec ? codec.mint({ tool, ...payload }, ctx) : JSON.stringify(payload);
function open(tool, ctx) {
  const st = ctx.mcpReq.requestState();
  if (st === undefined || !codec) return st;
  if (st?.tool !== tool) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid or expired requestState');
  return JSON.stringify(st);
}

const confirm = () => inputRequired.elicit({
  message: 'Confirm?',
  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
});

function factory() {
  const server = new McpServer({ name: codec ? 'ts-codec-state' : 'ts-plain-state', version: '1.0.0' },
    codec ? { requestState: { verify: codec.verify } } : undefined);
  server.registerTool('transfer', {
    description: 'Transfer money after a confirmation (state kept in plain JSON)',
    inputSchema: z.object({ to: z.string(), amount: z.number() }),
  }, async ({ to, amount }, ctx) => {
    const raw = open('transfer', ctx);
    const ok = acceptedContent(ctx.mcpReq.inputResponses, 'confirm');
    if (typeof raw === 'string' && ok?.ok === true) {
      let st;
      try { st = JSON.parse(raw); } catch { throw new Error('bad state'); }
      return { content: [{ type: 'text', text: `transferred ${st.amount} to ${st.to}` }] };
    }
    return inputRequired({ inputRequests: { confirm: confirm() }, requestState: await mint('transfer', { to, amount }, ctx) });
  });
  server.registerTool('audit', {
    description: 'Reports the state it is resumed with',
    inputSchema: z.object({}),
  }, async (_args, ctx) => {
    const raw = open('audit', ctx);
    if (typeof raw === 'string') {
      return { content: [{ type: 'text', text: `audited ${raw}` }] };
    }
    return inputRequired({ inputRequests: { confirm: confirm() }, requestState: await mint('audit', { audit: true }, ctx) });
  });
  return server;
}

const handler = createMcpHandler(factory, { legacy: 'reject' });

const srv = http.createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
    const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, { method: req.method, headers, body, signal: ac.signal });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (e) {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(e));
  }
});
srv.listen(port, '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${srv.address().port}/mcp`);
});
