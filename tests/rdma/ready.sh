#!/bin/bash
# Readiness of upgraded sockets (issue 5): event-driven programs whose
# connections are carried by RDMA.  Each scenario of ready.py runs its
# server on host B and its client on host A, both under librsockx (the
# client's rules say rdma); each side checks its bytes, and the counters
# show the connection was upgraded, got a poll stand-in and moved its bytes
# over RDMA.  socat (select on both ends) copies a file both ways.
# vm-exclusive: yes
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

READY_PY=$abs_top_srcdir/tests/rdma/ready.py
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
# Not a rule: a rule of rdma makes the first send wait for the probe, whose
# deadline (1 s) is for real networks; the first probe of a process in the
# emulated guest, beside other VMs, overran it (socat up stayed TCP).
export RSOCKX_PROBE_TIMEOUT_MS=${RSOCKX_PROBE_TIMEOUT_MS:-10000}

# scenario NAME MINPKTS [blocking] [VAR=VALUE...]: server on B, client on A
# (the variables in the client's environment, READY_SRV_ENV's words in the
# server's); results in $tmpdir/NAME.*
# READY_ONLY="a b" (RSOCKX_READY_ONLY through tests/vm/run.sh): run just
# those; tests/san/san.test takes a few under ASan.
READY_ONLY=${READY_ONLY:-${RSOCKX_READY_ONLY:-}}
# ran NAME: NAME is one of this run's scenarios (the checks after a
# scenario, and the socat pair "socat", are skipped with it)
ran() { case " ${READY_ONLY:-$1} " in *" $1 "*) ;; *) return 1 ;; esac; }
scenario() {
	local name=$1 min=$2 mode=${3:-} port spid rc=0 s
	shift $(($# < 3 ? $# : 3))
	ran "$name" || return 0
	port=$(vm_port)
	rm -f "$tmpdir/$name".[sc]stats
	# shellcheck disable=SC2086
	timeout 150 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_STATS_FILE="$tmpdir/$name.sstats" ${READY_SRV_ENV:-} \
		"$PYTHON" "$READY_PY" "$name" server $HOST_B "$port" \
		>"$tmpdir/$name.server" 2>&1 &
	spid=$!
	wait_listen "$port" || { kill $spid; not_ok "$name: server listens"; return; }
	s=$(rxe_snap)
	timeout 150 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/$name.cstats" READY_BIND=$HOST_A "$@" \
		"$PYTHON" "$READY_PY" "$name" client $HOST_B "$port" \
		>"$tmpdir/$name.client" 2>&1 || rc=1
	reap $spid 60 || rc=1
	sed "s/^/  $name: /" "$tmpdir/$name.server" "$tmpdir/$name.client" >&2
	check "$name: both sides verified their bytes" \
		test $rc = 0 -a "$(tail -n1 "$tmpdir/$name.client")" = "ready.py: ok $name client" \
		-a "$(tail -n1 "$tmpdir/$name.server")" = "ready.py: ok $name server"
	check "$name: upgraded on both ends" upgraded "$name"
	[ "$mode" = blocking ] ||
	check "$name: the waits used the stand-in" \
		test $(($(stat_of "$tmpdir/$name.sstats" ready_on) +
			$(stat_of "$tmpdir/$name.cstats" ready_on))) -ge 1
	check "$name: no fallback, no broken connection" \
		test "$(stat_of "$tmpdir/$name.sstats" conn_errors)$(stat_of "$tmpdir/$name.cstats" conn_errors)" = 00
	rdma_crossed "$name: rxe0 and rxe1 both sent and received" "$s" "$min"
}

scenario asyncio 100
scenario et 100
scenario select 100
scenario timing 5
scenario lowat 5
scenario epmisc 5
scenario threads 100
scenario aliases 20 blocking
# A wait rsockx does not see (a raw epoll_wait system call): the watcher's
# backstop arms the CQ the program left unarmed, and the arrival wakes it.
scenario raw 3
# Under ASan the slower hello exchange can leave the CQ armed by its own
# blocking recv; the wait must end all the same (checked above), but the
# backstop then had nothing to arm.
ran raw && case $RSOCKX_PRELOAD in
*libasan*)
	skip "raw: backstop count not checked under ASan (the CQ may be armed)" ;;
*)
	check "raw: the watcher armed the CQ the program had left unarmed" \
		test "$(stat_of "$tmpdir/raw.cstats" ready_backstops)" -ge 1 ;;
