#!/bin/bash
# A hostile peer (issue 7): tests/vm/evil speaks verbs directly, upgrades
# like an honest client (HELLO from src/wire.c, ACK, QP to RTS, CUTOVER),
# then misbehaves against a python echo server under librsockx: a write
# outside the granted ring, one straddling the end of its control area, a
# READ of the ring, a write with a closed connection's rkey, a DATA
# immediate longer than the ring, a forged CREDIT, a write into another
# connection's ring with that connection's own rkey (neighbour: each
# connection has a protection domain of its own).  The forbidden RDMA operations must fail on the evil side; each
# time the server must tear that connection down (ECONNRESET to the
# application, conn_errors), hand its application no byte from it, never
# crash, and then serve an honest client under the library correctly.
# vm-exclusive: yes
# vm-timeout: 240
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
EVIL=${EVIL:-$abs_top_builddir/tests/vm/evil}
[ -x "$EVIL" ] || bail "$EVIL not built (make check builds it)"
py=$abs_top_srcdir/tests/rdma/evil.py
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

# line FILE PATTERN: FILE has a line matching PATTERN (grep -E)
line() { grep -Eq "$2" "$1"; }

for mode in outside edge read oldkey bigimm credit neighbour; do
	dir=$tmpdir/$mode
	mkdir -p "$dir"
	# the evil connection(s), then the honest one
	n=2 k=1 together=
	[ $mode = oldkey ] && n=3 k=2
	# the victim (1) and the attacker (2) at once, then the honest one
	[ $mode = neighbour ] && n=3 k=2 together=together
	port=$(vm_port)
	timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_LOG=info RSOCKX_STATS_FILE="$dir/sstats" \
		"$PYTHON" "$py" server $HOST_B "$port" $n $together \
		>"$dir/server" 2>&1 &
	spid=$!
	if ! wait_listen "$port" 400; then
		not_ok "$mode: server listens"
		kill $spid 2>/dev/null
		continue
	fi
	s=$(rxe_snap)
	timeout 60 "$EVIL" -d $DEV_A -g $GID_INDEX -c $HOST_B -p "$port" \
		-b $HOST_A -m $mode >"$dir/evil" 2>&1
	erc=$?
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" RSOCKX_STATS_FILE="$dir/cstats" \
		"$PYTHON" "$py" client $HOST_B "$port" $HOST_A 1000000 \
		>"$dir/honest" 2>&1
	hrc=$?
	reap $spid 60
	src=$?
	sed "s/^/  $mode evil: /" "$dir/evil" >&2
	sed "s/^/  $mode server: /" "$dir/server" >&2
	sed "s/^/  $mode honest: /" "$dir/honest" >&2
	diag "$mode: $(grep -E '^(bad-op|qp-state|server-closed|control|victim)' "$dir/evil" | tr '\n' ' ')"

	check "$mode: evil peer upgraded and its CUTOVER went through ($erc)" \
		test $erc = 0 -a "$(grep -c '^cutover ok' "$dir/evil")" = $((k))
	case $mode in
	outside|edge|oldkey|neighbour)
		[ $mode = oldkey ] &&
			check "$mode: a write with the live rkey succeeds (control)" \
				line "$dir/evil" '^control ok'
		check "$mode: the write was refused (remote access error)" \
			line "$dir/evil" '^bad-op status=remote access error'
		check "$mode: evil QP in error after it" \
			line "$dir/evil" '^qp-state (ERR|SQE)' ;;
	read)
		check "$mode: the READ was refused" \
			line "$dir/evil" '^bad-op status=remote (access|invalid request) error' ;;
	bigimm|credit)
		# the transport takes it; the server must judge the message
		check "$mode: delivered at the transport level" \
			line "$dir/evil" '^bad-op status=success' ;;
	esac
	case $mode in
	bigimm) why="DATA beyond the ring" ;;
	credit) why="CREDIT out of range" ;;
	*) why="work request failed" ;;
	esac
	check "$mode: server broke the connection for the right reason ($why)" \
		line "$dir/server" "connection broken: $why\$"
	check "$mode: server reset the connection for its application" \
		line "$dir/server" "^conn $k: error ECONNRESET bytes=0 head=\$"
	check "$mode: server closed that TCP connection" \
		line "$dir/evil" '^server-closed (eof|reset)'
	check "$mode: server counted it (conn_errors >= 1)" \
		test "$(stat_of "$dir/sstats" conn_errors)" -ge 1
	check "$mode: server alive, ended normally ($src)" \
		test $src = 0 -a "$(grep -c '^server done' "$dir/server")" = 1
	check "$mode: honest client afterwards: every byte echoed ($hrc)" \
		test $hrc = 0 -a "$(grep -c '^honest ok' "$dir/honest")" = 1
	check "$mode: server saw the honest stream whole" \
		line "$dir/server" "^conn $n: eof bytes=1000000 head=[0-9a-f]{16}\$"
	check "$mode: honest connection upgraded, over RDMA" \
		test "$(stat_of "$dir/cstats" upgraded)" = 1 -a \
		"$(stat_of "$dir/cstats" rdma_rx_bytes)" -gt 0 -a \
		"$(stat_of "$dir/sstats" upgraded)" = $n
	rdma_crossed "$mode: rxe0 and rxe1 carried it" "$s" 10
	if [ $mode = oldkey ]; then
		check "$mode: first connection ended cleanly, no data" \
			line "$dir/server" '^conn 1: (eof|error [A-Z]+) bytes=0 head=$'
	fi
	if [ $mode = neighbour ]; then
		check "$mode: the victim's own write went through (control)" \
			line "$dir/evil" '^victim placed success'
		check "$mode: the victim's 64 bytes came back to it" \
			line "$dir/evil" '^victim echoed ok'
		check "$mode: the server's application got the victim's bytes, not the attacker's" \
			line "$dir/server" '^conn 1: (eof|error [A-Z]+) bytes=64 head=7676767676767676$'
	fi
	diag "$mode: server conn_errors=$(stat_of "$dir/sstats" conn_errors)" \
		"upgraded=$(stat_of "$dir/sstats" upgraded)"
done
done_testing
