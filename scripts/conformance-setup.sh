#!/usr/bin/env bash
# Install the pinned MCP conformance harness (and its Node 22 runtime) into
# conformance/node_modules with `npm ci`, but only when needed:
#   - node_modules is missing, or
#   - package.json / package-lock.json changed since the last successful install
#     (a sha256 stamp is kept in conformance/node_modules/.mrtr-setup-stamp), or
#   - the installed binaries are missing.
# Quiet on success. On failure, prints npm's output and exits non-zero.
# --check installs nothing: it exits 0 when the pinned harness is installed and
# current, else 1 saying what is missing or stale (the tests run this; installs
# belong to `make deps`).
# Usage: scripts/conformance-setup.sh [--force | --check]
set -euo pipefail

die() { echo "conformance-setup: $*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/conformance"
STAMP="$DIR/node_modules/.mrtr-setup-stamp"
WANT_HARNESS="0.2.0-alpha.12"
WANT_NODE_MAJOR="22"

FORCE=0
CHECK=0
case "${1:-}" in
  "") ;;
  --force) FORCE=1 ;;
  --check) CHECK=1 ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (usage: $0 [--force | --check])" ;;
esac

[[ -f "$DIR/package.json" ]] || die "missing $DIR/package.json"
[[ -f "$DIR/package-lock.json" ]] || die "missing $DIR/package-lock.json"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found on PATH"

cd "$DIR"

want_hash="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"

# stale prints why the installed harness is not the pinned one; nothing when it is.
stale() {
  if [[ ! -d node_modules ]]; then echo "$DIR/node_modules is missing"; return; fi
  if [[ ! -f "$STAMP" ]]; then echo "$STAMP is missing (no install finished)"; return; fi
  if [[ "$(cat "$STAMP")" != "$want_hash" ]]; then
    echo "$DIR/package.json or package-lock.json changed since the last install"; return
  fi
  [[ -x node_modules/.bin/node && -e node_modules/.bin/conformance ]] \
    || echo "node_modules/.bin/node or node_modules/.bin/conformance is missing"
}

if [[ $CHECK -eq 1 ]]; then
  why="$(stale)"
  [[ -z "$why" ]] && exit 0
  echo "conformance-setup: the pinned harness is not installed or not current: $why; run \`make deps\` (or scripts/conformance-setup.sh)" >&2
  exit 1
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (Node.js + npm are needed to install the harness)"

# Serialise concurrent runs (e.g. parallel test jobs) where flock exists.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$DIR/.setup.lock"
  flock 9
fi

if [[ $FORCE -eq 0 && -z "$(stale)" ]]; then
  exit 0
fi

log="$(mktemp "${TMPDIR:-/tmp}/conformance-setup.XXXXXX")"
trap 'rm -f "$log"' EXIT

if ! npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
  head -n 30 "$log" >&2
  n="$(wc -l <"$log")"
  if (( n > 30 )); then
    keep="${TMPDIR:-/tmp}/conformance-setup-failed.log"
    cp "$log" "$keep"
    echo "... ($((n - 30)) more lines in $keep)" >&2
  fi
  die "'npm ci' failed in $DIR (see output above)"
fi

# Sanity-check what was installed before writing the stamp.
node_ver="$(node_modules/.bin/node --version 2>&1)" \
  || { cat "$log" >&2; die "pinned node runtime does not run: $node_ver"; }
[[ "$node_ver" == v"$WANT_NODE_MAJOR".* ]] \
  || { cat "$log" >&2; die "expected Node v$WANT_NODE_MAJOR.x in node_modules/.bin/node, got '$node_ver' (did the node package's preinstall script run?)"; }
harness_ver="$(npx --no-install conformance --version 2>&1)" \
  || { cat "$log" >&2; die "conformance CLI does not run: $harness_ver"; }
[[ "$harness_ver" == "$WANT_HARNESS" ]] \
  || die "expected conformance $WANT_HARNESS, got '$harness_ver' (update WANT_HARNESS here if the pin was bumped on purpose)"

echo "$want_hash" >"$STAMP"
