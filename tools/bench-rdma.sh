#!/bin/bash
# The A/B comparison on real RDMA verbs (Soft-RoCE in the test VM, between
# hosts A and B): 64-byte ping-pong latency and 1 MiB-write stream
# throughput over plain TCP, rsockx, rdma-core's librspreload, and the
# raw-verbs ceiling of the same device pair (ib_write_lat, ib_write_bw).
# Medians of BENCH_ROUNDS alternating rounds (default 3).
#
#   tools/bench-rdma.sh        (from the build tree; make bench-rdma)
#
# Soft-RoCE is a software NIC inside a software-emulated VM: absolute
# numbers say nothing about real hardware; only the ratios between the
# columns, measured in the same run, do.
set -euo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
: "${abs_top_builddir:=$PWD}"
export abs_top_builddir abs_top_srcdir=$srcdir
[ -x "$abs_top_builddir/tests/stream/rsx-stream" ] ||
	{ echo "bench-rdma: build first (make && make check TESTS=)" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "bench-rdma: booting the Soft-RoCE VM (a minute or two) ..." >&2
"$srcdir/tests/vm/run.sh" --timeout "${BENCH_TIMEOUT:-1500}" \
	"$srcdir/tools/bench-rdma-guest.sh" | tee "$out" | sed 's/^/  /' >&2
awk '
function median(key,   n, i, j, t, a) {
	n = split(vals[key], a, " ")
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n ? a[int((n + 1) / 2)] : "-"
}
NF == 3 && $3 != "fail" { vals[$1 " " $2] = vals[$1 " " $2] " " $3 }
END {
	split("tcp rsockx rspreload verbs", m, " ")
	printf "\n%-26s %12s %12s %12s %12s\n", "median of rounds", "plain TCP", "rsockx", "librspreload", "raw verbs"
	split("pingpong64_p50_us pingpong64_p99_us stream1M_MBps", k, " ")
	for (i = 1; i <= 3; i++) {
		printf "%-26s", k[i]
		for (j = 1; j <= 4; j++) printf " %12s", median(m[j] " " k[i])
		printf "\n"
	}
	l = median("rsockx pingpong64_p50_us"); v = median("verbs pingpong64_p50_us")
	r = median("rspreload pingpong64_p50_us"); t = median("tcp pingpong64_p50_us")
	if (l != "-" && v != "-" && v > 0) printf "rsockx latency / raw verbs: %.2fx\n", l / v
	if (l != "-" && r != "-" && r > 0) printf "rsockx latency / librspreload: %.2fx\n", l / r
	if (l != "-" && t != "-" && t > 0) printf "rsockx latency / plain TCP: %.2fx\n", l / t
	b = median("rsockx stream1M_MBps"); w = median("verbs stream1M_MBps")
	if (b != "-" && w != "-" && w > 0) printf "rsockx stream / raw verbs: %.2fx\n", b / w
	print "Soft-RoCE is a software NIC in an emulated VM: compare columns, not absolute values."
}' "$out"
