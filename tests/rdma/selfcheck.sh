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
port=$(vm_port)
s=$(rxe_snap)
ibv_rc_pingpong -d $DEV_B -g $GID_INDEX -p "$port" -n 100 >"$tmpdir/pp.server" 2>&1 &
spid=$!
wait_listen "$port"
rc=0
ibv_rc_pingpong -d $DEV_A -g $GID_INDEX -p "$port" -n 100 "$HOST_B" >"$tmpdir/pp.client" 2>&1 || rc=1
reap $spid || rc=1
sed 's/^/  pingpong: /' "$tmpdir/pp.server" "$tmpdir/pp.client"
grep -q '100 iters' "$tmpdir/pp.server" && grep -q '100 iters' "$tmpdir/pp.client" || rc=1
check "ibv_rc_pingpong A ($DEV_A) -> B ($DEV_B), 100 iterations" test $rc = 0
rdma_crossed "ibv_rc_pingpong went over the veth (both devices sent and received)" "$s" 100

# RDMA CM: rping server on B, client bound to A (unbound it would loop back
# on rxe1), with data verification.
port=$(vm_port)
s=$(rxe_snap)
rping -s -a "$HOST_B" -p "$port" -C 10 >"$tmpdir/rping.server" 2>&1 &
spid=$!
wait_cm_listen "$port"
rc=0
rping -c -a "$HOST_B" -I "$HOST_A" -p "$port" -C 10 -V >"$tmpdir/rping.client" 2>&1 || rc=1
reap $spid || rc=1
sed 's/^/  rping: /' "$tmpdir/rping.server" "$tmpdir/rping.client"
check "rping A -> B, 10 verified ping-pongs" test $rc = 0
rdma_crossed "rping went over the veth" "$s" 10

# Same over IPv6 (RoCE v2 with the fd77:: GIDs), so AF_INET6 tests are sound.
port=$(vm_port)
s=$(rxe_snap)
rping -s -a "$HOST_B6" -p "$port" -C 5 >"$tmpdir/rping6.server" 2>&1 &
spid=$!
wait_cm_listen "$port"
rc=0
rping -c -a "$HOST_B6" -I "$HOST_A6" -p "$port" -C 5 -V >"$tmpdir/rping6.client" 2>&1 || rc=1
reap $spid || rc=1
check "rping over IPv6 A -> B" test $rc = 0
rdma_crossed "rping over IPv6 went over the veth" "$s" 5
