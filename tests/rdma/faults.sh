#!/bin/bash
# Faults (issue 7): upgraded connections that break must behave like TCP.
# The survivor of a peer killed mid-stream, a link that is cut, a QP
# forced into the error state: the bytes that arrive are a correct prefix
# of the stream (rsx-stream -k checks each one and says how the stream
# ended), then EOF or an error, never a hang and never a shorter stream
# that looks complete.  Resources that run out keep new connections on TCP
# and leave existing ones alone; shutdown and close from another thread
# wake or end a blocked recv.  Every process is bounded in time.
# vm-exclusive: yes
# vm-timeout: 420
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
[ -x "$STREAM" ] || bail "$STREAM not built (make check builds it)"

FAULTS_PY=$abs_top_srcdir/tests/rdma/faults.py
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
CLI="RSOCKX_CONF=$tmpdir/rdma.conf"
SRV="RSOCKX_CONF="
BIG=2000000000	# more than any case sends before its fault

# RSOCKX_FAULTS_ONLY="kill cut link linkfork qperr res exhaust races": only
# those parts (by hand; run.sh passes RSOCKX_* variables into the VM).
# RSOCKX_FAULTS_CENV: more VAR=value words for faults.py's clients.
RSOCKX_FAULTS_ONLY=${RSOCKX_FAULTS_ONLY:-kill cut link linkfork qperr res exhaust races}
part() { case " $RSOCKX_FAULTS_ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start ROLE LABEL ENV ARGS...: rsx-stream ROLE under the library in the
# background, $! is rsx-stream itself (so that kill -9 hits it).  ENV may
# MEMLOCK=KiB (client only): that RLIMIT_MEMLOCK, without CAP_IPC_LOCK
# (which lets root ignore the limit).
start() {
	local role=$1 label=$2 envs=$3 wrap=
	shift 3
	[ -n "${MEMLOCK:-}" ] && [ $role = client ] &&
		wrap="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock"
	# shellcheck disable=SC2086
	([ -n "$wrap" ] && ulimit -l "$MEMLOCK"
	 exec $wrap env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$tmpdir/$label.${role:0:1}stats" \
		$envs "$STREAM" "$role" "$@" >"$tmpdir/$label.$role" 2>&1) &
}

# pair LABEL SRV_ENV CLI_ENV ARGS...: server on B, client bound to A; sets
# SPID, CPID.
pair() {
	local label=$1 senv=$2 cenv=$3 port
	shift 3
	port=$(vm_port)
	rm -f "$tmpdir/$label".*
	start server "$label" "$senv" -l $HOST_B -p "$port" "$@"
	SPID=$!
	wait_listen "$port" || { echo "$label: server did not start" >&2; return 1; }
	start client "$label" "$cenv" -c $HOST_B -b $HOST_A -p "$port" "$@"
	CPID=$!
}

# field LABEL ROLE KEY: KEY=value of the "rsx-stream: cut" line of ROLE
field() {
	sed -n "s/^rsx-stream: cut .* $3=\([^ ]*\).*/\1/p" "$tmpdir/$1.$2"
}

show() { sed "s/^/  $1: /" "$tmpdir/$1.server" "$tmpdir/$1.client" >&2; }

# --- 1. peer killed with SIGKILL mid-stream ----------------------------------
# kill_case VICTIM(server|client) DIR: the survivor gets a prefix, then EOF
# or ECONNRESET (receiving) or EPIPE/ECONNRESET (sending), and exits 3.
# The server waits 1 s after accept() for the client's HELLO here and in
# qperr_case (-w): with 200 ms, the sanitizer VM under CI's load once had
# the server of kill-client-s2c speak first, stay TCP, and count no broken
# connection (upgrade.sh's s2c, the same).
kill_case() {
	local victim=$1 dir=$2 label=kill-$1-$2 vpid spid surv rc=0 t0 ends
	pair $label "$SRV" "$CLI" -d $dir -n $BIG -k -w 1000 || { not_ok "$label: started"; return; }
	if [ $victim = server ]; then vpid=$SPID spid=$CPID surv=client
	else vpid=$CPID spid=$SPID surv=server; fi
	sleep 3
	kill -0 $vpid 2>/dev/null || { not_ok "$label: victim alive at the kill"; show $label; return; }
	t0=$(now_ms)
	kill -9 $vpid
	wait $vpid 2>/dev/null
	reap $spid 30 || rc=$?
	show $label
	check "$label: $surv exits 3 (cut short, every byte that came right) after $(($(now_ms) - t0)) ms" test $rc = 3
	if { [ $surv = client ] && [ $dir = s2c ]; } || { [ $surv = server ] && [ $dir = c2s ]; }; then
		ends=$(field $label $surv rx_end)
		check "$label: $surv received a prefix ($(field $label $surv received) bytes), then $ends" \
			test "$(field $label $surv received)" -gt 0 -a \( "$ends" = EOF -o "$ends" = ECONNRESET \)
	else
		ends=$(field $label $surv tx_end)
		check "$label: $surv sent $(field $label $surv sent) bytes, then $ends" \
			test "$(field $label $surv sent)" -gt 0 -a \( "$ends" = EPIPE -o "$ends" = ECONNRESET \)
	fi
	check "$label: $surv was upgraded and counted the broken connection" \
		test "$(stat_of $tmpdir/$label.${surv:0:1}stats upgraded)" = 1 -a \
		"$(stat_of $tmpdir/$label.${surv:0:1}stats conn_errors)" -ge 1
}

if part kill; then
	kill_case server s2c
	kill_case server c2s
	kill_case client c2s
	kill_case client s2c
fi

# --- 2. link cut or down mid-stream -------------------------------------------
# The link between A and B fails under a c2s stream.  TCP runs over lo
# here and stays up, so the sender's exit after its error closes it and
# the receiver hears of the end that way.  With STALL the sender is also
# stopped (SIGSTOP) when the link goes: its TCP connection stays open and
# silent, as across a real dead link, and the receiver must find out by
# itself.
# Two ways to fail the link:
#  cut:  a netem qdisc drops every packet leaving either veth end (both
#        directions), the ports stay ACTIVE, as with a cable cut beyond a
#        switch: only the transport's retries can notice.  The RC QPs
#        retry and fail after RSOCKX_QP_TIMEOUT_MS (500 ms: 7 tries of
#        67 ms; the sender must have its error within 10 s).
#  down: vethA goes down, and with it vethB's carrier: both ports turn
#        DOWN under the QPs.  Soft-RoCE retries a request on a port that
#        is down for as long as it stays down (and once locked up the
#        guest kernel doing so); rsockx hears the device's PORT_ERR event
#        and moves the QPs on that port to ERR, so both ends, the stalled
#        receiver too, must have their error within 10 s.
port_is() { # DEV STATE: wait up to 10 s for port 1 of DEV to be in STATE
	local i
	for ((i = 0; i < 100; i++)); do
		rdma link show "$1/1" 2>/dev/null | grep -q "state $2" && return 0
		sleep 0.1
	done
	return 1
}
link_fail() { # cut|down
	if [ $1 = down ]; then
		ip link set $NETDEV_A down
	else
		tc qdisc add dev $NETDEV_A root netem loss 100% &&
			tc qdisc add dev $NETDEV_B root netem loss 100%
	fi
}
link_heal() { # cut|down
	if [ $1 = down ]; then
		# the routes, neighbours and IPv6 addresses went with the link
		ip link set $NETDEV_A up && vm_net_paths
	else
		tc qdisc del dev $NETDEV_A root
		tc qdisc del dev $NETDEV_B root
	fi
}
# link_case LABEL cut|down [stall]: bounded to 40 s per end.
link_case() {
	local label=$1 how=$2 stall=${3:-} rc_c=0 rc_s=0 t0 tc= ts= i
	# info: each end's log says what broke its connection (show)
	pair $label "$SRV RSOCKX_LOG=info" "$CLI RSOCKX_LOG=info" -d c2s -n $BIG -k ||
		{ not_ok "$label: started"; return; }
	sleep 3
	t0=$(now_ms)
	link_fail $how || { not_ok "$label: the link failed ($how)"; kill $CPID $SPID; return; }
	[ -n "$stall" ] && kill -STOP $CPID
	for ((i = 0; i < 400; i++)); do
		[ -z "$stall" ] && [ -z "$tc" ] && ! kill -0 $CPID 2>/dev/null && tc=$(($(now_ms) - t0))
		[ -z "$ts" ] && ! kill -0 $SPID 2>/dev/null && ts=$(($(now_ms) - t0))
		[ -n "$ts" ] && { [ -n "$tc" ] || [ -n "$stall" ]; } && break
		sleep 0.1
	done
	if [ -n "$stall" ]; then
		# the server's end is measured: now let the client see its error
		kill -CONT $CPID
		for ((i = 0; i < 300; i++)); do
			kill -0 $CPID 2>/dev/null || break
			sleep 0.1
		done
	fi
	reap $CPID 1 || rc_c=$?
	reap $SPID 1 || rc_s=$?
	[ $how = down ] || diag "$label: $(tc -s qdisc show dev $NETDEV_A | grep -o 'dropped [0-9]*') packets from A, $(tc -s qdisc show dev $NETDEV_B | grep -o 'dropped [0-9]*') from B"
	link_heal $how
	show $label
	diag "$label: client (sender) ended after ${tc:-(not timed)} ms, server (receiver) after ${ts:-never: killed at 40 s} ms"
	check "$label: the sender got $(field $label client tx_end)${tc:+ after $tc ms}" \
		test $rc_c = 3 -a "$(field $label client tx_end)" != ok
	[ -n "$stall" ] || check "$label: the sender's error within 10 s (${tc:-never} ms)" \
		test -n "$tc" -a "${tc:-99999}" -lt 10000
	check "$label: the receiver got a prefix ($(field $label server received) bytes), then $(field $label server rx_end) after ${ts:-40000+} ms" \
		test $rc_s = 3 -a "$(field $label server received)" -gt 0 -a "$(field $label server rx_end)" != ok
	if [ $how = down ]; then
		check "$label: the receiver's error within 10 s${stall:+, by itself} (${ts:-never} ms)" \
			test -n "$ts" -a "${ts:-99999}" -lt 10000
		# Without the stall the sender's work request may fail on
		# the dead netdev before either port's event is read: it
		# exits, and the receiver hears its TCP end first (1 of 6
		# rehearsals).  Only the stalled sender keeps that end quiet.
		[ -n "$stall" ] && check "$label: the receiver broke it for its port (port_down_breaks $(stat_of $tmpdir/$label.sstats port_down_breaks))" \
			test "$(stat_of $tmpdir/$label.sstats port_down_breaks)" -ge 1
	else
		# Both ends' writes go unanswered, but their TCP connection
		# (both addresses are this guest's) does not: the end whose
		# retries run out first breaks and exits, and the other sees
		# its TCP end before its own run out ("peer closed without
		# FIN").  Either end may be first: the sender was not in 1 of
		# 5 runs (rxe counters and logs).
		check "$label: a break counted as the transport's retries used up (qp_timeouts sender $(stat_of $tmpdir/$label.cstats qp_timeouts), receiver $(stat_of $tmpdir/$label.sstats qp_timeouts))" \
			test $(($(stat_of $tmpdir/$label.cstats qp_timeouts) + $(stat_of $tmpdir/$label.sstats qp_timeouts))) -ge 1
	fi
	check "$label: both ends were upgraded" upgraded $label
	# the ports are ACTIVE again (after a cut they never left it)
	port_is $DEV_A ACTIVE || :
}
# RSOCKX_FAULTS_LINK="plain stall": the variants.  By default a cut runs
# plain only: across a cut, a receiver whose sender is stopped has nothing
# to send on its QP, so only the sender's error ends its stream, and the
# stall variant spends its whole 40 s waiting.  Taking the link down runs
# both.
link_variants() { # cut|down LABEL DEFAULT_VARIANTS
	case " ${RSOCKX_FAULTS_LINK:-$3} " in *" plain "*) link_case $2 $1 ;; esac
	case " ${RSOCKX_FAULTS_LINK:-$3} " in *" stall "*) link_case $2-tcp-stalled $1 stall ;; esac
}
part cut && link_variants cut link-cut plain
part link && link_variants down link-down "plain stall"

