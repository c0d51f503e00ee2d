#!/usr/bin/env bash
# Run the pinned MCP conformance harness (conformance/package.json) against a
# running server.
#
# Usage: scripts/conformance-run.sh URL MODE [extra harness args...]
#   URL   e.g. http://127.0.0.1:PORT/mcp  (use 127.0.0.1/localhost: dns-rebinding needs it)
#   MODE  req-2026        --requirements 2026-07-28  (scored 2026 set, + unscored extras)
#         draft           --suite draft              (all 2026-07-28-only scenarios, incl. the 14 MRTR ones)
#         req-2025        --requirements 2025-11-25  (stateful 2025 wire)
#         scenario NAME   --scenario NAME            (one scenario, prints every check)
#   extra args are passed to `conformance server` as is (e.g. --timeout 60000,
#   --expected-failures FILE, --verbose).
#
# Results: checks.json per scenario in a temp dir (-o). The dir is removed after
# a fully green run, kept (and its path printed) otherwise. CONFORMANCE_KEEP=1
# always keeps it. CONFORMANCE_OUT_DIR=DIR uses DIR instead (never removed).
#
# Exit code: the harness's own exit code (1 iff a scored check FAILED; WARNINGs
# do not fail it). If the harness exited 0, the script exits 3 when no check
# ran at all (no checks.json, or only empty or SKIPPED ones), and in draft
# mode also when any check in an input-required-result-* scenario is
# WARNING or FAILURE, or when no input-required-result-* results were
# written at all. CONFORMANCE_MRTR_ALLOW=ID[,ID...] lets those WARNING checks
# pass the gate (the proxy's documented departure from one SHOULD).
# (The Go tests in internal/e2e go further: they pin every scenario a suite
# must run and how many of its checks must pass.)
# 2 = usage error. After the run, the script lists every non-SUCCESS check.
# Its last line repeats the harness's "Total: N passed, M failed" (suite modes).
set -euo pipefail

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/conformance"

[[ $# -ge 2 ]] || usage
URL="$1"; MODE="$2"; shift 2
case "$URL" in
  http://*|https://*) ;;
  *) echo "conformance-run: URL must start with http:// or https:// (got '$URL')" >&2; usage ;;
esac

case "$MODE" in
  req-2026) mode_args=(--requirements 2026-07-28) ;;
  req-2025) mode_args=(--requirements 2025-11-25) ;;
  draft)    mode_args=(--suite draft) ;;
  scenario)
    [[ $# -ge 1 && -n "$1" && "$1" != -* ]] || { echo "conformance-run: 'scenario' needs a scenario NAME" >&2; usage; }
    mode_args=(--scenario "$1"); shift ;;
  -h|--help) usage ;;
  *) echo "conformance-run: unknown MODE '$MODE'" >&2; usage ;;
esac

"$ROOT/scripts/conformance-setup.sh"

NODE="$DIR/node_modules/.bin/node"   # pinned Node 22

remove_out=0
if [[ -n "${CONFORMANCE_OUT_DIR:-}" ]]; then
  OUT="$CONFORMANCE_OUT_DIR"
  mkdir -p "$OUT"
else
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/conformance-$MODE.XXXXXX")"
  [[ "${CONFORMANCE_KEEP:-0}" == 1 ]] || remove_out=1
fi
OUT="$(cd "$OUT" && pwd)"
console="$(mktemp "${TMPDIR:-/tmp}/conformance-console.XXXXXX")"
trap 'rm -f "$console"' EXIT

echo "conformance-run: $MODE against $URL (results in $OUT)"

set +e
(cd "$DIR" && npx --no-install conformance server --url "$URL" "${mode_args[@]}" -o "$OUT" "$@") 2>&1 | tee "$console"
rc=${PIPESTATUS[0]}
set -e

