#!/usr/bin/env bash
# Install what the shipping tests need (the image, the Helm chart, the goreleaser
# config, the systemd unit: e2e/ship_*_test.go):
#   - Debian's podman, runc, ca-certificates and systemd (for systemd-analyze), by
#     apt-get, only when one of their commands or the CA bundle is missing (needs root;
#     no packaged service is started). runc because podman's default runtime, crun,
#     refuses a host whose cgroups are mounted in hybrid mode (this sandbox's);
#     e2e/ship_image_test.go runs the image with --runtime runc;
#   - helm and goreleaser at the versions pinned below, built once by `go install`
#     into $MRTR_TOOLS (default ${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-tools), each
#     under its version's name (helm-v3.22.0), so that later runs reuse them.
# Quiet on success. On failure, prints the installer's output and exits non-zero.
# --check installs nothing: it exits 0 when everything is there and current, else 1
# saying what is missing or stale (the tests run this; installs belong to `make deps`).
# --path TOOL prints where TOOL (helm or goreleaser) is, or would be, installed.
# --tools builds only the Go tools (no apt-get), so that `make deps` can build them
# while the other installs wait on the network.
# Usage: scripts/ship-setup.sh [--check | --tools | --path TOOL]
set -euo pipefail

PROG=ship-setup
die() { echo "$PROG: $*" >&2; exit 1; }

HELM_MOD=helm.sh/helm/v3
HELM_PKG=$HELM_MOD/cmd/helm
HELM_VERSION=v3.22.0
GORELEASER_MOD=github.com/goreleaser/goreleaser/v2
GORELEASER_PKG=$GORELEASER_MOD
GORELEASER_VERSION=v2.15.1
CA=/etc/ssl/certs/ca-certificates.crt
TOOLS="${MRTR_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-tools}"

tool_path() {
  case "$1" in
    helm) echo "$TOOLS/helm-$HELM_VERSION" ;;
    goreleaser) echo "$TOOLS/goreleaser-$GORELEASER_VERSION" ;;
    *) die "unknown tool $1 (helm or goreleaser)" ;;
  esac
}

CHECK=0
TOOLS_ONLY=0
case "${1:-}" in
  "") ;;
  --check) CHECK=1 ;;
  --tools) TOOLS_ONLY=1 ;;
  --path) [[ -n "${2:-}" ]] || die "--path needs a tool name"; tool_path "$2"; exit 0 ;;
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument: $1 (usage: $0 [--check | --tools | --path TOOL])" ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }

# stale_bin BIN PKG MOD VERSION prints why BIN is not PKG built from MOD@VERSION;
# nothing when it is.
stale_bin() {
  local bin="$1" pkg="$2" mod="$3" version="$4"
  if [[ ! -x "$bin" ]]; then echo "$bin is missing"; return; fi
  local info path got
  info="$(go version -m "$bin" 2>/dev/null)" || { echo "$bin is not a Go binary"; return; }
  path="$(awk -F'\t' '$2 == "path" {print $3}' <<<"$info")"
  got="$(awk -F'\t' '$2 == "mod" {print $3 "@" $4}' <<<"$info")"
  [[ "$path" == "$pkg" && "$got" == "$mod@$version" ]] || echo "$bin is $path from $got, not $pkg from $mod@$version"
}

# missing_pkgs prints the Debian packages whose commands are missing.
missing_pkgs() {
  have podman || echo podman
  have runc || echo runc
  [[ -s "$CA" ]] || echo ca-certificates
  have systemd-analyze || echo systemd
}

# stale prints, one a line, what is missing or stale; nothing when all is there.
stale() {
  local p
  for p in $(missing_pkgs); do echo "Debian's $p is not installed"; done
  stale_bin "$(tool_path helm)" "$HELM_PKG" "$HELM_MOD" "$HELM_VERSION"
  stale_bin "$(tool_path goreleaser)" "$GORELEASER_PKG" "$GORELEASER_MOD" "$GORELEASER_VERSION"
}

have go || die "go not found on PATH"

if [[ $CHECK -eq 1 ]]; then
  why="$(stale | paste -sd ';' - | sed 's/;/; /g')"
  [[ -z "$why" ]] && exit 0
  echo "$PROG: the shipping tools are not installed or not current: $why; run \`make deps\` (or scripts/ship-setup.sh)" >&2
  exit 1
fi

# ---------------------------------------------------------------- Debian packages
pkgs=()
[[ $TOOLS_ONLY -eq 1 ]] || mapfile -t pkgs < <(missing_pkgs)
if ((${#pkgs[@]})); then
  [[ "$(id -u)" == 0 ]] || die "${pkgs[*]} not installed and installing needs root (apt-get install ${pkgs[*]})"
  have apt-get || die "${pkgs[*]} not installed and apt-get is not available"
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get -q -y -o DPkg::Lock::Timeout=120)
  log="$(mktemp "${TMPDIR:-/tmp}/ship-setup.XXXXXX")"
  created_policy=0
  # Keep the maintainer scripts from starting services (exit 101: action forbidden).
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
  # shellcheck disable=SC2064
  trap "rm -f '$log'; [[ $created_policy == 1 ]] && rm -f /usr/sbin/policy-rc.d || true" EXIT
  if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || ! apt-cache show "${pkgs[@]}" >/dev/null 2>&1; then
    "${apt[@]}" update >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "apt-get update failed"; }
  fi
  if ! "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; then
    # Stale lists (a version no longer on the mirror): refresh once and retry.
    "${apt[@]}" update >>"$log" 2>&1 || true
    "${apt[@]}" install --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1 \
      || { tail -n 30 "$log" >&2; die "apt-get install ${pkgs[*]} failed"; }
  fi
fi

# ---------------------------------------------------------------- Go tools
# install_tool NAME PKG MOD VERSION builds PKG@VERSION outside any workspace (the
# tool's own go.mod decides its dependencies) and moves it to tool_path NAME.
install_tool() {
  local name="$1" pkg="$2" mod="$3" version="$4" bin tmp out
  bin="$(tool_path "$name")"
  [[ -z "$(stale_bin "$bin" "$pkg" "$mod" "$version")" ]] && return 0
  mkdir -p "$TOOLS"
  tmp="$(mktemp -d "$TOOLS/.install.XXXXXX")"
  out="$(cd "$tmp" && GOWORK=off GOFLAGS= GOBIN="$tmp" go install "$pkg@$version" 2>&1)" \
    || { rm -rf "$tmp"; echo "$out" >&2; die "go install $pkg@$version failed"; }
  mv -f "$tmp/$name" "$bin" # go names the binary after the path, less a /vN suffix
  rm -rf "$tmp"
}
install_tool helm "$HELM_PKG" "$HELM_MOD" "$HELM_VERSION"
install_tool goreleaser "$GORELEASER_PKG" "$GORELEASER_MOD" "$GORELEASER_VERSION"
[[ $TOOLS_ONLY -eq 0 ]] || exit 0

why="$(stale)"
[[ -z "$why" ]] || die "after installing: $why"