esac
# A socket turned blocking after its upgrade: its completions go to the
# device's channel, which the readiness thread drains (issue 20 item 7),
# and each blocking recv sleeps (no spin) until that thread kicks it.
scenario turned 100 blocking RSOCKX_SPIN_US=0
# A recv that finds its answer in needs no sleep (fewer on a busy host:
# 297 sleeps of 300 in one run, 77 in another), so the kicks are counted
# against the client's sleeps, each of which must have had one.
if ran turned; then
	k=$(stat_of "$tmpdir/turned.cstats" chan_kicks)
	z=$(stat_of "$tmpdir/turned.cstats" sleeps)
	check "turned: the blocking recvs were woken from the device's channel (chan_kicks $k for $z sleeps, 300 round trips)" \
		test "$k" -ge 1 -a $((2 * k)) -ge "$z"
fi
# A 1 s spin in the client's epoll, poll, select and blocking recv: a
# signal during it interrupts the wait at once, and data during it ends
# the wait unslept.  A blocking recv whose signal handlers all have
# SA_RESTART goes on after the signal, as the kernel's does.
scenario signal 5 "" RSOCKX_SPIN_US=1000000
if ran signal; then
spun=$(stat_of "$tmpdir/signal.cstats" spin_waits)
woke=$(stat_of "$tmpdir/signal.cstats" spin_wakes)
check "signal: the waits spun ($spun), and data ended three of them ($woke)" \
	test "$spun" -ge 6 -a "$woke" -ge 3
check "signal: the SA_RESTART recv was restarted (intr_restarts)" \
	test "$(stat_of "$tmpdir/signal.cstats" intr_restarts)" -ge 1
fi
# A second thread blocked on the same socket waits for the first one's
# news in a futex wait, which a signal ends as the kernel ends a socket call.
scenario waiter 5 blocking
ran waiter &&
check "waiter: the second thread's recvs waited for the first's (naps)" \
	test "$(stat_of "$tmpdir/waiter.cstats" naps)" -ge 2
# The same with a 1 s spin: the signal comes while the second thread
# spins, and the wait after the spin must end for it.
scenario waiterspin 5 blocking RSOCKX_SPIN_US=1000000
ran waiterspin &&
check "waiterspin: the second thread waited for the first's (naps), and went on after the SA_RESTART signal (intr_restarts)" \
	test "$(stat_of "$tmpdir/waiterspin.cstats" naps)" -ge 1 -a \
	"$(stat_of "$tmpdir/waiterspin.cstats" intr_restarts)" -ge 1
# fork: connections accepted in pre-forked workers, or handed to a child
# before their first byte, are upgraded in that process; a child that uses
# a connection its parent upgraded has the parent hand it back to TCP
scenario prefork 10 blocking
ran prefork &&
check "prefork: four connections upgraded in the workers" \
	test "$(stat_of "$tmpdir/prefork.sstats" upgraded)" = 4
scenario forkconn 10 blocking
ran forkconn &&
check "forkconn: three connections upgraded in the children" \
	test "$(stat_of "$tmpdir/forkconn.sstats" upgraded)" = 3
# forkconn with the server's forks pausing 200 ms where its CM thread
# still runs (RSOCKX_TEST_FORK_GAP_MS) and no rules at the client, so that
# its requests come out of band, some of them in that gap: such a request
# must wait for the one process left with the connection (before the fix
# of 2026-12-05 the child got EIO or a stream that hung; localready.test's
# forkgap over shared memory)
READY_SRV_ENV=RSOCKX_TEST_FORK_GAP_MS=200 scenario forkgap 10 blocking RSOCKX_CONF=
ran forkgap &&
check "forkgap: connections upgraded in the children ($(stat_of "$tmpdir/forkgap.sstats" upgraded) of 3), none lost in a fork (fork_lost $(stat_of "$tmpdir/forkgap.sstats" fork_lost))" \
	test "$(stat_of "$tmpdir/forkgap.sstats" upgraded)" -ge 2 -a \
	     "$(stat_of "$tmpdir/forkgap.sstats" fork_lost)" = 0
