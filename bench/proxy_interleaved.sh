#!/bin/sh
# proxy_interleaved.sh runs BenchmarkProxy interleaved: each round runs
# every sub-benchmark (direct, reverseproxy, mrtr) once, each in its own
# process, in an order rotated every round, so that a burst of load on a
# shared machine hits all of them alike. It prints every run and, for
# sec/op and cpu-ns/op, the ratio mrtr/reverseproxy of each round and the
# median of those paired ratios (the goal: at most 1.25).
#
# Usage (from bench/): ./proxy_interleaved.sh [rounds [benchtime [out]]]
set -eu
rounds=${1:-5}
benchtime=${2:-2s}
out=${3:-proxy.txt}
subs="direct reverseproxy mrtr"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/proxy.test" .
: >"$out"
r=0
while [ "$r" -lt "$rounds" ]; do
	set -- $subs
	i=0
	while [ "$i" -lt $((r % 3)) ]; do
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	for s in "$@"; do
		"$tmp/proxy.test" -test.run '^$' -test.bench "^BenchmarkProxy\$/^$s\$" -test.benchtime "$benchtime" -test.count 1 |
			grep -E '^Benchmark' | sed "s/^/round$r /" >>"$out"
	done
	r=$((r + 1))
done
cat "$out"
awk '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	split($2, name, "/"); sub(/-[0-9]+$/, "", name[2])
	for (i = 3; i <= NF; i++) {
		if ($(i) == "ns/op") ns[$1, name[2]] = $(i - 1)
		if ($(i) == "cpu-ns/op") cpu[$1, name[2]] = $(i - 1)
		if ($(i) == "allocs/op") al[name[2]] = $(i - 1)
	}
	if (!($1 in seen)) { seen[$1] = 1; order[++rounds] = $1 }
}
END {
	for (k = 1; k <= rounds; k++) {
		rd = order[k]
		t[k] = ns[rd, "mrtr"] / ns[rd, "reverseproxy"]
		c[k] = cpu[rd, "mrtr"] / cpu[rd, "reverseproxy"]
		d[k] = ns[rd, "reverseproxy"] / ns[rd, "direct"]
		printf "%s: mrtr/reverseproxy %.3f (cpu %.3f); reverseproxy/direct %.3f\n", rd, t[k], c[k], d[k]
	}
	printf "median of %d paired ratios mrtr/reverseproxy: sec/op %.3f, cpu-ns/op %.3f; reverseproxy/direct sec/op %.3f\n", rounds, median(t, rounds), median(c, rounds), median(d, rounds)
	printf "allocs/op: direct %s, reverseproxy %s, mrtr %s\n", al["direct"], al["reverseproxy"], al["mrtr"]
}' "$out"