# --- 3. QP error injected ------------------------------------------------------
# RSOCKX_TEST_QP_ERR_AFTER moves the sender's QP to ERR after 1 MB: the
# sender gets an error, the receiver a correct prefix and then ECONNRESET,
# never a clean EOF after fewer bytes.
qperr_case() {
	local label=qp-err-$1 dir=$1 senv=$SRV cenv=$CLI rc_c=0 rc_s=0 snd rcv
	if [ $dir = c2s ]; then cenv="$cenv RSOCKX_TEST_QP_ERR_AFTER=1000000" snd=client rcv=server
	else senv="$senv RSOCKX_TEST_QP_ERR_AFTER=1000000" snd=server rcv=client; fi
	pair $label "$senv" "$cenv" -d $dir -n 8000000 -k -w 1000 || { not_ok "$label: started"; return; }
	reap $CPID 60 || rc_c=$?
	reap $SPID 10 || rc_s=$?
	show $label
	local rc_snd=$rc_c rc_rcv=$rc_s
	[ $snd = server ] && rc_snd=$rc_s rc_rcv=$rc_c
	check "$label: the sender ($snd) got $(field $label $snd tx_end) after $(field $label $snd sent) bytes" \
		test $rc_snd = 3 -a \( "$(field $label $snd tx_end)" = ECONNRESET -o "$(field $label $snd tx_end)" = EIO \)
	check "$label: the receiver got a prefix ($(field $label $rcv received) bytes), then $(field $label $rcv rx_end)" \
		test $rc_rcv = 3 -a "$(field $label $rcv received)" -gt 0 -a \
		\( "$(field $label $rcv rx_end)" = ECONNRESET -o "$(field $label $rcv rx_end)" = EIO \)
	check "$label: upgraded, the sender counted conn_errors" \
		test "$(stat_of $tmpdir/$label.${snd:0:1}stats upgraded)" = 1 -a \
		"$(stat_of $tmpdir/$label.${snd:0:1}stats conn_errors)" -ge 1
}
if part qperr; then
	qperr_case c2s
	qperr_case s2c
