#!/bin/sh
# flow_repeat.sh runs the BenchmarkFlow command (go test -bench Flow
# -count 5) several times, prints sealed / plain and sealed-nostore / plain
# for each run (ratio of the medians of its five samples), the median of
# those ratios, and benchstat's comparison of all runs pooled. On a shared
# machine one run scatters by several percent; the pooled numbers do not.
#
# Usage (from bench/): ./flow_repeat.sh [runs [out]]
# Needs benchstat: go install golang.org/x/perf/cmd/benchstat@latest
set -eu
runs=${1:-8}
out=${2:-flow-repeat.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/flow.test" .
: >"$out"

# median prints the median of the numbers on standard input.
median() {
	sort -n | awk '{ x[NR] = $1 } END { print (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2 }'
}
# med FILE SUB prints the median sec/op of sub-benchmark SUB in FILE.
med() {
	awk -v s="$2" '$1 ~ "^BenchmarkFlow/" s "-[0-9]+$" { print $3 }' "$1" | median
}

r=1
while [ "$r" -le "$runs" ]; do
	"$tmp/flow.test" -test.run '^$' -test.bench Flow -test.count 5 |
		grep -E '^(goos|goarch|pkg|cpu|Benchmark)' >"$tmp/run.txt"
	cat "$tmp/run.txt" >>"$out"
	p=$(med "$tmp/run.txt" plain)
	s=$(med "$tmp/run.txt" sealed)
	n=$(med "$tmp/run.txt" sealed-nostore)
	echo "$s $p $n" | awk -v r="$r" '{ printf "run %d: sealed / plain %.3f, sealed-nostore / plain %.3f\n", r, $1 / $2, $3 / $2 }' |
		tee -a "$tmp/ratios.txt"
	r=$((r + 1))
done

echo
awk '{ print $6 }' "$tmp/ratios.txt" | tr -d , | median | awk '{ printf "median over runs: sealed / plain %.3f\n", $1 }'
awk '{ print $10 }' "$tmp/ratios.txt" | median | awk '{ printf "median over runs: sealed-nostore / plain %.3f\n", $1 }'
for s in plain sealed sealed-nostore; do
	sed -n "s|^BenchmarkFlow/$s-\\([0-9]*[[:space:]]\\)|BenchmarkFlow-\\1|p" "$out" >"$tmp/$s.txt"
done
(cd "$tmp" && benchstat plain=plain.txt sealed=sealed.txt sealed-nostore=sealed-nostore.txt)
