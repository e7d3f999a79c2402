#!/bin/bash
# RSOCKX_TCLASS on the wire: the connections' RoCE v2 packets carry it in
# their IP header (DSCP and ECN), both directions, so that a lossless or
# ECN-marking fabric can put RDMA in a class of its own.  A raw socket on
# vethA (tests/rdma/sniff.py) counts every RoCE packet between A and B by
# traffic class while rsx-stream moves 4 MB each way; QP 1's packets (the
# RDMA CM's, not ours to set) are told apart.  Without the variable:
# traffic class 0.  RSOCKX_SL is set alongside (rxe, without VLANs, puts
# it nowhere on the wire).
# vm-exclusive: yes
# vm-timeout: 200
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000

# classes LABEL: "T:N ..." for the connections' packets (not QP 1's)
classes() {
	awk '$6 > 0 { printf "%s:%s ", $2, $6 }' "$tmpdir/$1.sniff"
}

for run in "dscp26:104:RSOCKX_TCLASS=104 RSOCKX_SL=3" "default:0:"; do
	label=${run%%:*} rest=${run#*:}
	want=${rest%%:*} extra=${rest#*:}
	"$PYTHON" "$abs_top_srcdir/tests/rdma/sniff.py" $NETDEV_A 90 \
		"$tmpdir/$label.sniff" >"$tmpdir/$label.sniffer" 2>&1 &
	sniffer=$!
	wait_filled "$tmpdir/$label.sniffer" || bail "the sniffer did not start"
	check "$label: every byte right" stream_pair "$label" \
		"RSOCKX_CONF= $extra" "RSOCKX_CONF=$tmpdir/rdma.conf $extra" \
		$HOST_B $HOST_A -n 4000000
	kill -TERM $sniffer
	wait $sniffer
	check "$label: upgraded, bytes over RDMA" upgraded "$label"
	got=$(classes "$label")
	check "$label: the connection's RoCE packets, all of traffic class $want ($got)" \
		test "$got" = "$want:$(awk -v t=$want '$2 == t { print $6 }' "$tmpdir/$label.sniff") " -a \
		"$(awk -v t=$want '$2 == t { print $6 }' "$tmpdir/$label.sniff")" -gt 100
	diag "$label: $(tr '\n' ' ' <"$tmpdir/$label.sniff")"
done
done_testing
