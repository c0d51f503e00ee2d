#!/usr/bin/env bash
# Install the upstreams the proxy's end-to-end tests put mrtr proxy in front of: go-sdk's
# conformance everything-server at the go-sdk version of go.mod into
# conformance/bin/everything-server (e2e/proxy_conformance_test.go), and at v1.4.1,
# a 2025-11-25-only server the bridge serves (e2e/bridge_http_test.go), into
# conformance/bin/everything-server-v1.4.1 (go install into a temporary GOBIN, then moved),
# but only when a binary is missing or built from another version.
# Quiet on success. On failure, prints go's output and exits non-zero.
# --check installs nothing: it exits 0 when both binaries are there and current, else 1 saying
# what is missing or stale (the tests run this; installs belong to `make deps`).
# Usage: scripts/everything-setup.sh [--force | --check]
set -euo pipefail

die() { echo "everything-setup: $*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/conformance/bin"
BIN="$DIR/everything-server"
MOD="github.com/modelcontextprotocol/go-sdk"
PKG="$MOD/conformance/everything-server"
LEGACY_VERSION="v1.4.1"
LEGACY_BIN="$DIR/everything-server-$LEGACY_VERSION"

FORCE=0
CHECK=0
case "${1:-}" in
  "") ;;
  --force) FORCE=1 ;;
  --check) CHECK=1 ;;
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (usage: $0 [--force | --check])" ;;
esac

command -v go >/dev/null 2>&1 || die "go not found on PATH"
cd "$ROOT"
want="$(go list -m -f '{{.Version}}' "$MOD")" || die "go list -m $MOD failed"
[[ -n "$want" ]] || die "$MOD is not required by go.mod"

# stale_bin BIN VERSION prints why BIN is not the everything-server of $MOD@VERSION; nothing
# when it is.
stale_bin() {
  local bin="$1" version="$2"
  if [[ ! -x "$bin" ]]; then echo "$bin is missing"; return; fi
  local info
  info="$(go version -m "$bin" 2>/dev/null)" || { echo "$bin is not a Go binary"; return; }
  local path mod
  path="$(awk -F'\t' '$2 == "path" {print $3}' <<<"$info")"
  mod="$(awk -F'\t' '$2 == "mod" {print $3 "@" $4}' <<<"$info")"
  [[ "$path" == "$PKG" && "$mod" == "$MOD@$version" ]] \
    || echo "$bin is $path from $mod, not $PKG from $MOD@$version"
}

# stale prints why either binary is not the one wanted; nothing when both are.
stale() {
  stale_bin "$BIN" "$want"
  stale_bin "$LEGACY_BIN" "$LEGACY_VERSION"
}

if [[ $CHECK -eq 1 ]]; then
  why="$(stale)"
  [[ -z "$why" ]] && exit 0
  echo "everything-setup: the everything-server is not installed or not current: $why; run \`make deps\` (or scripts/everything-setup.sh)" >&2
  exit 1
fi

if [[ $FORCE -eq 0 && -z "$(stale)" ]]; then
  exit 0
fi

mkdir -p "$DIR"
if [[ $FORCE -eq 1 || -n "$(stale_bin "$BIN" "$want")" ]]; then
  out="$(GOBIN="$DIR" go install "$PKG@$want" 2>&1)" || { echo "$out" >&2; die "go install $PKG@$want failed"; }
fi
if [[ $FORCE -eq 1 || -n "$(stale_bin "$LEGACY_BIN" "$LEGACY_VERSION")" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  out="$(GOBIN="$tmp" go install "$PKG@$LEGACY_VERSION" 2>&1)" \
    || { echo "$out" >&2; die "go install $PKG@$LEGACY_VERSION failed"; }
  mv -f "$tmp/everything-server" "$LEGACY_BIN"
fi
why="$(stale)"
[[ -z "$why" ]] || die "after go install: $why"
