#!/bin/bash
# Self-check of the Soft-RoCE test bed, run first and alone by tests/vm/suite.sh:
# raw RC verbs (ibv_rc_pingpong) and the RDMA CM (rping) from A to B, and the
# rxe counters that prove the traffic crossed the veth.  If this fails, the
# suite stops: a broken test bed must not look like a broken (or working) rsockx.
# vm-timeout: 90
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
plan 6

# Raw verbs: server on B (rxe1), client on A (rxe0), RoCE v2 IPv4 GID.  The
# out-of-band exchange is TCP to B; the RC traffic crosses the veth.
s=$(rxe_snap)
check "ibv_rc_pingpong A ($DEV_A) -> B ($DEV_B), 100 iterations" pingpong_pair pingpong $DEV_A
rdma_crossed "ibv_rc_pingpong went over the veth (both devices sent and received)" "$s" 100

# RDMA CM: rping server on B, client bound to A (unbound it would loop back
# on rxe1), with data verification.
s=$(rxe_snap)
check "rping A -> B, 10 verified ping-pongs" rping_pair rping "$HOST_B" "$HOST_A" 10
rdma_crossed "rping went over the veth" "$s" 10

# Same over IPv6 (RoCE v2 with the fd77:: GIDs), so AF_INET6 tests are sound.
s=$(rxe_snap)
check "rping over IPv6 A -> B" rping_pair rping6 "$HOST_B6" "$HOST_A6" 5
rdma_crossed "rping over IPv6 went over the veth" "$s" 5
