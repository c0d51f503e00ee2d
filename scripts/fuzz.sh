#!/usr/bin/env bash
# Fuzzes every fuzz target of every module go.work lists, each for FUZZTIME
# (an execution count such as 150000x; see the Makefile), one at a time.
# The targets are discovered (`go test -list '^Fuzz'` in each module), not
# listed by hand: a new one is fuzzed without anyone remembering to add it.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FUZZTIME:=150000x}"
# Targets that drive real sockets (a dial, a split reply and a delay per input)
# run about 400 inputs a second instead of tens of thousands: they get an
# execution count of their own, FUZZTIME_NET (5000x: 15-20 s here), so that
# `make test` stays within its time.
: "${FUZZTIME_NET:=5000x}"
NET_TARGETS=" FuzzH1Reuse "
GO=${GO:-go}
n=0
for dir in $("$GO" list -m -f '{{.Dir}}'); do
	list=$(cd "$dir" && "$GO" test -list '^Fuzz' ./...) || { echo "$list"; exit 1; }
	# go test -list prints a package's targets, then "ok <package> <time>".
	targets=$(awk '/^Fuzz/ {f[n++] = $1; next} /^ok/ {for (i = 0; i < n; i++) print $2, f[i]; n = 0}' <<<"$list")
	while read -r pkg target; do
		[ -n "$target" ] || continue
		ft=$FUZZTIME
		[[ "$NET_TARGETS" == *" $target "* ]] && ft=$FUZZTIME_NET
		echo "fuzz $pkg $target ($ft)"
		out=$(cd "$dir" && "$GO" test "$pkg" -run '^$' -fuzz "^$target\$" -fuzztime "$ft" 2>&1) || { echo "$out"; exit 1; }
		n=$((n + 1))
	done <<<"$targets"
done
[ "$n" -gt 0 ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
echo "fuzzed $n targets"
