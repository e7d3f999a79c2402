# In-guest helpers for the Soft-RoCE VM tests (tests/rdma/*.sh).
# Source after tests/lib.sh:
#   . "$abs_top_srcdir/tests/lib.sh"; . "$abs_top_srcdir/tests/vm/lib.sh"
#
# Two "hosts" live in the one VM (see tests/vm/README.md):
#   A = vethA, rxe0     B = vethB, rxe1
# rxe traffic between A and B crosses the veth (policy routing); plain TCP
# between the two addresses goes over lo.  A client must bind to $HOST_A for
# its RDMA to cross; an unbound one talks B to B (loopback inside rxe1).

HOST_A=192.168.77.1
HOST_B=192.168.77.2
HOST_A6=fd77::1
HOST_B6=fd77::2
DEV_A=rxe0
DEV_B=rxe1
NETDEV_A=vethA
NETDEV_B=vethB
GID_INDEX=1 # RoCE v2, IPv4-mapped (index 0 is the fe80:: link-local GID)
RSPRELOAD=${RSPRELOAD:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}
in_vm() { [ "${RSOCKX_IN_VM:-}" = 1 ]; }
# A and B are two addresses of one host: with same-host upgrades on
# (RSOCKX_LOCAL), their connections would take shared memory, not the
# queue pairs that these tests are about.
export RSOCKX_LOCAL=0

# vm_net_paths: the IPv6 addresses, the routes of tables 10 and 11 (each
# veth end reaches the other end's addresses over the wire) and the static
# neighbours (no ARP/ND round trip before the first packet) of the test
# bed.  guest.sh sets them up; a veth end that goes down loses them all
# (its IPv4 address stays), so a test that takes it down calls this again
# once it is up.
vm_net_paths() {
	local mac_a mac_b
	read -r mac_a <"/sys/class/net/$NETDEV_A/address"
	read -r mac_b <"/sys/class/net/$NETDEV_B/address"
	ip -batch - <<-END
	addr replace $HOST_A6/64 dev $NETDEV_A nodad
	addr replace $HOST_B6/64 dev $NETDEV_B nodad
	route replace $HOST_B dev $NETDEV_A src $HOST_A table 10
	route replace $HOST_A dev $NETDEV_B src $HOST_B table 11
	route replace $HOST_B6 dev $NETDEV_A src $HOST_A6 table 10
	route replace $HOST_A6 dev $NETDEV_B src $HOST_B6 table 11
	neigh replace $HOST_B lladdr $mac_b dev $NETDEV_A nud permanent
	neigh replace $HOST_A lladdr $mac_a dev $NETDEV_B nud permanent
	neigh replace $HOST_B6 lladdr $mac_b dev $NETDEV_A nud permanent
	neigh replace $HOST_A6 lladdr $mac_a dev $NETDEV_B nud permanent
	END
}

# rspreload CMD...: run CMD under rdma-core's librspreload (the incumbent).
rspreload() { LD_PRELOAD="$RSPRELOAD${LD_PRELOAD:+:$LD_PRELOAD}" "$@"; }

# --- rxe counters -------------------------------------------------------
# rxe_count DEV NAME: one hw counter of port 1 (sent_pkts, rcvd_pkts, ...)
rxe_count() {
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"
}

# rxe_snap: "rxe0.sent rxe0.rcvd rxe1.sent rxe1.rcvd" right now.
rxe_snap() {
	echo "$(rxe_count $DEV_A sent_pkts) $(rxe_count $DEV_A rcvd_pkts)" \
		"$(rxe_count $DEV_B sent_pkts) $(rxe_count $DEV_B rcvd_pkts)"
}

# rxe_all: every hw counter of both devices, "DEV.NAME VALUE" a line.
rxe_all() {
	local d f
	for d in $DEV_A $DEV_B; do
		for f in /sys/class/infiniband/$d/ports/1/hw_counters/*; do
			echo "$d.${f##*/} $(<"$f")"
		done
	done
}

