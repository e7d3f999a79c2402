#!/bin/bash
# Side-by-side reference: the same echo pair as preload-tcp.sh under rdma-core's
# librspreload, which replaces sockets by rsockets.  The data must cross the
# veth over RDMA (both rxe devices move), over IPv4 and IPv6.
# vm-exclusive: yes
# vm-timeout: 90
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
[ -x "$XFER" ] || bail "$XFER not built (make check builds it)"
[ -f "$RSPRELOAD" ] || skip_all "no $RSPRELOAD (rdmacm-utils/librdmacm1)"
plan 6

for fam in 4 6; do
	if [ $fam = 4 ]; then a=$HOST_A b=$HOST_B; else a=$HOST_A6 b=$HOST_B6; fi
	s=$(rxe_snap)
	check "IPv$fam librspreload: 1 MiB echoed intact A -> B" xfer_pair rs$fam rspreload "$b" "$a"
	check "IPv$fam librspreload: both ends loaded it" test "$(xfer_preloaded rs$fam)" = "librspreload.so "
	rdma_crossed "IPv$fam librspreload: the data went over RDMA across the veth" "$s" 100
done
