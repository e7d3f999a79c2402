#!/bin/bash
# The mid-stream cut-over under stress: thousands of connections between A
# and B, each streaming both ways at once in random-sized writes (1 byte to
# 64 KiB) with random pauses, both ends under librsockx with
# RSOCKX_INBAND=0, so that every connection starts on TCP and is upgraded
# out of band (RDMA CM) at whatever point of its streams that happens
# to come.  rsx-cut (tests/vm/rsx-cut.c) checks every byte of both
# directions on the receiving side, and each side checks the other's hash
# of what it sent; thread-per-direction blocking connections, epoll (level
# and edge-triggered) and poll loops, blocking and non-blocking connects,
# mixed in the same processes.  Where each stream was cut over, rsx-cut
# learns from TCP_INFO (bytes that came over TCP of the stream; the
# descriptor stays the kernel's TCP socket): the "cut" lines, printed here
# as diagnostics.
#
# Rounds: "plain" (no library: the program itself, and its TCP_INFO
# accounting, are right, and no RDMA moves), "known" (the client's rules
# say the server runs rsockx) and "probe" (no rules: the client probes, so
# connections go on over TCP until the answer is in, then upgrade).
#
# Every connection lives at least RSOCKX_CUT_LIFE ms (rsx-cut -H: its last
# bytes, the trailer, wait for that), and the client opens its first
# RSOCKX_CUT_CONC connections evenly over that time (-W), the later ones
# as earlier ones finish: new connections come in a steady stream, at
# most CONC per LIFE (about 70 a second; measured in the emulated guest,
# with the data and both processes on its 2 vCPUs: 20 to 25 a second).
# An upgrade needs nothing of the program and takes 10 to 20 ms of RDMA CM
# and queue pair work a side, so it is done seconds before the connection
# may end.  So each round expects N mid-stream upgrades on each side, and
# bytes over RDMA in both directions of every connection (at least the
# trailers), on an idle machine.  Under CI's load (the sanitizer suite
# beside the VM) a side's CM work falls seconds behind, and 1 to 2 % of
# the connections ended on TCP before their answer came or applied: a
# shortfall of at most a thirty-second, every one of them counted by the
# client as ended first or unanswered (fallback_probe, fallback_oob), no
# connection broken, is what a round allows.
#
# Knobs: RSOCKX_CUT_N (connections of the "known" round; "probe" gets two
# thirds of it), RSOCKX_CUT_CONC (open at once), RSOCKX_CUT_LEN (longest
# payload of one direction), RSOCKX_CUT_LIFE (ms), RSOCKX_CUT_RING (ring
# size, 16k: 200 connections at once fit in the guest), RSOCKX_CUT_SEED
# (default: random, printed), RSOCKX_CUT_MODES (rsx-cut -m: t, e, p),
# RSOCKX_CUT_STUCK (seconds after which a connection counts as stuck),
# RSOCKX_CUT_PAUSE and RSOCKX_CUT_DELAY (rsx-cut -P and -D, ms).
# vm-exclusive: yes
# vm-late: yes
# vm-timeout: 600
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
CUT=$abs_top_builddir/tests/vm/rsx-cut
STAT=$abs_top_builddir/tools/rsockx-stat
[ -x "$CUT" ] || bail "$CUT not built (make check builds it)"
[ -x "$STAT" ] || bail "$STAT not built"

N=${RSOCKX_CUT_N:-1200}
N2=$((N * 2 / 3))
# 45 open at once over a life of 3 s: 15 new connections a second.  The
# emulated guest's two vCPUs sustain about 20 with a queue pair made and
# connected per connection on each side by the RDMA CM threads (200 at
# once, about 55 a second, left a third of them on TCP: they ended before
# their turn); since each connection also has a protection domain and a
# second MR of its own, 60 at once left 3 % of them on TCP under CI's load
# (their out-of-band requests timed out), so a quarter of headroom.
CONC=${RSOCKX_CUT_CONC:-45}
# pauses (rsx-cut -P, -D), so that the streams still flow when the
# upgrade comes, tens to hundreds of milliseconds after connect()
PAUSE=${RSOCKX_CUT_PAUSE:-150}
DELAY=${RSOCKX_CUT_DELAY:-400}
LEN=${RSOCKX_CUT_LEN:-262144}
LIFE=${RSOCKX_CUT_LIFE:-3000}
RING=${RSOCKX_CUT_RING-16k}
SEED=${RSOCKX_CUT_SEED:-$((SRANDOM % 1000000))}
MODES=${RSOCKX_CUT_MODES:-tep}
# a connection this old is stuck (rsx-cut -S): reported, failed, shut down
STUCK=${RSOCKX_CUT_STUCK:-60}
diag "seed $SEED (RSOCKX_CUT_SEED), $N + $N2 connections, $CONC at a time, payloads up to $LEN bytes, at least $LIFE ms each, ring ${RING:-default}"
# an upgraded connection holds several descriptors, some in rsockx's
# private range below the soft limit (as in load.sh)
ulimit -Hn 1048576 && ulimit -n 1048576 || bail "cannot raise the fd limit"
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