fi

# --- 4. resources ---------------------------------------------------------------
# res_case LABEL CLI_ENV: the client's ring does not fit in its memlock
# limit: TCP, counted as fallback_pinned (the default RSOCKX_PIN_MAX is
# three quarters of that limit), every byte right.
res_case() {
	local label=$1 rc_c=0 rc_s=0
	pair $label "$SRV" "$2" -n 1000000 || { not_ok "$label: started"; return; }
	reap $CPID 60 || rc_c=$?
	reap $SPID 10 || rc_s=$?
	show $label
	check "$label: every byte right" test $rc_c = 0 -a $rc_s = 0
	check "$label: stayed TCP, fallback_pinned counted" \
		test "$(stat_of $tmpdir/$label.cstats fallback_pinned)" -ge 1 -a \
		"$(stat_of $tmpdir/$label.cstats upgraded)" = 0 -a \
		"$(stat_of $tmpdir/$label.sstats upgraded)" = 0
}
if part res; then
	MEMLOCK=64 res_case memlock-64k "$CLI"
	MEMLOCK=1024 res_case ring-too-big "$CLI RSOCKX_RING_SIZE=64m"
fi

# py_case SCENARIO [nocap]: faults.py server on B, client on A; sets rc.
# PY_SENV, PY_CENV: more VAR=value words for the server's, the client's env.
py_case() {
	local name=$1 port spid rc=0 wrap=
	[ "${2:-}" = nocap ] && wrap="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock"
	port=$(vm_port)
	rm -f "$tmpdir/$name".* "$tmpdir/closed"
	# shellcheck disable=SC2086
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= FAULTS_FLAG="$tmpdir/closed" \
		RSOCKX_STATS_FILE="$tmpdir/$name.sstats" ${PY_SENV:-} \
		"$PYTHON" "$FAULTS_PY" "$name" server $HOST_B "$port" \
		>"$tmpdir/$name.server" 2>&1 &
	spid=$!
	wait_listen "$port" || { kill $spid; echo "$name: server did not start" >&2; return 1; }
	# shellcheck disable=SC2086
	timeout 60 $wrap env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/$name.cstats" FAULTS_BIND=$HOST_A ${PY_CENV:-} \
		${RSOCKX_FAULTS_CENV:-} \
		FAULTS_FLAG="$tmpdir/closed" \
		"$PYTHON" "$FAULTS_PY" "$name" client $HOST_B "$port" \
		>"$tmpdir/$name.client" 2>&1 || rc=1
	# PY_SRC: the server's exit status expected (137: it kills itself)
	reap $spid 30
	[ $? = "${PY_SRC:-0}" ] || rc=1
	show $name
	[ $rc = 0 ] && grep -q "^faults.py: ok $name client" "$tmpdir/$name.client" &&
		grep -q "^faults.py: ok $name server" "$tmpdir/$name.server"
}
okline() { sed -n "s/^faults.py: ok $1 $2 //p" "$tmpdir/$1.$2"; }

