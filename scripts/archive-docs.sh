#!/usr/bin/env bash
# Copy the docs a release archive holds into OUT, each relative link to a file the archive
# does not hold made absolute (https://github.com/mrtr-go/mrtr/blob/REV/PATH, at the
# release's commit), so that no link in an unpacked archive points nowhere. Links between
# files the archive holds stay relative (it keeps the repository's layout).
# .goreleaser.yaml runs it as a before hook; e2e/ship_release_test.go checks its output.
#
#   scripts/archive-docs.sh OUT REV   write OUT/README.md, OUT/SECURITY.md, OUT/docs/OPERATIONS.md
#   scripts/archive-docs.sh --list    print the paths an archive holds besides mrtr, one a line
set -euo pipefail

# What an archive holds besides the binary (.goreleaser.yaml's archives.files, which the
# test compares with this list); the docs among them are rewritten.
HELD=(LICENSE README.md SECURITY.md docs/OPERATIONS.md deploy/systemd/mrtr.service
  deploy/systemd/mrtr.service.d/runner.conf deploy/systemd/mrtr-runner.service
  deploy/systemd/mrtr-runner.sysusers.conf)
DOCS=(README.md SECURITY.md docs/OPERATIONS.md)

die() { echo "archive-docs.sh: $*" >&2; exit 1; }
if [[ "${1:-}" == --list ]]; then printf '%s\n' "${HELD[@]}"; exit 0; fi
[[ $# == 2 ]] || die "usage: $0 OUT REV | $0 --list"
out=$1 rev=$2
[[ "$rev" =~ ^[0-9a-f]{7,40}$ ]] || die "REV $rev is not a commit id"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

for doc in "${DOCS[@]}"; do
  mkdir -p "$out/$(dirname "$doc")"
  HELD="${HELD[*]}" DOC="$doc" REV="$rev" perl -pe '
    BEGIN { %held = map { $_ => 1 } split / /, $ENV{HELD}; ($dir = $ENV{DOC}) =~ s{[^/]*$}{}; }
    sub resolve {
      my @p;
      for (split m{/}, $dir . $_[0]) {
        next if $_ eq "" || $_ eq ".";
        if ($_ eq "..") { pop @p } else { push @p, $_ }
      }
      return join "/", @p;
    }
    s{\]\((?!https?:|mailto:|#)([^)#\s]+)(#[^)\s]*)?\)}{
      my ($path, $frag) = ($1, $2 // "");
      my $r = resolve($path);
      $held{$r} ? "]($path$frag)" : "](https://github.com/mrtr-go/mrtr/blob/$ENV{REV}/$r$frag)";
    }ge;
  ' "$ROOT/$doc" >"$out/$doc"
done