# rxe_moved FILE: the counters other than packets and operations that
# moved since rxe_all wrote FILE (retries, sequence errors, RNR NAKs: what
# tells a connection broken by the transport from one broken by rsockx).
rxe_moved() {
	rxe_all | awk 'NR == FNR { was[$1] = $2; next }
		$1 ~ /(_pkts|rdma_sends|rdma_recvs)$/ { next }
		$2 != was[$1] { printf " %s+%d", $1, $2 - was[$1] }' "$1" -
}

# rxe_delta SNAP: the four differences since SNAP (same order as rxe_snap).
rxe_delta() {
	local -a a b
	read -r -a a <<<"$1"
	read -r -a b <<<"$(rxe_snap)"
	echo "$((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2])) $((b[3] - a[3]))"
}

# rxe_total SNAP: all packets sent+received on both devices since SNAP.
rxe_total() {
	local -a d
	read -r -a d <<<"$(rxe_delta "$1")"
	echo $((d[0] + d[1] + d[2] + d[3]))
}

# Assertions, each one TAP point (tests/lib.sh ok/not_ok).  Counters are
# per device, not per process: a test that asserts on them must not share
# the VM with other RDMA traffic, so mark it "# vm-exclusive: yes" (see
# tests/vm/README.md).
#
# rdma_crossed DESC SNAP [MIN]: both devices sent and received >= MIN
# (default 1) packets since SNAP: traffic went A<->B over the veth.
rdma_crossed() {
	local -a d
	read -r -a d <<<"$(rxe_delta "$2")"
	local min=${3:-1}
	if [ "${d[0]}" -ge "$min" ] && [ "${d[1]}" -ge "$min" ] &&
		[ "${d[2]}" -ge "$min" ] && [ "${d[3]}" -ge "$min" ]; then
		ok "$1 (rxe packets: ${d[*]})"
	else
		not_ok "$1 (rxe packets rxe0 sent/rcvd, rxe1 sent/rcvd: ${d[*]})"
	fi
}

# rdma_moved DESC SNAP [MIN]: at least MIN packets in total (any device).
rdma_moved() {
	local t
	t=$(rxe_total "$2")
	if [ "$t" -ge "${3:-1}" ]; then ok "$1 ($t rxe packets)"
	else not_ok "$1 (no rxe traffic: $(rxe_delta "$2"))"; fi
}

# rdma_quiet DESC SNAP: no rxe packet at all since SNAP (nothing used RDMA).
rdma_quiet() {
	local t
	t=$(rxe_total "$2")
	if [ "$t" -eq 0 ]; then ok "$1 (rxe counters unchanged)"
	else not_ok "$1 (rxe traffic: $(rxe_delta "$2"))"; fi
}

# rdma_only_dev DESC SNAP DEV: DEV moved, the other device did not
# (loopback inside one rxe device).
rdma_only_dev() {
	local -a d
	read -r -a d <<<"$(rxe_delta "$2")"
	local mine other
	if [ "$3" = "$DEV_A" ]; then mine=$((d[0] + d[1])) other=$((d[2] + d[3]))
	else mine=$((d[2] + d[3])) other=$((d[0] + d[1])); fi
	if [ "$mine" -gt 0 ] && [ "$other" -eq 0 ]; then ok "$1 ($3: $mine packets, other device: 0)"
	else not_ok "$1 (rxe0 sent/rcvd, rxe1 sent/rcvd: ${d[*]})"; fi
}

# --- processes --------------------------------------------------------------
# maps_has PID PATTERN: PID has a file matching PATTERN mapped (the preload
# library really was loaded).
maps_has() { grep -q -- "$2" "/proc/$1/maps" 2>/dev/null; }

# wait_listen PORT [TRIES]: wait until some TCP socket listens on PORT
# (any address; works for listeners bound to $HOST_B or ::).
wait_listen() {
	local port=$1 tries=${2:-200} hex
	hex=$(printf ':%04X ' "$port")
	while [ "$tries" -gt 0 ]; do
		if awk -v p="$hex" '$4 == "0A" && index($2 " ", p) { f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null; then return 0; fi
		sleep 0.05
		tries=$((tries - 1))
	done
	return 1
}