# py_check DESC SCENARIO [nocap]: one TAP point with what both sides said
py_check() {
	local rc=0
	py_case "$2" "${3:-}" || rc=1
	check "$1: $(okline "$2" client) / server: $(okline "$2" server)" test $rc = 0
}

part exhaust &&
for sc in fd memlock; do
	py_check "exhausted $sc: first connection upgraded, second TCP, both right" \
		$sc $([ $sc = memlock ] && echo nocap)
	check "exhausted $sc: the client counted 1 upgrade and fallback_resources" \
		test "$(stat_of $tmpdir/$sc.cstats upgraded)" = 1 -a \
		"$(stat_of $tmpdir/$sc.cstats fallback_resources)" -ge 1
done

# RSOCKX_MAX_QPS on either side: the connection over the limit stays TCP,
# the others go on, and a queue pair given back at close is taken again.
qp_stats() { # ROLE(c|s): "upgraded U, fallback_qp_limit L, fallback_nak N"
	echo "upgraded $(stat_of $tmpdir/qplimit.${1}stats upgraded)," \
		"fallback_qp_limit $(stat_of $tmpdir/qplimit.${1}stats fallback_qp_limit)," \
		"fallback_nak $(stat_of $tmpdir/qplimit.${1}stats fallback_nak)"
}
if part exhaust; then
	for side in client server; do
		if [ $side = client ]; then
			PY_CENV=RSOCKX_MAX_QPS=2 py_check "RSOCKX_MAX_QPS=2 on the $side: A and B upgraded, C stayed TCP, D upgraded once A closed, every echo right" qplimit
			want_c="upgraded 3, fallback_qp_limit 1, fallback_nak 0"
			want_s="upgraded 3, fallback_qp_limit 0, fallback_nak 0"
		else
			PY_SENV=RSOCKX_MAX_QPS=2 py_check "RSOCKX_MAX_QPS=2 on the $side: A and B upgraded, C stayed TCP, D upgraded once A closed, every echo right" qplimit
			want_c="upgraded 3, fallback_qp_limit 0, fallback_nak 1"
			want_s="upgraded 3, fallback_qp_limit 1, fallback_nak 0"
		fi
		check "RSOCKX_MAX_QPS=2 on the $side: client counted $(qp_stats c)" \
			test "$(qp_stats c)" = "$want_c"
		check "RSOCKX_MAX_QPS=2 on the $side: server counted $(qp_stats s)" \
			test "$(qp_stats s)" = "$want_s"
	done
