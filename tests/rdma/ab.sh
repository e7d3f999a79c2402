#!/bin/bash
# rsockx-ab (tools/rsockx-ab) on real verbs: one short round of the pingpong
# workload between hosts A and B.  The rsockx column must have run over
# RDMA (rsockx's own counters of both ends), the plain TCP column over TCP,
# and every number of the JSON and CSV must parse.  The raw-verbs ceiling
# (perftest) runs too.  Tool-level checks without RDMA: tests/tools/ab.test.
# vm-timeout: 180
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
AB=$abs_top_builddir/tools/rsockx-ab
[ -x "$AB" ] || bail "$AB not built (make builds it)"

modes=tcp,rsockx
[ -e "$RSPRELOAD" ] && modes=$modes,rspreload
start=$SECONDS
rc=0
env RSOCKX_AB_LIB="$RSOCKX_PRELOAD" /usr/bin/python3 "$AB" -q --quick \
	-n 1 -w 0 -m "$modes" --json "$tmpdir/ab.json" --csv "$tmpdir/ab.csv" \
	pingpong >"$tmpdir/table" 2>"$tmpdir/err" || rc=$?
sed 's/^/  /' "$tmpdir/table" "$tmpdir/err" >&2
check "rsockx-ab pingpong, one quick round, exit 0" test $rc = 0
diag "rsockx-ab took $((SECONDS - start)) s"

# field WORKLOAD MODE KEY: one value of the JSON summary ("None" if absent)
field() {
	/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["summary"][sys.argv[2]][sys.argv[3]].get(sys.argv[4]))' \
		"$tmpdir/ab.json" "$@" 2>/dev/null
}
isnum() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

check "JSON: the rsockx column ran over RDMA (path: $(field pingpong rsockx path))" \
	test "$(field pingpong rsockx path)" = rdma
check "JSON: the plain TCP column stayed TCP" test "$(field pingpong tcp path)" = tcp
for m in tcp rsockx; do
	for k in throughput p50_us p90_us p99_us p999_us cpu_server_s cpu_client_s; do
		v=$(field pingpong $m $k)
		check "JSON: $m $k is a number ($v)" isnum "$v"
	done
done
check "JSON: rsockx p50 <= p90 <= p99 <= p99.9" /usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["summary"]["pingpong"]["rsockx"]
v = [s[k] for k in ("p50_us", "p90_us", "p99_us", "p999_us")]
sys.exit(v != sorted(v))' "$tmpdir/ab.json"
check "JSON: says Soft-RoCE numbers are not hardware numbers" \
	grep -q '"note": "Soft-RoCE is a software NIC' "$tmpdir/ab.json"
# perftest cannot always measure the CPU clock of a starved emulated VM
# (inf latencies): rsockx-ab must then say so, not print a number
if /usr/bin/python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))["summary"]["pingpong"]["verbs"]
sys.exit(not (v["runs"] == 0 and "no valid numbers" in json.dumps(v)))' "$tmpdir/ab.json" 2>/dev/null; then
	skip "JSON: the raw-verbs column: ib_write_lat gave inf on this busy VM"
else
	check "JSON: the raw-verbs column (ib_write_lat) has round trips" /usr/bin/python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))["summary"]["pingpong"]["verbs"]
sys.exit(not (v["runs"] == 1 and v["p50_us"] > 0 and v["throughput"] > 0))' "$tmpdir/ab.json"
fi
check "CSV: the rsockx row says rdma, with numbers" /usr/bin/python3 -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["mode"] == "rsockx"]
r = rows[0]
float(r["throughput"]); float(r["p50_us"]); float(r["p999_us"])
sys.exit(not (len(rows) == 1 and r["path"] == "rdma" and r["ok"] == "True"))' "$tmpdir/ab.csv"
check "table: the rsockx column and the Soft-RoCE note are printed" \
	grep -q 'NOTE: Soft-RoCE is a software NIC' "$tmpdir/table"
check "table: the path row says rdma" \
	grep -Eq '^pingpong +path +tcp +rdma' "$tmpdir/table"
done_testing
