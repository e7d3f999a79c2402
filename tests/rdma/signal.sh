#!/bin/bash
# A signal handler that writes to the upgraded socket its thread is
# sending on (issue 20).  tests/vm/rsx-sig's writer (the server, on B)
# sends large blocking send()s over the ring while SIGALRM comes every
# 500 us; its handler write()s a tagged record to the same socket.  Under
# the socket's lock (the spin of a send waiting for ring space, the
# counted TCP bytes before the cut-over) the handler waits until the lock
# drops (signals_deferred); then it runs, and writes through the same
# ring, in a sleep that this very thread started.  The reader (the
# client, on A) checks every byte: the pattern in order, each record
# whole and in turn, as many as the writer wrote.  Modes: the handler
# without SA_RESTART (a send may end short or with EINTR, and the writer
# goes on), with it, and RSOCKX_WRAP_HANDLERS=0 (the lock holds all
# signals back instead).
# vm-exclusive: yes
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

prog=$abs_top_builddir/tests/vm/rsx-sig
[ -x "$prog" ] || bail "$prog not built"
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
total=$((16 << 20))

for mode in norestart:-:1 restart:-r:1 nowrap:-:0; do
	IFS=: read -r name flag wrap <<<"$mode"
	[ "$flag" = - ] && flag=
	port=$(vm_port)
	timeout -k 2 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_WRAP_HANDLERS=$wrap \
		RSOCKX_STATS_FILE="$tmpdir/$name.sstats" \
		"$prog" server -b $HOST_B -p $port -n $total -k 262144 \
		-i 500 $flag >"$tmpdir/$name.server" 2>&1 &
	spid=$!
	wait_listen $port || bail "$name: the writer did not listen"
	timeout -k 2 120 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/$name.cstats" \
		"$prog" client -c $HOST_B -p $port -b $HOST_A \
		>"$tmpdir/$name.client" 2>&1
	rc=$?
	reap $spid 30
	src=$?
	sed "s/^/  $name: /" "$tmpdir/$name.server" "$tmpdir/$name.client" >&2
	read -r sent wrote <<<"$(awk '/^writer:/ { print $3, $5 }' \
		"$tmpdir/$name.server")"
	read -r got recs bad <<<"$(awk '/^reader:/ { print $3, $5, $7 }' \
		"$tmpdir/$name.client")"
	check "$name: both ends ended well, in time (writer $src, reader $rc)" \
		test "$src" = 0 -a "$rc" = 0
	check "$name: the reader got the whole pattern in order (${got:-?} of $total)" \
		test "${got:-0}" = $total -a "${sent:-0}" = $total -a "${bad:-1}" = 0
	check "$name: every record of the handler, whole and in turn (${recs:-?} of ${wrote:-?})" \
		test -n "$wrote" -a "${recs:--1}" = "$wrote" -a "${wrote:-0}" -gt 10 \
		-a "${bad:-1}" = 0
	check "$name: upgraded, the bytes went over RDMA ($(stat_of $tmpdir/$name.sstats rdma_tx_bytes))" \
		test "$(stat_of $tmpdir/$name.sstats upgraded)" -ge 1 -a \
		"$(stat_of $tmpdir/$name.sstats rdma_tx_bytes)" -gt $((total / 2))
	if [ $wrap = 1 ]; then
		check "$name: handlers waited for the lock ($(stat_of $tmpdir/$name.sstats signals_deferred) times)" \
			test "$(stat_of $tmpdir/$name.sstats signals_deferred)" -gt 0
	fi
done
done_testing
