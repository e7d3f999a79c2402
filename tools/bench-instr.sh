#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-instr.sh: what a 64-byte ping-pong round trip costs in user-space
# instructions, counted by callgrind, for plain TCP, rsockx and rdma-core's
# librspreload between hosts A and B of the Soft-RoCE VM.  Not a test: it
# prints numbers.  Wall-clock numbers in that VM move by a third between
# runs (rsockx-ab); instruction counts do not.
#
#   tools/bench-instr.sh [--local] [--n1 N] [--n2 N] [--columns LIST] [--annotate] [--quick]
#
# Each column runs tests/stream/rsx-stream's ping-pong (-P) twice, N1 and
# N2 round trips, server and client both under callgrind, and reports per
# end (I(N2) - I(N1)) / (N2 - N1).  Only what runs inside rsx-stream's
# read_all() and write_all() is counted (the program's clock reads and its
# sort of the latencies are not), and the difference cancels the first
# round trips, which carry the negotiation and go over TCP.  What is
# counted is user space only: plain TCP's
# whole stack and rxe's (the software NIC: every post is a system call
# there) run in the kernel and do not show.  So the rsockx and librspreload
# columns compare like with like; the plain TCP column shows what the
# program and libc do around the system calls.
# The ends wait by spinning (RSOCKX_SPIN_US, rsocket's polling time):
# under callgrind a poll takes about 50 times as long as natively, so the
# polls of a wait are fewer than natively and vary a little from run to
# run.  The "rsockx, no spin" column (RSOCKX_SPIN_US=0) has none: every
# wait arms the CQ and sleeps, the same work every time.
# --columns: some of tcp rsockx nospin rspreload (default all four).
# --local: on this machine, over loopback, no VM: plain TCP, rsockx over
# shared memory (RSOCKX_LOCAL=1; "shm" and "shm, no spin"), and a Unix
# domain socket (rsx-stream -U), the kernel's own best local path.  The
# kernel's share (TCP's and Unix sockets' stacks, eventfd wake-ups) is
# not counted there either; the shared-memory columns make no system
# call while they spin.
# --columns with --local: some of tcp shm nospin unix (default all four).
# --quick: 100 and 300 round trips.
# --annotate also prints where the client's instructions go in the "rsockx,
# no spin" column, per round trip and function (self cost, N2 run minus N1
# run).
#
# Run from the build tree (make bench-instr); boots the test VM
# (tests/vm/run.sh) and runs itself inside.
set -uo pipefail

usage() { sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"; exit "${1:-2}"; }

n1=1000 n2=5000 annotate=0 local=0
unset cols
while [ $# -gt 0 ]; do
	case $1 in
	--local) local=1; shift ;;
	--n1) n1=$2; shift 2 ;;
	--n2) n2=$2; shift 2 ;;
	--columns) cols=$2; shift 2 ;;
	--annotate) annotate=1; shift ;;
	--quick) n1=100 n2=300; shift ;;
	-h|--help) usage 0 ;;
	*) echo "bench-instr: unknown argument $1" >&2; usage ;;
	esac
done
case "$n1$n2" in *[!0-9]*|'') echo "bench-instr: --n1 and --n2 take numbers" >&2; exit 2 ;; esac
[ "$n1" -ge 1 ] && [ "$n2" -gt "$n1" ] ||
	{ echo "bench-instr: want 1 <= N1 < N2 (got $n1, $n2)" >&2; exit 2; }
if [ $local = 1 ]; then
	known="tcp shm nospin unix"
else
	known="tcp rsockx nospin rspreload"
fi
cols=${cols-$known}
for c in $cols; do
	[[ " $known " == *" $c "* ]] ||
		{ echo "bench-instr: unknown column $c ($known)" >&2; exit 2; }
done
[ -n "$cols" ] || { echo "bench-instr: --columns is empty" >&2; exit 2; }

if [ $local = 0 ] && [ "${RSOCKX_IN_VM:-}" != 1 ]; then
	here=$(cd "$(dirname "$0")" && pwd)
	args=(--n1 "$n1" --n2 "$n2" --columns "$cols")
	[ $annotate = 1 ] && args+=(--annotate)
	exec "$here/../tests/vm/run.sh" --timeout $((900 + (n2 + n1) / 10)) \
		"$here/bench-instr.sh" "${args[@]}"
fi

if [ $local = 1 ]; then
	# --- on this machine: loopback, no device ----------------------------------
	: "${abs_top_builddir:?run from the build tree (make bench-instr-local)}"
	: "${RSOCKX_PRELOAD:=${RSOCKX_LIB:-$abs_top_builddir/.libs/librsockx.so}}"
	HOST_A=127.0.0.1 HOST_B=127.0.0.1 RSPRELOAD=
	vm_port() {
		python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
	}
	rxe_snap() { :; }
	rxe_total() { echo 0; }
	export RSOCKX_LOCAL=1
