#!/bin/bash
# The library loads in the guest and, told not to upgrade
# (RSOCKX_DEFAULT=tcp), keeps plain TCP: a TCP echo pair between A and B,
# first native, then with both ends under LD_PRELOAD=$RSOCKX_LIB, over IPv4
# and IPv6.  The bytes must come back intact and the rxe counters must not
# move (no upgrade, and no probe either).  upgrade.sh and probe.sh test
# the other way.
# vm-exclusive: yes
# vm-timeout: 90
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
[ -x "$XFER" ] || bail "$XFER not built (make check builds it)"
[ -f "$RSOCKX_LIB" ] || bail "$RSOCKX_LIB not built"
plan 12
lib=$(basename "$RSOCKX_LIB")
export RSOCKX_DEFAULT=tcp

for fam in 4 6; do
	if [ $fam = 4 ]; then a=$HOST_A b=$HOST_B; else a=$HOST_A6 b=$HOST_B6; fi
	s=$(rxe_snap)
	check "IPv$fam native: 1 MiB echoed intact A -> B" xfer_pair native$fam "" "$b" "$a"
	check "IPv$fam native: nothing preloaded" test "$(xfer_preloaded native$fam)" = "none "
	rdma_quiet "IPv$fam native: no RDMA" "$s"

	s=$(rxe_snap)
	check "IPv$fam under $lib: 1 MiB echoed intact A -> B" xfer_pair rsockx$fam preload "$b" "$a"
	check "IPv$fam under $lib: both ends loaded it" test "$(xfer_preloaded rsockx$fam)" = "$lib "
	rdma_quiet "IPv$fam under $lib with RSOCKX_DEFAULT=tcp: no RDMA" "$s"
done
