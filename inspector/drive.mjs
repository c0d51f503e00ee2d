// drive.mjs: complete an elicitation flow (by default the `deploy` tool) of an MCP server in the MCP Inspector's
// web UI, in Debian's headless chromium, and check what the user sees.
//
//   node_modules/.bin/node drive.mjs --server-url http://127.0.0.1:PORT/mcp --era modern|legacy \
//       [--flow deploy|everything-elicitation] [--out DIR] [--name LABEL] [--timeout SECONDS]
//
// It starts the pinned Inspector (`--web --transport http --server-url URL --protocol-era ERA`)
// on a free 127.0.0.1 port with a random API token, opens it in chromium (playwright-core,
// executablePath /usr/bin/chromium; nothing downloads a browser), connects, calls
// deploy {service: "api", env: "staging"}, approves in the Elicitation Request dialog, and checks:
//   modern (2026-07-28): the dialog carries the Inspector's MRTR note, the result is
//     "deployed api to staging", and the Protocol tab shows exactly one MRTR conversation of
//     2 rounds (round 1 input required, round 2 complete).
// --flow everything-elicitation calls server-everything's trigger-elicitation-request instead,
// answers name "Ada Lovelace" and check, and wants them in the result; the checks are the same.
//   legacy (2025-11-25): the same dialog without the MRTR note (the server asks with a
//     server-to-client elicitation/create on the session), the same result, and no MRTR group.
// It writes a screenshot of the finished call to DIR/inspector-LABEL-ERA.png (on failure
// DIR/inspector-LABEL-ERA-failed.png), prints its path, and exits 0 on success, 1 on a failed
// check (with the step that failed), 2 on bad usage. It stops the Inspector and the browser it
// started before exiting, also on SIGTERM/SIGINT.
// Run it with the Node 22 from this folder (node_modules/.bin/node): the Inspector needs >= 22.19.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const launcher = join(here, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
const chromiumPath = process.env.MRTR_CHROMIUM || '/usr/bin/chromium';
// The flags this machine kind needs: no sandbox as root, and no background traffic that the
// closed network would refuse. playwright-core adds --headless and a fresh --user-data-dir.
const chromiumArgs = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const ERAS = {
  modern: { version: '2026-07-28', badge: 'Modern' },
  legacy: { version: '2025-11-25', badge: 'Legacy' },
};
const MRTR_NOTE = /your answer is sent back as a retry of the original request \(MRTR\)/;

// The flows --flow picks: the tool to call, how to fill its arguments, the question the
// Elicitation Request dialog asks, how to answer it, and the text the result must show.
const FLOWS = {
  // deploy {service: "api", env: "staging"} of mrtr's demo server (mrtr serve).
  deploy: {
    tool: 'deploy',
    button: { name: 'deploy', exact: true }, // the tool's entry in the list
    async fill(page) {
      await page.getByRole('textbox', { name: 'service', exact: true }).fill('api');
      await page.getByRole('textbox', { name: 'env', exact: true }).click();
      await page.getByRole('option', { name: 'staging', exact: true }).click();
    },
    question: 'Deploy api to staging?',
    async answer(dialog) {
      await dialog.getByRole('checkbox', { name: 'approve' }).check();
    },
    result: 'deployed api to staging',
  },
  // trigger-elicitation-request of @modelcontextprotocol/server-everything (a 2025-11-25
  // server, put behind mrtr proxy's bridge): a form of many fields, only name required.
  'everything-elicitation': {
    tool: 'trigger-elicitation-request',
    // Titled tools are listed as "TITLE name"; -async is another tool.
    button: { name: /\btrigger-elicitation-request$/ },
    async fill() {},
    question: 'Please provide inputs for the following fields:',
    async answer(dialog) {
      // The form labels each field by its title: name is "String" (required), check "Boolean".
      await dialog.getByRole('textbox', { name: /^String\s*\*?$/ }).fill('Ada Lovelace');
      await dialog.getByRole('checkbox', { name: 'Boolean', exact: true }).check();
    },
    result: /- Name: Ada Lovelace\s+- Agreed to terms: true/,
  },
};

