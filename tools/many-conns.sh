#!/bin/bash
# Benchmark (issue 7), not a test: how many upgraded connections one client
# process on host A holds at once to one epoll server process on host B in
# the Soft-RoCE VM, what each costs, how long the setup takes, and where it
# stops.  Run from the build tree (make check-many does):
#
#   tools/many-conns.sh [N [SETUP_SECONDS [RING]]]
#
# N connections (default 10000) are opened one after the other (connect,
# one byte echoed: the whole negotiation) by tests/vm/rsx-load, for at most
# SETUP_SECONDS (default 600) or until one fails; all of them are then held
# open, one ping-pong each is checked on all at once, then all are closed.
# RING is RSOCKX_RING_SIZE (default 16k).  Prints the device limits, the
# progress, both processes' memory, descriptors, QPs and MRs after the first
# connection and with all open, and a summary line "many-conns: ...".
# RSOCKX_VM_MEM sizes the guest (default here 12G: with 16 KiB rings each
# connection costs about 0.5 MiB on each side, mostly the verbs queues).
# The server runs with the descriptor limit librsockx(7) tells users to
# set, 4 per connection plus 1024 (RSOCKX_MANY_SRV_NOFILE overrides it).
set -uo pipefail

if [ "${RSOCKX_IN_VM:-}" != 1 ]; then
	here=$(cd "$(dirname "$0")" && pwd)
	export RSOCKX_MANY_N=${1:-10000} RSOCKX_MANY_SETUP=${2:-600}
	export RSOCKX_MANY_RING=${3:-16k}
	export RSOCKX_VM_MEM=${RSOCKX_VM_MEM:-12G}
	exec "$here/../tests/vm/run.sh" --timeout $((RSOCKX_MANY_SETUP + 900)) \
		"$here/many-conns.sh"
fi

# --- in the guest -------------------------------------------------------------
. "$abs_top_srcdir/tests/vm/lib.sh"
N=$RSOCKX_MANY_N SETUP=$RSOCKX_MANY_SETUP RING=$RSOCKX_MANY_RING
LOAD=$abs_top_builddir/tests/vm/rsx-load
STAT=$abs_top_builddir/tools/rsockx-stat
[ -x "$LOAD" ] || { echo "many-conns: $LOAD not built (make check builds it)"; exit 2; }
dir=$(mktemp -d /tmp/many.XXXXXX)

# Each upgraded connection holds a few descriptors and maps on each side.
ulimit -Hn 1048576 && ulimit -n 1048576
echo 1048576 >/proc/sys/vm/max_map_count
echo "# guest: $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) " MiB" }' /proc/meminfo)," \
	"fd limit $(ulimit -n), max_map_count $(cat /proc/sys/vm/max_map_count)"
echo "# $DEV_A limits: $(ibv_devinfo -v -d "$DEV_A" 2>/dev/null |
	awk '$1 ~ /^max_(qp|qp_wr|cq|cqe|mr|pd|mr_size):$/ { printf "%s %s ", $1, $2 }')"