fi

# --- 4b. the port goes down and comes back, in the same processes -----------------
# faults.py flap asks for the link to go down and to come back; in between
# a new connection stays TCP (its device's port is down), and after it one
# upgrades again (rsockx heard the port come back).
flap_driver() { # [SCENARIO]: answers faults.py's want-down and want-up, for
	# 60 s at most; with SCENARIO, its server is stopped while the port is down
	local f=$tmpdir/closed i stop=${1:-}
	for ((i = 0; i < 600; i++)); do
		[ -e $f.want-down ] && break
		sleep 0.1
	done
	[ -e $f.want-down ] || return
	[ -n "$stop" ] && pkill -STOP -f "faults.py $stop server"
	link_fail down
	port_is $DEV_A DOWN && port_is $DEV_B DOWN && touch $f.down
	for ((; i < 600; i++)); do
		[ -e $f.want-up ] && break
		sleep 0.1
	done
	link_heal down
	port_is $DEV_A ACTIVE && port_is $DEV_B ACTIVE && touch $f.up
	[ -n "$stop" ] && pkill -CONT -f "faults.py $stop server"
}
if part link; then
	rm -f "$tmpdir"/closed.*
	flap_driver &
	fpid=$!
	py_check "port down and up again: A broke, B stayed TCP, C upgraded, every echo right" flap
	kill $fpid 2>/dev/null
	wait $fpid 2>/dev/null
	link_heal down 2>/dev/null
	port_is $DEV_A ACTIVE
	check "port down and up: the client upgraded A and C, kept B on TCP ($(stat_of $tmpdir/flap.cstats upgraded) upgraded, fallback_nodev $(stat_of $tmpdir/flap.cstats fallback_nodev))" \
		test "$(stat_of $tmpdir/flap.cstats upgraded)" = 2 -a \
		"$(stat_of $tmpdir/flap.cstats fallback_nodev)" = 1
	check "port down and up: the server upgraded A and C ($(stat_of $tmpdir/flap.sstats upgraded))" \
		test "$(stat_of $tmpdir/flap.sstats upgraded)" = 2
	# the server's echo thread sleeps in a blocking recv, which hears the
	# port's event first; the client (a socket timeout: python polls, the
	# watcher hears for it) may see the server's TCP end of A before
	check "port down and up: the port's event broke A (port_down_breaks: server $(stat_of $tmpdir/flap.sstats port_down_breaks), client $(stat_of $tmpdir/flap.cstats port_down_breaks))" \
		test "$(stat_of $tmpdir/flap.sstats port_down_breaks)" -ge 1