# cut_run LABEL LIB(yes|no) CLIENT_CONF N LIFE: one server on B (exits
# after N connections) and one client bound to A; output in
# $tmpdir/LABEL.server, .client, counters in .sstats and .cstats.  Sets rc
# (the client's exit status), src (the server's), secs.
cut_run() {
	local label=$1 lib=$2 conf=$3 n=$4 life=$5 port spid cpid p t t0 f out=$tmpdir/$1
	local -a senv=() cenv=()
	if [ "$lib" = yes ]; then
		senv=(env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$out.sstats"
			RSOCKX_CONF= RSOCKX_INBAND=0 ${RING:+RSOCKX_RING_SIZE=$RING})
		cenv=(env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$out.cstats"
			RSOCKX_CONF="$conf" RSOCKX_INBAND=0 ${RING:+RSOCKX_RING_SIZE=$RING})
	fi
	port=$(vm_port)
	rm -f "$out.ready"
	"${senv[@]}" "$CUT" server -l $HOST_B -p "$port" -n "$n" -r "$out.ready" \
		-s $((SEED + 1)) -L "$LEN" -H "$life" -S "$STUCK" -m "$MODES" -T 280 \
		-P "$PAUSE" -D "$DELAY" \
		>"$out.server" 2>&1 &
	spid=$!
	wait_file "$out.ready" 400 || bail "$label: server did not start"
	t0=$EPOCHSECONDS
	rc=0
	"${cenv[@]}" "$CUT" client -c $HOST_B -b $HOST_A -p "$port" -n "$n" \
		-C "$CONC" -W "$life" -s "$SEED" -L "$LEN" -H "$life" -S "$STUCK" \
		-m "$MODES" -T 280 -P "$PAUSE" -D "$DELAY" >"$out.client" 2>&1 &
	cpid=$!
	# the first connection slow (half the age of a stuck one, still
	# hanging): what rsockx says of both processes, and where their
	# threads wait
	while kill -0 $cpid 2>/dev/null; do
		if [ ! -e "$out.hang" ] && grep -q '^rsx-cut: slow: ' "$out.client" "$out.server"; then
			for p in $cpid $spid; do
				"$STAT" -p "$p" -d 2>&1
				echo "threads of $p (count, wait channel, system call and its first arguments):"
				for t in /proc/"$p"/task/*; do
					echo "$(cat "$t/wchan" 2>/dev/null) $(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null)"
				done | sort | uniq -c
			done >"$out.hang" 2>&1
			sed "s/^/  $label: first slow: /" "$out.hang" >&2
		fi
		sleep 1
	done
	wait $cpid || rc=$?
	src=0
	reap $spid 60 || src=$?
	secs=$((EPOCHSECONDS - t0))
	for f in client server; do
		grep -v '^cut \|^mem: \|^client: \|^server: \|^rsx-cut: ok\|^rsx-cut:   \|^rsx-cut: slow: ' "$out.$f" |
			head -30 | sed "s/^/  $label: $f: /" >&2
	done
}

# parse LABEL: both outputs and both counter files into V, with shell
# builtins only (a process costs 50 ms and more under TCG, and this ran
# ~60 of them per round):
#   V[client.s2c.split] ...  the "cut DIR:" lines of rsx-cut (SIDE.DIR.KEY)
#   V[client.payload]        payload bytes that side received
#   V[client.stuck], V[client.tcp_rx_sum], V[client.ok] (connections said ok)
#   V[c.KEY], V[s.KEY]       rsockx's counters, client and server, summed
declare -A V
parse() {
	local side f line w dir
	local -a words
	V=()
	for side in client server; do
		f=$tmpdir/$1.$side
		[ -r "$f" ] || continue
		while IFS= read -r line; do
			if [[ $line =~ ^cut\ ([cs]2[cs]):\ streams= ]]; then
				dir=${BASH_REMATCH[1]}
				read -r -a words <<<"$line"
				for w in "${words[@]}"; do
					[[ $w =~ ^([a-z_]+)=([0-9]+)$ ]] &&
						V[$side.$dir.${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
				done
			elif [[ $line =~ ^$side:\ .*\ bytes\ sent,\ ([0-9]+)\ received ]]; then
				V[$side.payload]=${BASH_REMATCH[1]}
			elif [[ $line =~ ^$side:\ ([0-9]+)\ connections\ stuck ]]; then
				V[$side.stuck]=${BASH_REMATCH[1]}
			elif [[ $line =~ ^$side:\ tcp_rx_sum=([0-9]+) ]]; then
				V[$side.tcp_rx_sum]=${BASH_REMATCH[1]}
			elif [[ $line =~ ^rsx-cut:\ ok,\ $side:\ ([0-9]+)\ connections ]]; then
				V[$side.ok]=${BASH_REMATCH[1]}
			fi
		done <"$f"
	done
	for side in c s; do
		f=$tmpdir/$1.${side}stats
		[ -r "$f" ] || continue
		while IFS= read -r line; do
			read -r -a words <<<"$line"
			for w in "${words[@]}"; do
				[[ $w =~ ^([a-z_0-9]+)=([0-9]+)$ ]] &&
					V[$side.${BASH_REMATCH[1]}]=$((${V[$side.${BASH_REMATCH[1]}]:-0} + BASH_REMATCH[2]))
			done
		done <"$f"
	done
}
both_ok() { # N: both ends exited 0 and said every byte of N connections was right
	[ "$rc" = 0 ] && [ "$src" = 0 ] && [ "${V[client.ok]:-}" = "$1" ] &&
		[ "${V[server.ok]:-}" = "$1" ]
}
report() { # LABEL: the cut-over points and the memory, as diagnostics
	local line side
	for side in client server; do
		while IFS= read -r line; do
			case $line in
			"cut "* | "mem: "* | "client: "* | "server: "*) diag "$1: $line" ;;
			esac
		done <"$tmpdir/$1.$side"
	done
}
counters() { # LABEL: rsockx's counters that tell about the path, both sides
	local side k line
	for side in c s; do
		line=
		for k in upgraded midstream_upgrades oob_sent oob_acked oob_naked oob_received \
			oob_answered oob_refused oob_deferred \
			hello_sent hello_received tcp_rx_bytes rdma_rx_bytes tcp_tx_bytes rdma_tx_bytes \
			conn_errors qps_created qps_destroyed; do
			line+=" $k=${V[$side.$k]:-0}"
		done
		for k in "${!V[@]}"; do
			[[ $k =~ ^$side\.(fallback_|nak_|untracked_full) ]] && [ "${V[$k]}" != 0 ] &&
				line+=" ${k#*.}=${V[$k]}"
		done
		diag "$1: $([ $side = c ] && echo client || echo server):$line"
	done
}

# --- plain TCP: the program alone ---------------------------------------------
NP=$((N / 3))
s=$(rxe_snap)
cut_run plain no "" $NP 200
parse plain
check "plain: $NP connections, every byte right both ways, both ends ($secs s, stuck: ${V[client.stuck]:-0} and ${V[server.stuck]:-0})" \
	both_ok $NP
# Without rsockx every byte of every stream comes over TCP: TCP_INFO must
# say so exactly, or the cut-over points of the other rounds mean nothing.
check "plain: TCP_INFO counts every stream whole, both directions" \
	test "${V[client.s2c.tcp_only]:-}" = $NP -a "${V[server.c2s.tcp_only]:-}" = $NP \
	-a "${V[client.c2s.tcp_only]:-}" = $NP
rdma_quiet "plain: no RDMA" "$s"
report plain

# --- under rsockx, out-of-band upgrades only -----------------------------------
# round LABEL CLIENT_CONF N
round() {
	local label=$1 conf=$2 n=$3 s f who tcp rdma pay
	s=$(rxe_snap)
	cut_run "$label" yes "$conf" "$n" "$LIFE"
	parse "$label"
	check "$label: $n connections, every byte right both ways, both ends ($secs s, stuck: ${V[client.stuck]:-0} and ${V[server.stuck]:-0})" \
		both_ok "$n"
	# Under CI's load (the sanitizer suite beside the VM) the RDMA CM
	# work of a side can fall seconds behind: up to 2 % of the
	# connections ended before their answer came or could apply
	# (fallback_probe: ended first; fallback_oob: no answer in time).
	# Those, and only those, may stay TCP, at most a thirty-second of
	# them; nothing may break (conn_errors).
	late=$((n - ${V[c.midstream_upgrades]:-0}))
	ended=$((${V[c.fallback_probe]:-0} + ${V[c.fallback_oob]:-0}))
	check "$label: every connection upgraded mid-stream on both sides, but those that ended first under load (client ${V[c.midstream_upgrades]:-0}, server ${V[s.midstream_upgrades]:-0}, of $n; ended first or unanswered: $ended, at most $((n / 32)); conn_errors ${V[c.conn_errors]:-0} and ${V[s.conn_errors]:-0})" \
		test "$late" -le "$ended" -a "$late" -le $((n / 32)) \
		-a "${V[s.midstream_upgrades]:-0}" -ge "${V[c.midstream_upgrades]:-0}" \
		-a "${V[c.conn_errors]:-0}" = 0 -a "${V[s.conn_errors]:-0}" = 0
	check "$label: out of band only: no HELLO (client sent ${V[c.hello_sent]:-0}, server got ${V[s.hello_received]:-0})" \
		test "${V[c.hello_sent]:-0}" = 0 -a "${V[s.hello_received]:-0}" = 0
	check "$label: out-of-band requests: client acked ${V[c.oob_acked]:-0} (sent ${V[c.oob_sent]:-0}), server answered ${V[s.oob_answered]:-0} (received ${V[s.oob_received]:-0}), of $n" \
		test "${V[c.oob_acked]:-0}" -ge $((n - n / 32)) \
		-a "${V[s.oob_answered]:-0}" -ge "${V[c.oob_acked]:-0}" \
		-a "${V[c.oob_sent]:-0}" -ge $((n - n / 32)) \
		-a "${V[s.oob_received]:-0}" -ge "${V[s.oob_answered]:-0}"
	# bytes on both sides of the cut, in each process: TCP before, RDMA after
	for f in c s; do
		[ $f = c ] && who=client || who=server
		tcp=${V[$f.tcp_rx_bytes]:-0} rdma=${V[$f.rdma_rx_bytes]:-0} pay=${V[$who.payload]:-0}
		check "$label: $who received over TCP ($tcp) and over RDMA ($rdma), RDMA at least a quarter of its $pay payload bytes" \
			test "$tcp" -gt 0 -a "$rdma" -gt 0 -a "$rdma" -ge $((pay / 4)) -a "$pay" -gt 0
	done
	# the program's own view (TCP_INFO): streams with bytes on both
	# sides of the cut, in both directions; none without a byte over
	# RDMA but those of the connections that ended first (above); none
	# with more TCP bytes than the stream (rsockx's out-of-band upgrade
	# puts nothing of its own on the TCP connection)
	check "$label: streams cut mid-stream: s2c ${V[client.s2c.split]:-0}, c2s ${V[server.c2s.split]:-0}; all TCP: ${V[client.s2c.tcp_only]:-?} and ${V[server.c2s.tcp_only]:-?}; more than the stream on TCP: ${V[client.s2c.over]:-?} and ${V[server.c2s.over]:-?}" \
		test "${V[client.s2c.split]:-0}" -gt 0 -a "${V[server.c2s.split]:-0}" -gt 0 \
		-a "${V[client.s2c.tcp_only]:-n}" -le $((n / 32)) \
		-a "${V[server.c2s.tcp_only]:-n}" -le $((n / 32)) \
		-a "${V[client.s2c.over]:-}" = 0 -a "${V[server.c2s.over]:-}" = 0
	rdma_crossed "$label: rxe0 and rxe1 carried it" "$s" $((n * 10))
	report "$label"
	counters "$label"
	diag "$label: TCP bytes by TCP_INFO / by rsockx's tcp_rx_bytes: client ${V[client.tcp_rx_sum]:-?} / ${V[c.tcp_rx_bytes]:-0}, server ${V[server.tcp_rx_sum]:-?} / ${V[s.tcp_rx_bytes]:-0}"
}

round known "$tmpdir/rdma.conf" "$N"
round probe "" "$N2"
diag "all of it in $SECONDS s"
done_testing