# the server forks 0.3 s after accept() while its CM thread holds the
# socket for a second to answer the request for it: the fork waits and
# hands the upgraded socket over (before: no hand-off slot, the child got
# EIO; localready.test's forkheld over shared memory)
READY_SRV_ENV=RSOCKX_TEST_ANSWER_HOLD_MS=1000 scenario forkheld 10 blocking RSOCKX_CONF=
ran forkheld &&
check "forkheld: none lost in a fork (fork_lost $(stat_of "$tmpdir/forkheld.sstats" fork_lost))" \
	test "$(stat_of "$tmpdir/forkheld.sstats" fork_lost)" = 0
scenario forkinherit 10 blocking
ran forkinherit &&
check "forkinherit: the child took the connection over, on TCP (fallback_fork $(stat_of "$tmpdir/forkinherit.sstats" fallback_fork), fork_downgraded $(stat_of "$tmpdir/forkinherit.sstats" fork_downgraded), fork_handoffs $(stat_of "$tmpdir/forkinherit.sstats" fork_handoffs))" \
	test "$(stat_of "$tmpdir/forkinherit.sstats" fallback_fork)" -ge 1 -a \
	     "$(stat_of "$tmpdir/forkinherit.sstats" fork_downgraded)" = 1 -a \
	     "$(stat_of "$tmpdir/forkinherit.sstats" fork_handoffs)" = 1
ran timing &&
check "timing: the ring filled (about 256 KiB) before EAGAIN" \
	grep -Eq 'filled (2[0-9]{5}|[3-9][0-9]{5})' "$tmpdir/timing.client"

# socat both ends (select() on the connection), file A -> B and B -> A
if ! ran socat; then
	:
elif command -v socat >/dev/null; then
	head -c 3000000 /dev/urandom >"$tmpdir/in"
	for dir in up down; do
		port=$(vm_port)
		rm -f "$tmpdir/out" "$tmpdir/socat.$dir".[sc]stats
		# down: the server speaks first; a HELLO that the VM's slow
		# QP setup delays past the default grace would lose the upgrade.
		# 64 KiB socket buffers: autotuned ones take the whole file
		# before the answer to the HELLO is in (upgrade.sh's reason)
		buf=sndbuf=65536,rcvbuf=65536
		if [ $dir = up ]; then
			srv=(TCP-LISTEN:$port,bind=$HOST_B,reuseaddr,$buf OPEN:"$tmpdir/out",creat,trunc)
			cli=(OPEN:"$tmpdir/in" TCP:$HOST_B:$port,bind=$HOST_A,$buf)
		else
			srv=(OPEN:"$tmpdir/in" TCP-LISTEN:$port,bind=$HOST_B,reuseaddr,$buf)
			cli=(TCP:$HOST_B:$port,bind=$HOST_A,$buf OPEN:"$tmpdir/out",creat,trunc)
		fi
		timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
			RSOCKX_HELLO_GRACE_MS=2000 \
			RSOCKX_STATS_FILE="$tmpdir/socat.$dir.sstats" \
			socat -u "${srv[@]}" &
		spid=$!
		wait_listen $port || bail "socat did not listen"
		s=$(rxe_snap)
		timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
			RSOCKX_CONF="$tmpdir/rdma.conf" \
			RSOCKX_STATS_FILE="$tmpdir/socat.$dir.cstats" \
			socat -u "${cli[@]}"
		reap $spid 30
		check "socat $dir: file arrived intact" cmp -s "$tmpdir/in" "$tmpdir/out"
		check "socat $dir: upgraded on both ends" upgraded socat.$dir
		# up: the client writes the whole file at once; under ASan its QP
		# may be ready only after all of it went over TCP before the
		# cut-over (as the protocol allows)
		case $dir:$RSOCKX_PRELOAD in
		up:*libasan*) skip "socat up: bytes over rxe not required under ASan" ;;
		*) rdma_moved "socat $dir: bytes went over rxe" "$s" 500 ;;
		esac
	done
else
	skip "socat not installed"
fi
done_testing