fi
if part linkfork; then
	# A child forked after its parent opened the devices opens its own
	# (the parent's refuse a child's commands) and upgrades; the port going
	# down breaks the connections of both, the server stopped, so that no
	# TCP end of its tells them.
	rm -f "$tmpdir"/closed.*
	flap_driver flapfork &
	fpid=$!
	py_check "a fork family, port down: the parent's A and the child's B broke by themselves, C upgraded after" flapfork
	kill $fpid 2>/dev/null
	wait $fpid 2>/dev/null
	pkill -CONT -f "faults.py flapfork server"
	link_heal down 2>/dev/null
	port_is $DEV_A ACTIVE
	check "fork family: the server upgraded A, the child's B, and C ($(stat_of $tmpdir/flapfork.sstats upgraded))" \
		test "$(stat_of $tmpdir/flapfork.sstats upgraded)" = 3
fi

# --- 5. close and shutdown races ---------------------------------------------------
if part races; then
	py_check "close with unread data while the peer sends" closesend
	py_check "shutdown(SHUT_RDWR) from another thread wakes a blocked recv" shutrd
	py_check "shutdown(SHUT_RD) from another thread wakes a blocked recv" shutrdonly
	py_check "close from another thread while one is blocked in recv (Linux: it returns when the peer closes)" closerd
	py_check "close from another thread while one is blocked in send: the send completes, the peer reads every byte, then EOF" closesnd
	py_check "close from another thread while one is blocked in send, the peer closes unread: the send fails" closesndrst
	PY_SRC=137 py_check "a send blocked on a peer that never read since its upgrade, killed: the send fails" killsnd
	PY_SRC=137 py_check "the same, evented (epoll): the wait ends, the send fails" killsndev
	for sc in closesend shutrd shutrdonly closerd closesnd closesndrst killsnd killsndev; do
		check "$sc: the connection was upgraded" test "$(stat_of $tmpdir/$sc.cstats upgraded)" = 1
	done
fi
done_testing