# Summarise every checks.json; in draft mode also gate on the MRTR scenarios.
set +e
"$NODE" - "$OUT" "$MODE" <<'JS'
const fs = require('fs');
const path = require('path');
const [out, mode] = process.argv.slice(2);
const dirs = fs.existsSync(out) ? fs.readdirSync(out, { withFileTypes: true }).filter(d => d.isDirectory()).map(d => d.name).sort() : [];
const counts = {};
const bad = [];          // non-SUCCESS/INFO/SKIPPED checks, all scenarios
const mrtrBad = [];
let mrtrScenarios = 0;
// CONFORMANCE_MRTR_ALLOW: check ids whose WARNING the draft gate accepts
// (comma-separated), for a front end that departs from a SHOULD on purpose.
const allowed = new Set((process.env.CONFORMANCE_MRTR_ALLOW || '').split(',').map(s => s.trim()).filter(Boolean));
for (const d of dirs) {
  const f = path.join(out, d, 'checks.json');
  if (!fs.existsSync(f)) continue;
  // DIR/server-<scenario>-<ISO timestamp with : and . as ->
  const m = /^(?:server-)?(.*?)-\d{4}-\d{2}-\d{2}T[\d-]+Z?$/.exec(d);
  const scenario = m ? m[1] : d;
  let checks;
  try { checks = JSON.parse(fs.readFileSync(f, 'utf8')); } catch (e) {
    bad.push({ scenario, id: '(checks.json)', status: 'FAILURE', msg: 'unreadable: ' + e.message });
    if (scenario.startsWith('input-required-result-')) { mrtrScenarios++; mrtrBad.push(scenario + ' (checks.json unreadable)'); }
    continue;
  }
  if (!Array.isArray(checks)) checks = [];
  const isMrtr = scenario.startsWith('input-required-result-');
  if (isMrtr) mrtrScenarios++;
  for (const c of checks) {
    counts[c.status] = (counts[c.status] || 0) + 1;
    if (c.status === 'WARNING' || c.status === 'FAILURE') {
      const msg = (c.errorMessage || c.description || '').toString().replace(/\s+/g, ' ').slice(0, 300);
      bad.push({ scenario, id: c.id, status: c.status, msg });
      if (isMrtr && !(c.status === 'WARNING' && allowed.has(c.id))) mrtrBad.push(`${scenario} [${c.id}] ${c.status}`);
    }
  }
}
const total = Object.values(counts).reduce((a, b) => a + b, 0);
console.log(`\nconformance-run: ${dirs.length} scenario result(s), ${total} checks: ` +
  (Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') || 'none'));
for (const b of bad) console.log(`  ${b.status.padEnd(7)} ${b.scenario} [${b.id}] ${b.msg}`);
if (total - (counts.SKIPPED || 0) === 0) {
  console.log(`conformance-run: FAILED: no check ran (${dirs.length} scenario result(s), ${counts.SKIPPED || 0} skipped check(s))`);
  process.exit(3);
}
if (mode === 'draft') {
  if (mrtrScenarios === 0) {
    console.log('conformance-run: MRTR gate FAILED: no input-required-result-* results were written');
    process.exit(3);
  }
  if (mrtrBad.length) {
    console.log(`conformance-run: MRTR gate FAILED: ${mrtrBad.length} WARNING/FAILURE check(s) in ${mrtrScenarios} input-required-result-* scenario(s):`);
    for (const b of mrtrBad) console.log('  ' + b);
    process.exit(3);
  }
  console.log(`conformance-run: MRTR gate ok: ${mrtrScenarios} input-required-result-* scenario(s), no WARNING/FAILURE` +
    (allowed.size ? ` beyond the allowed warning(s) ${[...allowed].join(', ')}` : ''));
}
JS
gate=$?
set -e

final=$rc
if [[ $gate -ne 0 ]]; then
  if [[ $gate -ne 3 ]]; then
    echo "conformance-run: result summary failed (node exit $gate)" >&2
    [[ $final -ne 0 ]] || final=$gate
  elif [[ $final -eq 0 ]]; then
    final=3
  fi
fi

if [[ $final -eq 0 && $remove_out -eq 1 ]]; then
  rm -rf "$OUT"
else
  echo "conformance-run: results kept in $OUT"
fi
echo "conformance-run: exit $final (harness exit $rc)"
# Repeat the harness's closing count so it stays the last line of the log.
total_line="$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$console" | tail -n 1 || true)"
[[ -z "$total_line" ]] || echo "$total_line"
exit "$final"