# vm_port: a random TCP port in 20000-49999 that no TCP socket uses now.
# Shell builtins only: starting python costs ~0.7 s under TCG.  Parallel
# tests pick independently at random, so a collision is unlikely; the RDMA
# CM has its own port space.
vm_port() {
	local p hex f sl addr rest used
	while :; do
		p=$((20000 + SRANDOM % 30000))
		printf -v hex ':%04X' "$p"
		used=0
		for f in /proc/net/tcp /proc/net/tcp6; do
			[ -r "$f" ] || continue
			while read -r sl addr rest; do
				[ "${addr%"$hex"}" = "$addr" ] || used=1
			done <"$f"
		done
		[ $used = 1 ] || { echo "$p"; return 0; }
	done
}

# wait_cm_listen PORT [TRIES]: wait until an RDMA CM id listens on PORT
# (rping/rstream servers, librspreload listeners: invisible to /proc/net/tcp).
wait_cm_listen() {
	local port=$1 tries=${2:-100}
	while [ "$tries" -gt 0 ]; do
		if rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [^ ]*:$port "; then
			return 0
		fi
		sleep 0.1
		tries=$((tries - 1))
	done
	return 1
}

# wait_path OP PATH [TRIES]: wait until test OP PATH holds, every 50 ms.
wait_path() {
	local tries=${3:-200}
	while [ "$tries" -gt 0 ]; do
		[ "$1" "$2" ] && return 0
		sleep 0.05
		tries=$((tries - 1))
	done
	return 1
}

# wait_file PATH [TRIES]: wait until PATH exists (xfer server -r READYFILE).
wait_file() { wait_path -e "$@"; }

# wait_filled PATH [TRIES]: until PATH has something in it (a line that a
# program writes when it is ready, or its result).
wait_filled() { wait_path -s "$@"; }

# The echo pair of tests/vm/xfer.c (built by make check).
XFER=${XFER:-$abs_top_builddir/tests/vm/xfer}

# xfer_pair LABEL WRAP SERVER_ADDR CLIENT_BIND [BYTES]: run "xfer server" on
# SERVER_ADDR and "xfer client" bound to CLIENT_BIND ("" = unbound), both
# under WRAP (a command prefix: "", preload, rspreload).  Output in
# $tmpdir/LABEL.{server,client}; returns 0 when both exited 0 and the client
# saw every byte intact.
xfer_pair() {
	local label=$1 wrap=$2 saddr=$3 bind=$4 bytes=${5:-1048576}
	local port spid rc=0 out=$tmpdir/$label
	port=$(vm_port)
	rm -f "$out.ready"
	$wrap "$XFER" server -b "$saddr" -p "$port" -r "$out.ready" >"$out.server" 2>&1 &
	spid=$!
	if ! wait_file "$out.ready"; then
		echo "xfer_pair $label: server did not start" >&2
		kill $spid 2>/dev/null
		return 1
	fi
	$wrap "$XFER" client -c "$saddr" ${bind:+-b "$bind"} -p "$port" -n "$bytes" >"$out.client" 2>&1 || rc=1
	reap $spid || rc=1
	sed "s/^/  $label: /" "$out.server" "$out.client" >&2
	[ $rc = 0 ] && grep -q "echoed intact" "$out.client"
}

# xfer_preloaded LABEL: which preload libraries both ends reported.
xfer_preloaded() {
	sed -n 's/^\(server\|client\) preloaded: //p' "$tmpdir/$1.server" "$tmpdir/$1.client" | sort -u | tr '\n' ' '
}

# hang_report PID: where PID and the processes below it (two levels: a
# timeout or env in between) are stuck, printed before a test kills them:
# each thread's kernel wait channel and system call (number, first args),
# the library's own view of their connections (rsockx-stat), and their TCP
# sockets' queues.  A hang in CI is then diagnosable from the log alone.
hang_report() {
	local p t kids stat=$abs_top_builddir/tools/rsockx-stat
	kids=$(pgrep -P "$1" 2>/dev/null)
	for p in $1 $kids $(for t in $kids; do pgrep -P "$t"; done); do
		[ -r "/proc/$p/cmdline" ] || continue
		echo "hang: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-120)"
		for t in /proc/$p/task/*; do
			echo "hang:   task ${t##*/}: $(cat "$t/wchan" 2>/dev/null)" \
				"syscall $(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null)"
		done
		[ -x "$stat" ] && "$stat" -C -d -p "$p" 2>&1 | sed 's/^/hang:   /'
		ss -tnpi 2>/dev/null | grep -A1 "pid=$p," | sed 's/^/hang:   /'
	done
}