else
	# --- in the guest -----------------------------------------------------------
	. "$abs_top_srcdir/tests/vm/lib.sh"
fi
STREAM=$abs_top_builddir/tests/stream/rsx-stream
[ -x "$STREAM" ] || { echo "bench-instr: $STREAM not built (make builds it)"; exit 2; }
command -v valgrind >/dev/null ||
	{ echo "bench-instr: valgrind not installed (Debian package valgrind)"; exit 2; }
dir=$(mktemp -d /tmp/instr.XXXXXX)
printf 'rdma connect * *\n' >"$dir/rdma.conf"

# cg OUT STATS PRELOAD SPIN CMD...: CMD under callgrind, with PRELOAD (may
# be empty).  env inside valgrind: the library is not loaded into
# valgrind's own launcher, and the stats file is the program's alone.
cg() {
	local out=$1 st=$2 pre=$3 spin=$4
	shift 4
	valgrind --tool=callgrind --trace-children=yes \
		--toggle-collect=read_all --toggle-collect=write_all \
		--callgrind-out-file="$out" \
		env ${pre:+LD_PRELOAD=$pre} ${st:+RSOCKX_STATS_FILE=$st} \
		RSOCKX_OOB_TIMEOUT_MS=60000 RSOCKX_PROBE_TIMEOUT_MS=60000 \
		${spin:+RSOCKX_SPIN_US=$spin} "$@"
}
total() { sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$1"; }
# said FILE: the end of what a program printed, without valgrind's lines
said() { grep -v '^==[0-9]*==' "$1" | tail -n 3 | tr '\n' ' '; }

# one COL N PRELOAD SPIN: one ping-pong of N round trips; prints
# "CLIENT_INSTR SERVER_INSTR PATH" or fails with what went wrong
one() {
	local col=$1 n=$2 pre=$3 spin=$4 port sp cp snap t i path conf= where swhere
	port=$(vm_port)
	rm -f "$dir/$col.$n".*
	[ $local = 0 ] && { [ "$col" = rsockx ] || [ "$col" = nospin ]; } &&
		conf=$dir/rdma.conf
	# where: the server's and the client's address words
	if [ "$col" = unix ]; then
		where=(-U "$dir/sock")
		swhere=("${where[@]}")
	else
		where=(-c $HOST_B -b $HOST_A -p "$port")
		swhere=(-l $HOST_B -p "$port")
	fi
	snap=$(rxe_snap)
	cg "$dir/$col.$n.scg" "${pre:+$dir/$col.$n.sst}" "$pre" "$spin" \
		"$STREAM" server "${swhere[@]}" -P "$n" >"$dir/$col.$n.sout" 2>&1 &
	sp=$!
	for ((i = 0; i < 600; i++)); do
		grep -q 'rsx-stream: listening' "$dir/$col.$n.sout" && break
		kill -0 $sp 2>/dev/null || break
		sleep 0.1
	done
	RSOCKX_CONF=$conf cg "$dir/$col.$n.ccg" "${pre:+$dir/$col.$n.cst}" "$pre" "$spin" \
		"$STREAM" client "${where[@]}" -P "$n" \
		>"$dir/$col.$n.cout" 2>&1 &
	cp=$!
	# the client within 300 s, then the server (it writes its profile)
	for ((i = 0; i < 3600; i++)); do
		kill -0 $cp 2>/dev/null || { kill -0 $sp 2>/dev/null || break; }
		[ $i = 3000 ] && kill $cp 2>/dev/null
		sleep 0.1
	done
	kill $cp $sp 2>/dev/null
	wait $cp || { echo "client failed: $(said "$dir/$col.$n.cout")"; return 1; }
	wait $sp || { echo "server failed: $(said "$dir/$col.$n.sout")"; return 1; }
	grep -q "rsx-stream: ok pingpong n=$n " "$dir/$col.$n.cout" ||
		{ echo "no ping-pong result: $(said "$dir/$col.$n.cout")"; return 1; }
	t=$(rxe_total "$snap")
	case $local$col in
	1shm|1nospin)
		# both ends on shared memory, the ping-pongs over its rings
		if grep -q '\bshm_upgrades=1\b' "$dir/$col.$n.cst" &&
			grep -q '\bshm_upgrades=1\b' "$dir/$col.$n.sst" &&
			! grep -q '\brdma_rx_bytes=[1-9]' "$dir/$col.$n.cst" "$dir/$col.$n.sst"; then
			path="shm ($(grep -o ' shm_rx_bytes=[0-9]*' "$dir/$col.$n.cst" |
				awk -F= '{ s += $2 } END { print s + 0 }') bytes to the client)"
		else
			echo "rsockx did not move onto shared memory: $(cat "$dir/$col.$n.cst" "$dir/$col.$n.sst" 2>/dev/null | tr '\n' ' ')"
			return 1
		fi ;;
	1unix)
		path="unix socket" ;;
	1tcp)
		path="tcp" ;;
	0rsockx|0nospin)
		# both ends' counters: upgraded, the bytes over the ring
		if grep -q '\bupgraded=1\b' "$dir/$col.$n.cst" &&
			grep -q '\bupgraded=1\b' "$dir/$col.$n.sst" && [ "$t" -gt 0 ]; then
			path="rdma ($t rxe packets)"
		else
			echo "rsockx did not upgrade: $(cat "$dir/$col.$n.cst" "$dir/$col.$n.sst" 2>/dev/null | tr '\n' ' ')"
			return 1
		fi ;;
	0rspreload)
		[ "$t" -gt 0 ] || { echo "librspreload moved no rxe packet"; return 1; }
		path="rsocket ($t rxe packets)" ;;
	0tcp)
		path="tcp ($t rxe packets)" ;;
	esac
	echo "$(total "$dir/$col.$n.ccg") $(total "$dir/$col.$n.scg") $path"
}

