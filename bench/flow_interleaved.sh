#!/bin/sh
# flow_interleaved.sh runs BenchmarkFlow interleaved: each round runs every
# sub-benchmark once, each in its own process, in an order rotated every
# round, so that a burst of load on a shared machine hits all of them
# alike. It then prints benchstat's tables, the comparisons against plain
# (time and CPU time per op), and the ratio to plain paired round by round.
#
# Usage (from bench/): ./flow_interleaved.sh [rounds [out]]
# FLOW_BENCH=BenchmarkFlowMCPGo runs the mcp-go flow benchmark instead
# (its sub-benchmarks: sealed, sealed-nostore, plain-sized, plain; it
# also pairs sealed with plain-sized, and plain-sized with plain).
# Needs benchstat: go install golang.org/x/perf/cmd/benchstat@latest
set -eu
rounds=${1:-10}
out=${2:-flow.txt}
bench=${FLOW_BENCH:-BenchmarkFlow}
subs="sealed sealed-nostore sealed-observed sealed-audited plain"
nsubs=5
pairs="sealed:plain:3 sealed-nostore:plain:3 sealed-observed:plain:3 sealed-observed:sealed:3 sealed-audited:sealed:3 sealed:plain:5 sealed-observed:plain:5 sealed-observed:sealed:5 sealed-audited:sealed:5"
if [ "$bench" != BenchmarkFlow ]; then
	subs="sealed sealed-nostore plain-sized plain"
	nsubs=4
	pairs="sealed:plain:3 sealed:plain-sized:3 plain-sized:plain:3 sealed-nostore:plain:3 sealed:plain:5 sealed:plain-sized:5 plain-sized:plain:5 sealed-nostore:plain:5"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/flow.test" .
: >"$out"
r=0
while [ "$r" -lt "$rounds" ]; do
	set -- $subs
	i=0
	while [ "$i" -lt $((r % nsubs)) ]; do # rotate by r
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	for s in "$@"; do
		"$tmp/flow.test" -test.run '^$' -test.bench "^$bench\$/^$s\$" -test.count 1 |
			grep -E '^(goos|goarch|pkg|cpu|Benchmark)' >>"$out"
	done
	r=$((r + 1))
done

benchstat "$out"
echo
for s in $subs; do
	sed -n "s|^$bench/$s-\\([0-9]*[[:space:]]\\)|BenchmarkFlow-\\1|p" "$out" >"$tmp/$s.txt"
done
list="plain=plain.txt" # plain first: the base of the comparisons
for s in $subs; do
	[ "$s" = plain ] || list="$list $s=$s.txt"
done
for unit in sec/op cpu-sec/op; do
	(cd "$tmp" && benchstat -filter ".unit:$unit" $list)
done
echo
# paired ratios: each sub-benchmark against plain, and sealed-observed
# and sealed-audited against sealed (what metrics and tracing, or the
# audit trail, add)
# (column 3 is ns/op, column 5 cpu-ns/op)
for pair in $pairs; do
	s=${pair%%:*}
	rest=${pair#*:}
	b=${rest%%:*}
	col=${rest#*:}
	awk -v s="$s" -v b="$b" -v col="$col" -v bench="$bench" '
		match($0, "^" bench "/[a-z-]+-[0-9]+") {
			name = substr($1, length(bench) + 2); sub(/-[0-9]+$/, "", name)
			v[name, ++n[name]] = $col
		}
		END { for (i = 1; i <= n[b] && i <= n[s]; i++) print v[s, i] / v[b, i] }
	' "$out" | sort -n | awk -v s="$s" -v b="$b" -v unit="$([ "$col" = 3 ] && echo time || echo cpu)" '
		{ x[NR] = $1 }
		END {
			m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			printf "%s / %s (%s), paired by round (n=%d): median %.3f, min %.3f, max %.3f\n", s, b, unit, NR, m, x[1], x[NR]
		}'
done
