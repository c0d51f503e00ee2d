#!/usr/bin/env bash
# Tidies every module of the repository (the modules go.work lists).
#
# `go mod tidy` ignores go.work, and our modules require each other at
# versions that resolve only once tagged (docs/RELEASING.md), so each module is
# tidied against the working tree through temporary replace directives, which
# are dropped again afterwards: go.sum holds no lines for a module replaced by
# a directory, and no go.mod of ours keeps a replace directive.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mapfile -t mods < <(go list -m -f '{{.Path}} {{.Dir}}')
for m in "${mods[@]}"; do
	dir=${m#* }
	(
		cd "$dir"
		reps=() drops=()
		for o in "${mods[@]}"; do
			[ "$o" = "$m" ] && continue
			rel=$(realpath --relative-to="$dir" "${o#* }")
			case $rel in .*) ;; *) rel=./$rel ;; esac
			reps+=("-replace=${o%% *}=$rel")
			drops+=("-dropreplace=${o%% *}")
		done
		go mod edit "${reps[@]}"
		trap 'go mod edit "${drops[@]}"' EXIT
		echo "tidy ${dir#"$root"/}"
		GOWORK=off go mod tidy
	)
done