declare -A title=([tcp]="plain TCP" [rsockx]="rsockx" [nospin]="rsockx, no spin"
	[rspreload]="librspreload" [shm]="rsockx (shm)" [unix]="Unix socket")
if [ $local = 1 ]; then
	title[nospin]="rsockx (shm), no spin"
	echo "bench-instr: 64-byte ping-pong on loopback, this machine, rsx-stream -P;"
	echo "  callgrind instructions per round trip, user space only (the kernel's"
	echo "  share, the TCP and Unix socket stacks, is not counted), ($n2 - $n1 round trips)"
else
	echo "bench-instr: 64-byte ping-pong between hosts A and B (rxe), rsx-stream -P;"
	echo "  callgrind instructions per round trip, user space only (the kernel's"
	echo "  share, plain TCP's stack and rxe's, is not counted), ($n2 - $n1 round trips)"
fi
if [ ! -e "$RSPRELOAD" ] && [[ " $cols " == *" rspreload "* ]]; then
	cols=${cols/rspreload/}
	echo "  librspreload column left out: $RSPRELOAD not found (Debian package librdmacm1)"
fi
printf '%-18s %12s %12s  %s\n' column client server path
fail=0
for col in $cols; do
	pre= spin= r1= r2=
	case $col in
	rsockx|shm) pre=$RSOCKX_PRELOAD ;;
	nospin) pre=$RSOCKX_PRELOAD spin=0 ;;
	rspreload) pre=$RSPRELOAD ;;
	esac
	if r1=$(one $col "$n1" "$pre" "$spin") && r2=$(one $col "$n2" "$pre" "$spin"); then
		read -r c1 s1 _ <<<"$r1"
		read -r c2 s2 p2 <<<"$r2"
		printf '%-18s %12d %12d  %s\n' "${title[$col]}" \
			$(((c2 - c1) / (n2 - n1))) $(((s2 - s1) / (n2 - n1))) "$p2"
	else
		printf '%-18s FAILED: %s\n' "${title[$col]}" "${r2:-$r1}"
		fail=1
	fi
done

# self cost per round trip and function: N2 run minus N1 run
if [ $annotate = 1 ] && [[ " $cols " != *" nospin "* ]]; then
	echo "(--annotate: the breakdown is of the \"rsockx, no spin\" column, not run)"
elif [ $annotate = 1 ] && [ -s "$dir/nospin.$n2.ccg" ]; then
	echo
	echo "rsockx client, no spin: instructions per round trip by function (self, >= 5):"
	for n in "$n1" "$n2"; do
		callgrind_annotate --auto=no --threshold=100 "$dir/nospin.$n.ccg" 2>/dev/null |
			awk 'match($0, /^ *[0-9,]+ /) { c = substr($0, 1, RLENGTH)
				f = substr($0, RLENGTH + 1); gsub(/[ ,]/, "", c)
				sub(/^ *(\( *[0-9.]+%\) +)?/, "", f); print c "\t" f }' >"$dir/fn.$n"
	done
	awk -F'\t' -v d=$((n2 - n1)) 'NR == FNR { a[$2] = $1; next }
		$2 !~ /PROGRAM TOTALS/ { v = ($1 - a[$2]) / d; if (v >= 5) printf "%8.1f  %s\n", v, $2 }' \
		"$dir/fn.$n1" "$dir/fn.$n2" | sort -rn | head -n 30
fi
rm -rf "$dir"
exit $fail