function usage(msg) {
  console.error(`drive.mjs: ${msg}`);
  console.error(`usage: drive.mjs --server-url URL --era modern|legacy [--flow ${Object.keys(FLOWS).join('|')}] [--out DIR] [--name LABEL] [--timeout SECONDS]`);
  process.exit(2);
}

let opts;
try {
  opts = parseArgs({
    options: {
      'server-url': { type: 'string' },
      era: { type: 'string' },
      flow: { type: 'string', default: 'deploy' },
      out: { type: 'string' },
      name: { type: 'string', default: 'serve' },
      timeout: { type: 'string', default: '90' },
    },
  }).values;
} catch (e) {
  usage(e.message);
}
const serverURL = opts['server-url'];
const era = opts.era;
if (!serverURL || !/^https?:\/\//.test(serverURL)) usage('--server-url http://HOST:PORT/mcp is required');
if (!ERAS[era]) usage(`--era must be modern or legacy, not ${JSON.stringify(era)}`);
if (!Object.hasOwn(FLOWS, opts.flow)) usage(`--flow must be one of ${Object.keys(FLOWS).join(', ')}, not ${JSON.stringify(opts.flow)}`);
const flow = FLOWS[opts.flow];
if (!/^[A-Za-z0-9_.-]+$/.test(opts.name)) usage(`--name must match [A-Za-z0-9_.-]+, not ${JSON.stringify(opts.name)}`);
const budgetSec = Number(opts.timeout);
if (!(budgetSec > 0)) usage(`--timeout must be a positive number of seconds, not ${JSON.stringify(opts.timeout)}`);
const outDir = resolve(opts.out || process.env.MRTR_ARTIFACTS || join(here, '..', 'internal', 'e2e', 'artifacts'));
mkdirSync(outDir, { recursive: true });
const shotOK = join(outDir, `inspector-${opts.name}-${era}.png`);
const shotFailed = join(outDir, `inspector-${opts.name}-${era}-failed.png`);
rmSync(shotOK, { force: true });
rmSync(shotFailed, { force: true });

const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const log = (msg) => console.log(`drive [${opts.name}/${era} ${elapsed()}] ${msg}`);

// The Inspector's API token: random per run, and kept out of what this script prints.
const token = randomBytes(24).toString('hex');
const redact = (s) => s.replaceAll(token, '<token>');

// Everything this run starts, so that every exit path stops it.
let inspector = null; // { child, output(), exited }
let browser = null;
let page = null;
const scratch = mkdtempSync(join(tmpdir(), 'mrtr-inspector-'));

async function cleanup() {
  if (browser) {
    const b = browser;
    browser = null;
    await Promise.race([b.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  }
  if (inspector && inspector.child.exitCode === null && inspector.child.signalCode === null) {
    const { child, exited } = inspector;
    child.kill('SIGTERM');
    const stopped = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
    if (!stopped) {
      child.kill('SIGKILL');
      await exited;
    }
  }
  rmSync(scratch, { recursive: true, force: true });
}

let failing = false;
async function fail(step, err) {
  if (failing) return;
  failing = true;
  const msg = redact(String(err?.message ?? err));
  console.error(`drive: FAIL [${opts.name}/${era}] at step "${step}" after ${elapsed()}: ${msg.split('\n')[0]}`);
  if (msg.includes('\n')) console.error(msg.split('\n').slice(1, 12).join('\n'));
  if (page) {
    try {
      await page.screenshot({ path: shotFailed, timeout: 5000 });
      console.error(`drive: screenshot of the failure: ${shotFailed}`);
    } catch (e) {
      console.error(`drive: no failure screenshot: ${e.message.split('\n')[0]}`);
    }
  }
  if (inspector) {
    console.error(`drive: Inspector output (tail):\n${redact(inspector.output()).split('\n').slice(-25).join('\n')}`);
  }
  await cleanup();
  process.exit(1);
}

let currentStep = 'start';
async function step(name, fn) {
  currentStep = name;
  log(name);
  return fn();
}

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => { fail(currentStep, new Error(`interrupted by ${sig}`)); });
}
const budget = setTimeout(() => { fail(currentStep, new Error(`whole run exceeded --timeout ${budgetSec}s`)); }, budgetSec * 1000);
budget.unref();

function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

// startInspector starts the Inspector on a free port and resolves once it says it is up.
// A port taken between freePort() and the Inspector's listen is retried with another port.
async function startInspector() {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const args = [launcher, '--web', '--transport', 'http', '--server-url', serverURL, '--protocol-era', era];
    const child = spawn(process.execPath, args, {
      cwd: scratch,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        HOME: scratch, // the Inspector keeps state under ~/.mcp-inspector: start from none
        MCP_STORAGE_DIR: join(scratch, 'storage'),
        MCP_INSPECTOR_SECRET_STORE: 'memory',
        MCP_INSPECTOR_API_TOKEN: token,
        MCP_AUTO_OPEN_ENABLED: 'false',
        HOST: '127.0.0.1',
        CLIENT_PORT: String(port),
        MCP_SANDBOX_PORT: '0', // MCP Apps sandbox and app origin: any free port
        MCP_APP_ORIGIN_PORT: '0',
      },
    });
    let out = '';
    const exited = new Promise((r) => child.on('exit', r));
    const up = new Promise((res, rej) => {
      const onData = (d) => {
        out += d;
        if (out.includes('MCP Inspector Web is up and running')) res();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('error', rej);
      exited.then((code) => rej(new Error(`Inspector exited (${code}) before it was up`)));
    });
    inspector = { child, output: () => out, exited };
    try {
      await up;
      return `http://127.0.0.1:${port}/?MCP_INSPECTOR_API_TOKEN=${token}`;
    } catch (e) {
      if (attempt < 3 && /EADDRINUSE/.test(out)) {
        log(`port ${port} was taken, trying another`);
        continue;
      }
      throw e;
    }
  }
}

