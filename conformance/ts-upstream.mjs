// A TypeScript MCP server (@modelcontextprotocol/server, pinned in
// package.json) whose tools keep their state the way many servers in the
// field do: in a plain, readable requestState (a JSON string, no codec, no
// HMAC). e2e (proxy_ts_test.go) runs it directly and behind the
// mrtr proxy to show what the proxy adds.
//
// Usage (from this folder, with the pinned Node 22):
//   node_modules/.bin/node ts-upstream.mjs PORT
// Prints "listening http://127.0.0.1:PORT/mcp" once it serves.
//
// Tools (2026-07-28 wire):
//   transfer {to, amount}: asks `confirm`, keeps {to, amount} in the state;
//     on the retry it transfers what the STATE says (trusting it).
//   audit {}: asks `confirm`; on the retry it reports the state it got.
import http from 'node:http';
import { McpServer, createMcpHandler, inputRequired, acceptedContent } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const port = Number(process.argv[2] ?? 0);

const confirm = () => inputRequired.elicit({
  message: 'Confirm?',
  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
});

function factory() {
  const server = new McpServer({ name: 'ts-plain-state', version: '1.0.0' });
  server.registerTool('transfer', {
    description: 'Transfer money after a confirmation (state kept in plain JSON)',
    inputSchema: z.object({ to: z.string(), amount: z.number() }),
  }, async ({ to, amount }, ctx) => {
    const raw = ctx.mcpReq.requestState();
    const ok = acceptedContent(ctx.mcpReq.inputResponses, 'confirm');
    if (typeof raw === 'string' && ok?.ok === true) {
      let st;
      try { st = JSON.parse(raw); } catch { throw new Error('bad state'); }
      return { content: [{ type: 'text', text: `transferred ${st.amount} to ${st.to}` }] };
    }
    return inputRequired({ inputRequests: { confirm: confirm() }, requestState: JSON.stringify({ to, amount }) });
  });
  server.registerTool('audit', {
    description: 'Reports the state it is resumed with',
    inputSchema: z.object({}),
  }, async (_args, ctx) => {
    const raw = ctx.mcpReq.requestState();
    if (typeof raw === 'string') {
      return { content: [{ type: 'text', text: `audited ${raw}` }] };
    }
    return inputRequired({ inputRequests: { confirm: confirm() }, requestState: JSON.stringify({ audit: true }) });
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
