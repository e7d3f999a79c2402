#!/bin/bash
# Main program of the test VM (started by /init through run.sh's boot.sh).
# Sets up the two hosts A and B on one veth pair with an rxe device on each
# end, then runs the job run.sh asked for and leaves its exit status in
# /vmrun/status.  Output of the job goes to /vmrun/out (run.sh streams it).
set -uo pipefail

# This rewires routing: refuse to run anywhere but in the test VM, whose
# PID 1 is the initramfs' busybox.
if [ "$(readlink /proc/1/exe 2>/dev/null)" != /bb/busybox ] || [ ! -f /vmrun/env ]; then
	echo "guest.sh: not in the rsockx test VM; refusing to touch this machine" >&2
	exit 2
fi

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bb
export HOME=/root TMPDIR=/tmp RSOCKX_IN_VM=1
. /vmrun/env
here=$abs_top_srcdir/tests/vm
. "$here/lib.sh"

log=/vmrun/setup.log
fail_setup() {
	echo "guest.sh: TEST BED SETUP FAILED: $*" | tee -a /vmrun/out >&2
	echo "--- setup log:" >>/vmrun/out
	cat "$log" >>/vmrun/out
	echo 125 >/vmrun/status
	exit 0
}
sys() { echo "$2" >"/proc/sys/$1"; }

# Each program start costs ~0.1 s under TCG with /usr on 9p: batch the ip
# commands and use shell builtins where possible.
setup() {
	local d i sa sb
	ip link add "$NETDEV_A" type veth peer name "$NETDEV_B"
	for d in all default "$NETDEV_A" "$NETDEV_B"; do
		# Packets between two local addresses must be accepted on the veth.
		sys "net/ipv4/conf/$d/accept_local" 1
		sys "net/ipv4/conf/$d/rp_filter" 0
	done
	# MTU 9000 lets rxe use RoCE MTU 4096 (1500 would give 1024).
	# Policy routing: whatever leaves through a veth end (rxe sets the output
	# device) goes to the other end's address over the wire, not through lo;
	# the local table moves behind these rules.  Plain TCP still uses lo.
	# The routes of tables 10 and 11: vm_net_paths (lib.sh).
	ip -batch - <<-END
	link set lo up
	link set $NETDEV_A mtu 9000
	link set $NETDEV_B mtu 9000
	addr add $HOST_A/24 dev $NETDEV_A
	addr add $HOST_B/24 dev $NETDEV_B
	link set $NETDEV_A up
	link set $NETDEV_B up
	rule add pref 10 oif $NETDEV_A lookup 10
	rule add pref 11 oif $NETDEV_B lookup 11
	rule add pref 100 lookup local
	rule del pref 0 lookup local
	END
	vm_net_paths
	ip -6 -batch - <<-END
	rule add pref 10 oif $NETDEV_A lookup 10
	rule add pref 11 oif $NETDEV_B lookup 11
	rule add pref 100 lookup local
	rule del pref 0 lookup local
	END
	rdma -b - <<-END
	link add $DEV_A type rxe netdev $NETDEV_A
	link add $DEV_B type rxe netdev $NETDEV_B
	END
	# Both ports turn ACTIVE once both veth ends are up.
	for i in {1..100}; do
		read -r sa <"/sys/class/infiniband/$DEV_A/ports/1/state"
		read -r sb <"/sys/class/infiniband/$DEV_B/ports/1/state"
		[ "$sa" != "4: ACTIVE" ] || [ "$sb" != "4: ACTIVE" ] || break
		sleep 0.1
	done
	[ "$sa" = "4: ACTIVE" ] && [ "$sb" = "4: ACTIVE" ]
	# The tests pass -g $GID_INDEX: it must be the IPv4-mapped RoCE v2 GID.
	read -r sa <"/sys/class/infiniband/$DEV_A/ports/1/gids/$GID_INDEX"
	read -r sb <"/sys/class/infiniband/$DEV_B/ports/1/gids/$GID_INDEX"
	[ "$sa" = 0000:0000:0000:0000:0000:ffff:c0a8:4d01 ]
	[ "$sb" = 0000:0000:0000:0000:0000:ffff:c0a8:4d02 ]
}

# A subshell so that set -e really stops at the first failing step.
(
	PS4='+ ${EPOCHREALTIME:7:6} '
	set -ex
	read -r up _ </proc/uptime
	: "uptime $up"
	setup
	read -r up _ </proc/uptime
	: "uptime $up"
) >"$log" 2>&1
[ $? = 0 ] || fail_setup "network/rxe setup (see setup log)"

# Verbs programs pin memory.
ulimit -l unlimited
cd "${VM_CWD:-/}" 2>/dev/null || cd "$abs_top_builddir" || cd /

case ${VM_MODE:-run} in
shell)
	# A real tty for job control and Ctrl-C (the console cannot be one).
	tty=/dev/ttyS0
	stty -F $tty sane 2>/dev/null
	[ -z "${VM_ROWS:-}" ] || stty -F $tty rows "$VM_ROWS" cols "$VM_COLS" 2>/dev/null
	echo "rsockx test VM: A=$HOST_A/$HOST_A6 ($DEV_A) B=$HOST_B/$HOST_B6 ($DEV_B)." \
		"Helpers: . \$abs_top_srcdir/tests/lib.sh; . \$abs_top_srcdir/tests/vm/lib.sh." \
		"Exit the shell to power off (or Ctrl-A X)." >$tty
	if [ ${#VM_ARGS[@]} -gt 0 ]; then
		setsid -c -w "${VM_ARGS[@]}" <$tty >$tty 2>&1
		echo "exit status $?" >$tty
	fi
	PS1='rsockx-vm:\w# ' setsid -c -w /usr/bin/bash --norc -i <$tty >$tty 2>&1
	echo $? >/vmrun/status
	;;
run)
	"${VM_ARGS[@]}" </dev/null >>/vmrun/out 2>&1
	echo $? >/vmrun/status
	;;
esac