async function main() {
  const inspectorURL = await step('start the Inspector', () => startInspector());
  log(`Inspector up on ${redact(inspectorURL)} (pid ${inspector.child.pid})`);

  browser = await step('launch chromium', () => chromium.launch({
    executablePath: chromiumPath, args: chromiumArgs, timeout: 30000,
    handleSIGTERM: false, handleSIGINT: false, // ours: screenshot first, then close
  }));
  const context = await browser.newContext({ viewport: { width: 1600, height: 1200 }, reducedMotion: 'reduce' });
  context.setDefaultTimeout(20000);
  page = await context.newPage();

  // `load`, never `networkidle`: font requests to the closed network keep the page busy.
  await step('open the Inspector', () => page.goto(inspectorURL, { waitUntil: 'load' }));

  await step('connect to the server', async () => {
    // Mantine's switch input sits under its styled track: check it directly.
    await page.getByRole('switch', { name: /^Connect or disconnect/ }).check({ force: true });
    const connected = page.getByText('Connected', { exact: true });
    const failed = page.getByText('Failed', { exact: true });
    await connected.or(failed).first().waitFor();
    if (await failed.count() !== 0) throw new Error(`the Inspector shows "Failed" for ${serverURL}: is the server up?`);
    await page.getByText(`MCP ${ERAS[era].version}`, { exact: true }).waitFor();
  });

  await step(`open ${flow.tool} in the Tools tab`, async () => {
    await page.getByRole('banner').getByText('Tools', { exact: true }).click();
    await page.getByRole('button', flow.button).click();
  });

  await step('fill the arguments and execute', async () => {
    await flow.fill(page);
    await page.getByRole('button', { name: 'Execute Tool' }).click();
  });

  const dialog = page.getByRole('dialog', { name: 'Elicitation Request' });
  await step('the Elicitation Request dialog asks', async () => {
    await dialog.waitFor();
    await dialog.getByText(flow.question).waitFor();
    const note = dialog.getByText(MRTR_NOTE);
    if (era === 'modern') {
      await note.waitFor();
      await dialog.getByText('input_required', { exact: true }).waitFor();
    } else if (await note.count() !== 0) {
      throw new Error('the legacy-era dialog shows the MRTR note: the Inspector did not speak 2025-11-25');
    }
  });

  await step('answer and submit', async () => {
    await flow.answer(dialog);
    await dialog.getByRole('button', { name: 'Submit' }).click();
    await dialog.waitFor({ state: 'hidden' });
  });

  await step(`the result reads ${flow.result}`, async () => {
    await page.getByRole('heading', { name: 'Results' }).waitFor();
    await page.getByText(flow.result, { exact: true }).first().waitFor();
  });

  await step('the Protocol tab shows the call', async () => {
    await page.getByRole('radiogroup', { name: 'Monitoring screen' }).getByText('Protocol', { exact: true }).click();
    await page.getByRole('heading', { name: 'Messages' }).waitFor();
    await page.getByText(ERAS[era].badge, { exact: true }).waitFor();
    // Each MRTR conversation is one element labelled "MRTR conversation <id>".
    const groups = page.locator('[aria-label^="MRTR conversation"]');
    if (era === 'legacy') {
      // One tools/call answered after a server-to-client elicitation/create; no MRTR.
      await page.getByText('elicitation/create').first().waitFor();
      const n = await groups.count();
      if (n !== 0) throw new Error(`legacy era: want no MRTR conversation, the Protocol tab shows ${n}`);
      return;
    }
    await groups.first().waitFor();
    const n = await groups.count();
    if (n !== 1) throw new Error(`want exactly one MRTR conversation, the Protocol tab shows ${n}`);
    const group = groups.first();
    await group.getByText('tools/call', { exact: true }).first().waitFor();
    await group.getByText('2 rounds', { exact: true }).waitFor();
    await group.getByTestId('mrtr-status').getByText('Complete', { exact: true }).waitFor();
    await group.getByRole('button', { name: 'Expand MRTR conversation' }).click();
    // The rounds open in a Mantine Collapse that animates its inline height and drops it
    // when the transition ends: wait for that, so the screenshot shows both rounds whole.
    const rounds = await group.locator('[aria-hidden="false"]').first().elementHandle();
    await page.waitForFunction((el) => el.style.height === '', rounds);
    await group.getByText('Round 1', { exact: true }).waitFor();
    await group.getByText('Round 2', { exact: true }).waitFor();
    if (await group.getByText('Round 3', { exact: true }).count() !== 0) throw new Error('the MRTR conversation has a third round');
    await group.getByText('input required', { exact: true }).waitFor(); // round 1's status
    await group.getByText('complete', { exact: true }).waitFor(); // round 2's (the header says "Complete")
    const calls = await group.getByText(flow.tool, { exact: true }).count();
    if (calls !== 2) throw new Error(`want both rounds to be tools/call ${flow.tool}, found ${flow.tool} ${calls} times`);
    // For the screenshot: the whole conversation in view, no tooltip over it.
    await group.evaluate((e) => e.scrollIntoView({ block: 'start' }));
  });

  await step('screenshot', async () => {
    await page.mouse.move(0, 0);
    await page.evaluate(() => document.activeElement?.blur()); // no focus tooltip over the result
    await page.screenshot({ path: shotOK });
  });
  console.log(`drive: OK [${opts.name}/${era}] ${flow.tool} completed in ${elapsed()}; screenshot: ${shotOK}`);
  await cleanup();
  process.exit(0);
}

main().catch((e) => fail(currentStep, e));
