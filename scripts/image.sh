#!/usr/bin/env bash
# Build the mrtr OCI image (deploy/image/Containerfile) with podman, or docker where
# podman is missing and a Docker engine answers. `make image` runs this.
#
# mrtr is built on the host by the Go toolchain (CGO_ENABLED=0, -trimpath, the version
# stamped into `mrtr version`) for linux/$GOARCH (default: the host's), and copied with
# the host's CA bundle (Debian's ca-certificates) and a passwd/group naming the user
# mrtr (65532:65532) into an image FROM scratch. Nothing is pulled and nothing runs in the
# image: the build needs no registry and no network.
#
# Environment (all optional):
#   IMAGE     the image name and tag (default localhost/mrtr:$VERSION)
#   VERSION   the version stamped and labelled (default: X.Y.Z at a clean checkout of
#             the tag vX.Y.Z, else 0.0.0-dev+REV with REV the commit's first 12 hex
#             digits: the scheme of `mrtr version` and of goreleaser's snapshots)
#   GOARCH    the architecture of the binary and the image (default: the host's)
#   ENGINE    podman or docker (default: podman if on PATH, else docker)
# Prints the image name on stdout; everything else goes to stderr. With --print-version
# it prints the version it would stamp and builds nothing.
set -euo pipefail

die() { echo "image.sh: $*" >&2; exit 1; }

case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --print-version) ;;
  *) die "unknown argument: $1 (usage: $0; see --help)" ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -z "${VERSION:-}" ]]; then
  tag="$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null || true)"
  if [[ -n "$tag" && -z "$(git status --porcelain 2>/dev/null)" ]]; then
    VERSION="${tag#v}"
  elif rev="$(git rev-parse HEAD 2>/dev/null)"; then
    VERSION="0.0.0-dev+${rev:0:12}"
  else
    VERSION=0.0.0-dev
  fi
fi
if [[ "${1:-}" == --print-version ]]; then echo "$VERSION"; exit 0; fi
GO="${GO:-go}"
command -v "$GO" >/dev/null 2>&1 || die "$GO not found on PATH"

ENGINE="${ENGINE:-}"
if [[ -z "$ENGINE" ]]; then
  if command -v podman >/dev/null 2>&1; then ENGINE=podman
  elif command -v docker >/dev/null 2>&1; then ENGINE=docker
  else die "neither podman nor docker is on PATH: run scripts/ship-setup.sh (make deps) to install Debian's podman"
  fi
fi
command -v "$ENGINE" >/dev/null 2>&1 || die "$ENGINE not found on PATH"

CA=/etc/ssl/certs/ca-certificates.crt
[[ -s "$CA" ]] || die "$CA is missing: install Debian's ca-certificates (scripts/ship-setup.sh)"

[[ "$VERSION" =~ ^[0-9A-Za-z][0-9A-Za-z._+-]*$ ]] || die "VERSION $VERSION: only letters, digits and . _ + - may appear"
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# The commit's time, not the build's: the same commit gives the same labels and file times.
EPOCH="$(git log -1 --format=%ct 2>/dev/null || echo 0)"
CREATED="$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
ARCH="${GOARCH:-$("$GO" env GOARCH)}"
IMAGE="${IMAGE:-localhost/mrtr:${VERSION//+/_}}"

ctx="$(mktemp -d "${TMPDIR:-/tmp}/mrtr-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

echo "image.sh: building mrtr $VERSION for linux/$ARCH" >&2
CGO_ENABLED=0 GOOS=linux GOARCH="$ARCH" "$GO" build -trimpath \
  -ldflags "-s -w -X main.version=$VERSION" -o "$ctx/mrtr" ./cmd/mrtr

cp "$CA" "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nmrtr:x:65532:65532:mrtr:/nonexistent:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nmrtr:x:65532:\n' >"$ctx/group"
mkdir "$ctx/tmp"
chmod 1777 "$ctx/tmp"
chmod 0644 "$ctx/passwd" "$ctx/group" "$ctx/ca-certificates.crt"
chmod 0755 "$ctx/mrtr"

build=("$ENGINE" build --file deploy/image/Containerfile --tag "$IMAGE" --platform "linux/$ARCH"
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED")
if [[ "$ENGINE" == podman ]]; then
  # No step runs in the image, so no network; file times from the commit; no
  # intermediate images left behind.
  build+=(--network none --timestamp "$EPOCH" --layers=false)
fi
"${build[@]}" "$ctx" >&2

size="$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE")"
echo "image.sh: $IMAGE: $((size / 1024 / 1024)) MiB" >&2
echo "$IMAGE"
