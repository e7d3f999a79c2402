#!/bin/bash
# B to B: a client that cannot bind to A's address ends up on B's own device.
# rxe serves that as loopback inside rxe1: still real RDMA, but it does not
# cross the veth and rxe0 must stay still.
# vm-exclusive: yes
# vm-timeout: 90
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
[ -x "$XFER" ] || bail "$XFER not built (make check builds it)"
plan 6

# Raw verbs, both ends on rxe1.
s=$(rxe_snap)
check "ibv_rc_pingpong B ($DEV_B) -> B ($DEV_B)" pingpong_pair pingpong $DEV_B
rdma_only_dev "ibv_rc_pingpong B -> B stayed on $DEV_B" "$s" $DEV_B

# RDMA CM, client not bound: the route to B's address picks rxe1.
s=$(rxe_snap)
check "rping unbound client -> B" rping_pair rping "$HOST_B" "" 10
rdma_only_dev "rping unbound -> B stayed on $DEV_B" "$s" $DEV_B

# A socket program that does not bind, under librspreload.
s=$(rxe_snap)
check "librspreload unbound client -> B: 1 MiB echoed intact" xfer_pair rsloop rspreload "$HOST_B" ""
rdma_only_dev "librspreload unbound -> B stayed on $DEV_B" "$s" $DEV_B