# bounded SECONDS CMD...: CMD under timeout(1), with a hang_report a few
# seconds before timeout kills it.
bounded() {
	local secs=$1 p w rc=0
	shift
	timeout "$secs" "$@" &
	p=$!
	(
		local n=$((secs > 10 ? secs - 3 : secs)) sp
		trap 'kill $sp 2>/dev/null; exit 0' TERM
		sleep "$n" &
		sp=$!
		wait "$sp"
		echo "bounded: still running after $n s: $*"
		hang_report "$p"
	) >&2 &
	w=$!
	wait "$p" || rc=$?
	kill "$w" 2>/dev/null
	wait "$w" 2>/dev/null
	return "$rc"
}

# reap PID [SECONDS]: wait for a background server to finish, at most
# SECONDS (default 10; a client that failed leaves its server waiting
# forever): then kill it and fail.  Returns the server's exit status.
reap() {
	local pid=$1 i n=$((${2:-10} * 10))
	for ((i = 0; i < n; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "reap: $pid still running after ${2:-10}s, killed" >&2
		hang_report "$pid" >&2
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid"
}

# --- raw verbs and RDMA CM pairs (self-check and loopback tests) -------------
# pingpong_pair LABEL CLIENT_DEV: ibv_rc_pingpong, server on B ($DEV_B),
# client on CLIENT_DEV, 100 iterations; output kept in $tmpdir/LABEL.*.
pingpong_pair() {
	local label=$1 cdev=$2 port spid rc try
	# A port taken meanwhile (CI: "Couldn't listen to port") is the test
	# bed's luck, not the device's: another port, up to three times.
	for try in 1 2 3; do
		rc=0
		port=$(vm_port)
		ibv_rc_pingpong -d $DEV_B -g $GID_INDEX -p "$port" -n 100 >"$tmpdir/$label.server" 2>&1 &
		spid=$!
		wait_listen "$port"
		ibv_rc_pingpong -d "$cdev" -g $GID_INDEX -p "$port" -n 100 "$HOST_B" \
			>"$tmpdir/$label.client" 2>&1 || rc=1
		reap $spid || rc=1
		grep -q "Couldn't listen" "$tmpdir/$label.server" || break
	done
	sed "s/^/  $label: /" "$tmpdir/$label.server" "$tmpdir/$label.client" >&2
	[ $rc = 0 ] && grep -q '100 iters' "$tmpdir/$label.server" &&
		grep -q '100 iters' "$tmpdir/$label.client"
}

# rping_pair LABEL SADDR BIND COUNT: rping server on SADDR, client bound to
# BIND (none if empty), COUNT verified ping-pongs.  rping's CM thread may
# read its event channel after the main thread destroyed it at the end
# ("rdma_get_cm_event: Bad file descriptor", exit 255, seen once in CI
# after every ping had passed): a race of the tool, tried again up to
# twice; anything else fails at once.
rping_pair() {
	local label=$1 saddr=$2 bind=$3 count=$4 port spid rc try
	for try in 1 2 3; do
		rc=0
		port=$(vm_port)
		rping -s -a "$saddr" -p "$port" -C "$count" \
			>"$tmpdir/$label.server" 2>&1 &
		spid=$!
		wait_cm_listen "$port"
		rping -c -a "$saddr" ${bind:+-I "$bind"} -p "$port" \
			-C "$count" -V >"$tmpdir/$label.client" 2>&1 || rc=1
		reap $spid || rc=1
		sed "s/^/  $label: /" "$tmpdir/$label.server" \
			"$tmpdir/$label.client" >&2
		[ $rc = 0 ] && return 0
		cat "$tmpdir/$label.server" "$tmpdir/$label.client" |
			grep -q 'rdma_get_cm_event: Bad file descriptor' ||
			return 1
		echo "  $label: rping's own exit race, once more" >&2
	done
	return 1
}