printf 'rdma connect * *\n' >"$dir/rdma.conf"
lib() { # STATS CONF CMD...
	local st=$1 conf=$2
	shift 2
	exec env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$st" \
		RSOCKX_CONF="$conf" RSOCKX_RING_SIZE="$RING" "$@"
}
kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
fds() { local f=(/proc/"$1"/fd/*); echo ${#f[@]}; }
res() { rdma resource show "$1" 2>/dev/null | grep -c "^\(link\|dev\) $2[/ ]"; }
avail() { awk '/MemAvailable/ { print $2 }' /proc/meminfo; }
live() { "$STAT" -p "$1" -a 2>/dev/null | awk -v k="$2" '$1 == k { print $2 }'; }
snap() { # LABEL: one line per process, one for the devices and the guest
	local p
	for p in $cpid $spid; do
		echo "$1 pid=$p rss_kb=$(kib $p VmRSS) pinned_kb=$(kib $p VmPin) fds=$(fds $p)" \
			"upgraded=$(live $p upgraded)"
	done
	echo "$1 qp_a=$(res qp $DEV_A) qp_b=$(res qp $DEV_B) mr_a=$(res mr $DEV_A)" \
		"mr_b=$(res mr $DEV_B) cq_a=$(res cq $DEV_A) cq_b=$(res cq $DEV_B) avail_kb=$(avail)"
}
get() { sed -n "s/^$1 .*$2=\([0-9]*\).*/\1/p" "$dir/snaps" | sed -n "${3:-1}p"; }
point() { # NAME: wait until the client reaches NAME (or dies)
	local i
	for ((i = 0; i < 36000; i++)); do
		[ -e "$dir/$1" ] && return 0
		kill -0 $job 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

port=$(vm_port)
avail0=$(avail)
srv_nofile=${RSOCKX_MANY_SRV_NOFILE:-$((4 * N + 1024))}
echo "# server fd limit $srv_nofile"
(ulimit -n "$srv_nofile" && lib "$dir/sstats" "" "$LOAD" server -l $HOST_B -p "$port" -r "$dir/ready" \
	>"$dir/server" 2>&1) &
wait_file "$dir/ready" 400 || { echo "many-conns: server did not start"; exit 2; }
read -r spid <"$dir/ready"
t0=$EPOCHSECONDS
(lib "$dir/cstats" "$dir/rdma.conf" "$LOAD" hold -c $HOST_B -b $HOST_A -p "$port" \
	-n "$N" -S "$SETUP" -P 1 -M 64 -e 1000000000 -d "$dir" -T $((SETUP + 800)) \
	2>&1 | tee "$dir/client" | sed -u 's/^/# client: /') &
job=$!
: >"$dir/snaps"
if point one; then
	cpid=$(cat "$dir/one")
	snap one >>"$dir/snaps"
	touch "$dir/one.go"
fi
if point setup; then
	tsetup=$((EPOCHSECONDS - t0))
	snap all >>"$dir/snaps"
	touch "$dir/setup.go"
fi
if point done; then
	snap done >>"$dir/snaps"
	t1=$EPOCHSECONDS
	touch "$dir/done.go"
fi
wait $job
tclose=$((EPOCHSECONDS - ${t1:-$EPOCHSECONDS}))
kill -TERM $spid 2>/dev/null
sleep 1
sed 's/^/# /' "$dir/snaps"
sed 's/^/# server: /' "$dir/server"
held=$(sed -n 's/^setup: \([0-9]*\) connections in.*/\1/p' "$dir/client")
stop=$(grep -E '^setup: (stopped|connection failed|first byte|no connection)' "$dir/client" | head -n1)
per() { # FIELD: per connection beyond the first, both sides (KiB)
	local a b c d n=$((${held:-1} - 1))
	[ "$n" -gt 0 ] || { echo "?"; return; }
	a=$(get one "$1" 1) b=$(get all "$1" 1) c=$(get one "$1" 2) d=$(get all "$1" 2)
	echo "client $(((b - a) / n)) server $(((d - c) / n))"
}
n1=$((${held:-1} - 1)); [ $n1 -gt 0 ] || n1=1
echo "many-conns: $N asked, ${held:-0} held upgraded (client $(get all upgraded 1), server $(get all upgraded 2))," \
	"ring $RING; setup $(grep -o 'in [0-9.]* s;.*' "$dir/client" | head -n1)"
echo "many-conns: per connection: RSS KiB $(per rss_kb); pinned KiB $(per pinned_kb);" \
	"fds $(per fds); guest memory $(( ($(get one avail_kb) - $(get all avail_kb)) / n1 )) KiB;" \
	"QPs rxe0 $(( ($(get all qp_a) - $(get one qp_a)) / n1 )) rxe1 $(( ($(get all qp_b) - $(get one qp_b)) / n1 ))," \
	"MRs rxe0 $(( ($(get all mr_a) - $(get one mr_a)) / n1 )) rxe1 $(( ($(get all mr_b) - $(get one mr_b)) / n1 ))," \
	"CQs rxe0 $(( ($(get all cq_a) - $(get one cq_a)) / n1 )) rxe1 $(( ($(get all cq_b) - $(get one cq_b)) / n1 ))"
oom=$(dmesg | grep -o 'Out of memory: Killed process [0-9]* ([^)]*)' | tail -n1)
echo "many-conns: setup ${tsetup:-?} s wall, close ${tclose} s; stop: ${stop:-none, all $N opened};" \
	"client $(grep '^rsx-load:' "$dir/client")${oom:+; guest kernel: $oom}"
grep -q '^rsx-load: ok' "$dir/client"
