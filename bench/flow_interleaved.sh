#!/bin/sh
# flow_interleaved.sh runs BenchmarkFlow (or FLOW_BENCH) interleaved: each round runs every
# sub-benchmark once, each in its own process, in an order rotated every
# round, so that a burst of load on a shared machine hits all of them
# alike. It then prints benchstat's tables, the comparisons against plain
# (time and CPU time per op), and the ratio to plain paired round by round.
#
# Usage (from bench/): ./flow_interleaved.sh [rounds [out]]
# FLOW_BENCH=BenchmarkFlowMCPGo runs the mcp-go flow benchmark instead.
# Needs benchstat: go install golang.org/x/perf/cmd/benchstat@latest
set -eu
rounds=${1:-10}
out=${2:-flow.txt}
subs="sealed sealed-nostore plain"
bench=${FLOW_BENCH:-BenchmarkFlow}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/flow.test" .
: >"$out"
r=0
while [ "$r" -lt "$rounds" ]; do
	set -- $subs
	i=0
	while [ "$i" -lt $((r % 3)) ]; do # rotate by r
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	for s in "$@"; do
		"$tmp/flow.test" -test.run '^$' -test.bench "^$bench/$s\$" -test.count 1 |
			grep -E '^(goos|goarch|pkg|cpu|Benchmark)' >>"$out"
	done
	r=$((r + 1))
done

benchstat "$out"
echo
for s in plain sealed sealed-nostore; do
	sed -n "s|^$bench/$s-\\([0-9]*[[:space:]]\\)|BenchmarkFlow-\\1|p" "$out" >"$tmp/$s.txt"
done
for unit in sec/op cpu-sec/op; do
	(cd "$tmp" && benchstat -filter ".unit:$unit" plain=plain.txt sealed=sealed.txt sealed-nostore=sealed-nostore.txt)
done
echo
for s in sealed sealed-nostore; do
	awk -v s="$s" -v bench="$bench" '
		match($0, "^" bench "/[a-z-]+-[0-9]+") {
			name = substr($1, length(bench) + 2); sub(/-[0-9]+$/, "", name)
			v[name, ++n[name]] = $3
		}
		END { for (i = 1; i <= n["plain"] && i <= n[s]; i++) print v[s, i] / v["plain", i] }
	' "$out" | sort -n | awk -v s="$s" '
		{ x[NR] = $1 }
		END {
			m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			printf "%s / plain, paired by round (n=%d): median %.3f, min %.3f, max %.3f\n", s, NR, m, x[1], x[NR]
		}'
done
