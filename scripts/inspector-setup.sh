#!/usr/bin/env bash
# Install what the MCP Inspector browser test (e2e/inspector_test.go) needs,
# but only what is missing:
#   - Debian's chromium at /usr/bin/chromium (apt-get, non-interactive; needs root or
#     password-less sudo). Nothing else downloads a browser: the test drives this one
#     through playwright-core with executablePath set.
#   - the pinned MCP Inspector, playwright-core and Node 22 runtime in inspector/node_modules
#     (`npm ci`), when node_modules is missing, package.json / package-lock.json changed since
#     the last successful install (sha256 stamp in inspector/node_modules/.mrtr-setup-stamp),
#     or the installed binaries are missing.
# Quiet on success. On failure, prints the installer's output and exits non-zero.
# --check installs nothing: it exits 0 when chromium and the pinned Inspector are
# installed and current, else 1 saying what is missing or stale (the tests run this;
# installs belong to `make deps`).
# Usage: scripts/inspector-setup.sh [--force | --check]
set -euo pipefail

die() { echo "inspector-setup: $*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/inspector"
STAMP="$DIR/node_modules/.mrtr-setup-stamp"
CHROMIUM=/usr/bin/chromium
WANT_INSPECTOR="2.12.0"
WANT_PLAYWRIGHT="1.65.1"
WANT_NODE="v22.23.3"

FORCE=0
CHECK=0
case "${1:-}" in
  "") ;;
  --force) FORCE=1 ;;
  --check) CHECK=1 ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (usage: $0 [--force | --check])" ;;
esac

# stale prints why chromium or the installed Inspector is not the pinned setup; nothing
# when it is. It needs want_hash, and runs in $DIR.
stale() {
  if [[ ! -x "$CHROMIUM" ]]; then echo "$CHROMIUM is missing"; return; fi
  if [[ ! -d node_modules ]]; then echo "$DIR/node_modules is missing"; return; fi
  if [[ ! -f "$STAMP" ]]; then echo "$STAMP is missing (no install finished)"; return; fi
  if [[ "$(cat "$STAMP")" != "$want_hash" ]]; then
    echo "$DIR/package.json or package-lock.json changed since the last install"; return
  fi
  [[ -x node_modules/.bin/node && -f node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js \
     && -f node_modules/playwright-core/package.json ]] \
    || echo "node_modules lacks the Node runtime, the Inspector or playwright-core"
}

if [[ $CHECK -eq 1 ]]; then
  [[ -f "$DIR/package.json" && -f "$DIR/package-lock.json" ]] || die "missing $DIR/package.json or package-lock.json"
  command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found on PATH"
  cd "$DIR"
  want_hash="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
  why="$(stale)"
  [[ -z "$why" ]] && exit 0
  echo "inspector-setup: the Inspector browser test is not set up or not current: $why; run \`make deps\` (or scripts/inspector-setup.sh)" >&2
  exit 1
fi

log="$(mktemp "${TMPDIR:-/tmp}/inspector-setup.XXXXXX")"
trap 'rm -f "$log"' EXIT

# show_log prints the head of the installer's output (the whole of it kept in a file).
show_log() {
  head -n 30 "$log" >&2
  local n
  n="$(wc -l <"$log")"
  if (( n > 30 )); then
    local keep="${TMPDIR:-/tmp}/inspector-setup-failed.log"
    cp "$log" "$keep"
    echo "... ($((n - 30)) more lines in $keep)" >&2
  fi
}

# --- Debian's chromium -------------------------------------------------------------------
if [[ ! -x "$CHROMIUM" ]]; then
  command -v apt-get >/dev/null 2>&1 || die "$CHROMIUM is missing and there is no apt-get to install Debian's chromium"
  SUDO=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null \
      || die "$CHROMIUM is missing; install it as root: apt-get install -y --no-install-recommends chromium"
    SUDO=(sudo -n)
  fi
  apt_install() {
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
      install -y --no-install-recommends chromium >"$log" 2>&1
  }
  # A fresh machine may have no package lists yet: update once, then retry.
  if ! apt_install; then
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update >"$log" 2>&1 \
      || { show_log; die "apt-get update failed"; }
    apt_install || { show_log; die "apt-get install chromium failed (see output above)"; }
  fi
  [[ -x "$CHROMIUM" ]] || die "apt-get installed chromium but $CHROMIUM is missing"
fi
"$CHROMIUM" --version >"$log" 2>&1 || { show_log; die "$CHROMIUM does not run"; }

# --- the pinned Inspector, playwright-core and Node 22 -----------------------------------
[[ -f "$DIR/package.json" ]] || die "missing $DIR/package.json"
[[ -f "$DIR/package-lock.json" ]] || die "missing $DIR/package-lock.json"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH (Node.js + npm are needed to install the Inspector)"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found on PATH"

cd "$DIR"

# Serialise concurrent runs (e.g. parallel test jobs) where flock exists.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$DIR/.setup.lock"
  flock 9
fi

want_hash="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"

if [[ $FORCE -eq 0 && -z "$(stale)" ]]; then
  exit 0
fi

if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
  show_log
  die "'npm ci' failed in $DIR (see output above)"
fi

# Sanity-check what was installed before writing the stamp.
node_ver="$(node_modules/.bin/node --version 2>&1)" \
  || { cat "$log" >&2; die "pinned node runtime does not run: $node_ver"; }
[[ "$node_ver" == "$WANT_NODE" ]] \
  || { cat "$log" >&2; die "expected Node $WANT_NODE in node_modules/.bin/node, got '$node_ver' (did the node package's preinstall script run?)"; }
insp_ver="$(node_modules/.bin/node node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js --version 2>&1)" \
  || die "the Inspector does not run: $insp_ver"
[[ "$insp_ver" == "$WANT_INSPECTOR" ]] \
  || die "expected MCP Inspector $WANT_INSPECTOR, got '$insp_ver' (update WANT_INSPECTOR here if the pin was bumped on purpose)"
pw_ver="$(node_modules/.bin/node -p 'require("playwright-core/package.json").version' 2>&1)" \
  || die "playwright-core is not installed: $pw_ver"
[[ "$pw_ver" == "$WANT_PLAYWRIGHT" ]] \
  || die "expected playwright-core $WANT_PLAYWRIGHT, got '$pw_ver' (update WANT_PLAYWRIGHT here if the pin was bumped on purpose)"

echo "$want_hash" >"$STAMP"
