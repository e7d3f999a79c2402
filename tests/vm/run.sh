#!/bin/bash
# Boot the Soft-RoCE test VM once and run one script in it.
#
#   tests/vm/run.sh [--timeout S] [--keep|--rundir DIR] SCRIPT [ARGS...]
#   tests/vm/run.sh --shell [SCRIPT [ARGS...]]
#
# Run from the build tree (or set abs_top_builddir).  The guest sees the host's
# /usr read-only and the source and build trees read-only at the same absolute
# paths, so $RSOCKX_LIB works unchanged inside; /tmp in the guest is a tmpfs.
# Before SCRIPT runs, the two hosts A (192.168.77.1, fd77::1, rxe0) and
# B (192.168.77.2, fd77::2, rxe1) are up (tests/vm/guest.sh).
#
# Prints the script's output (stdout and stderr) and exits with its status.
# A VM that does not finish within the timeout (default 600 s) is killed:
# exit 124 and a message on stderr.  Exit 125: the VM died without a result
# (kernel panic, setup failure; the console log is shown).  Exit 77: the VM
# cannot be prepared on this machine (see prepare.sh).
# --shell: interactive shell in the guest on this terminal (after SCRIPT, if
# given); exit the shell or press Ctrl-A X to stop the VM.  No timeout.
# Environment: RSOCKX_* and PYTHON, abs_top_srcdir, abs_top_builddir,
# ASAN_OPTIONS and UBSAN_OPTIONS are passed to the guest; RSOCKX_VM_SMP (2),
# RSOCKX_VM_MEM (2G) size the VM, RSOCKX_VM_CPU (max) is qemu's -cpu (e.g.
# max,erms=off: the emulation runs `rep movsb`, which the guest's kernel
# and glibc use for copies when the CPU has ERMS, at a seventh of the speed
# of vector moves).
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }

timeout=${RSOCKX_VM_RUN_TIMEOUT:-600}
shell=0 keep=0 rundir=
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) timeout=$2; shift 2 ;;
	--timeout=*) timeout=${1#*=}; shift ;;
	--shell) shell=1; shift ;;
	--keep) keep=1; shift ;;
	--rundir) rundir=$2; keep=1; shift 2 ;;
	-h|--help) usage ;;
	--) shift; break ;;
	-*) echo "run.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || [ $shell = 1 ] || usage

die() { echo "run.sh: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
# The build tree: from make check's environment, else the nearest directory
# above the current one that was configured (has config.status).
if [ -z "${abs_top_builddir:-}" ]; then
	d=$PWD
	while [ "$d" != / ] && [ ! -f "$d/config.status" ]; do d=$(dirname "$d"); done
	[ -f "$d/config.status" ] || d=$srcdir
	[ -f "$d/config.status" ] || die "run me from the (configured) build tree, or set abs_top_builddir"
	abs_top_builddir=$d
fi
export abs_top_builddir abs_top_srcdir=${abs_top_srcdir:-$srcdir}
export RSOCKX_LIB=${RSOCKX_LIB:-$abs_top_builddir/.libs/librsockx.so}
export RSOCKX_PRELOAD=${RSOCKX_PRELOAD:-$RSOCKX_LIB}
export PYTHON=${PYTHON:-/usr/bin/python3}

qemu=${QEMU:-qemu-system-x86_64}
command -v "$qemu" >/dev/null || { echo "run.sh: CANNOT RUN THE VM: $qemu not found (apt-get install qemu-system-x86)" >&2; exit 77; }
cache=$("$here/prepare.sh") || exit $?

# --- the run directory: the guest's only writable share ----------------------
if [ -n "$rundir" ]; then
	# Reused between runs; never wipe a directory that is not one of ours.
	if [ -d "$rundir" ] && [ -n "$(ls -A "$rundir")" ] && [ ! -f "$rundir/boot.sh" ]; then
		die "--rundir $rundir exists and is not a run directory"
	fi
	rm -rf "$rundir"
	mkdir -p "$rundir"
else
	mkdir -p "$abs_top_builddir/tests/vm"
	rundir=$(mktemp -d "$abs_top_builddir/tests/vm/run.XXXXXX")
fi
rundir=$(cd "$rundir" && pwd)
qpid=
cleanup() {
	[ -z "$qpid" ] || kill "$qpid" 2>/dev/null || true
	[ $keep = 1 ] || rm -rf "$rundir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# SCRIPT: a file (copied into the run directory unless the guest sees it at
# the same path) or a program on the guest's PATH (bash, ibv_devinfo, ...).
if [ $# -gt 0 ]; then
	script=$1; shift
	if [ -f "$script" ]; then
		script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
		gpath=$script
		case $script in
		"$abs_top_srcdir"/*|"$abs_top_builddir"/*|/usr/*) ;;
		*) mkdir -p "$rundir/script"
			cp "$script" "$rundir/script/"
			gpath=/vmrun/script/$(basename "$script") ;;
		esac
		# Not executable: bash, never busybox sh (its applets would shadow
		# the real ip/nc).
		if [ -x "$script" ]; then set -- "$gpath" "$@"
		else set -- /usr/bin/bash "$gpath" "$@"; fi
	else
		set -- "$script" "$@"
	fi
fi

# Guest /etc: the few host files programs need, never secrets.
mkdir -p "$rundir/etc"
for f in alternatives ld.so.cache ld.so.conf ld.so.conf.d libibverbs.d rdma \
	passwd group nsswitch.conf services protocols host.conf gai.conf iproute2; do
	[ ! -e "/etc/$f" ] || cp -a "/etc/$f" "$rundir/etc/" 2>/dev/null || true
done
cat >"$rundir/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
192.168.77.1	hosta
192.168.77.2	hostb
fd77::1	hosta6
fd77::2	hostb6
EOF
echo rsockx-vm >"$rundir/etc/hostname"
# One file: far fewer 9p round trips than copying the tree in the guest.
tar -cf "$rundir/etc.tar" -C "$rundir/etc" . && rm -rf "$rundir/etc"

# Environment for the guest (bash syntax; read by guest.sh).
{
	for v in $(compgen -e); do
		case $v in
		RSOCKX_*|abs_top_srcdir|abs_top_builddir|PYTHON|TERM|ASAN_OPTIONS|UBSAN_OPTIONS) printf 'export %s=%q\n' "$v" "${!v}" ;;
		esac
	done
	printf 'VM_MODE=%s\n' "$([ $shell = 1 ] && echo shell || echo run)"
	printf 'VM_CWD=%q\n' "$PWD"
	printf 'VM_ARGS=('; [ $# = 0 ] || printf ' %q' "$@"; printf ' )\n'
	if [ $shell = 1 ] && [ -t 0 ]; then
		read -r rows cols < <(stty size 2>/dev/null || echo "24 80")
		printf 'VM_ROWS=%s VM_COLS=%s\n' "$rows" "$cols"
	fi
} >"$rundir/env"

# boot.sh is sourced by the initramfs' busybox sh: mount the trees (parents
# first, read-only) and start guest.sh.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
shares=()
{
	echo 'tar -xf /vmrun/etc.tar -C /etc'
	echo 'hostname rsockx-vm'
	n=0
	for dir in $(printf '%s\n' "$abs_top_srcdir" "$abs_top_builddir" | awk '!seen[$0]++ { print length($0), $0 }' | sort -n | cut -d' ' -f2-); do
		n=$((n + 1))
		shares+=(-virtfs "local,path=$dir,mount_tag=tree$n,security_model=none,readonly=on,multidevs=remap")
		echo "mkdir -p $(q "$dir") && mount -t 9p -o \$opts,ro tree$n $(q "$dir") || echo 'boot: cannot mount $n'"
	done
	echo "/usr/bin/bash $(q "$abs_top_srcdir/tests/vm/guest.sh")"
} >"$rundir/boot.sh"

# prepare.sh leaves an uncompressed PVH kernel when it can (faster boot).
kernel=$cache/vmlinuz
[ "${RSOCKX_VM_PVH:-1}" = 0 ] || [ ! -f "$cache/vmlinux" ] || kernel=$cache/vmlinux
: >"$rundir/out"
args=(
	-nodefaults -no-user-config -no-reboot
	-accel tcg,thread=multi -cpu "${RSOCKX_VM_CPU:-max}"
	-smp "${RSOCKX_VM_SMP:-2}" -m "${RSOCKX_VM_MEM:-2G}"
	-kernel "$kernel" -initrd "$cache/initrd.cpio"
	-append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off"
	-virtfs "local,path=/usr,mount_tag=usr,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$rundir,mount_tag=vmrun,security_model=none,multidevs=remap"
	"${shares[@]}"
	-display none
)

if [ $shell = 1 ]; then
	"$qemu" "${args[@]}" -serial mon:stdio || true
else
	timeout -k 5 "$timeout" "$qemu" "${args[@]}" -monitor none \
		-serial "file:$rundir/console.log" </dev/null &
	qpid=$!
	# Stream the script's output while it runs; tail ends when qemu has gone.
	tail -n +1 -s 0.2 --pid=$qpid -f "$rundir/out" &
	tpid=$!
	rc=0
	wait $qpid || rc=$?
	qpid=
	wait $tpid || true
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		echo "run.sh: VM TIMED OUT after ${timeout}s and was killed (a hang counts as failure). Console log:" >&2
		tail -n 30 "$rundir/console.log" >&2 || true
		exit 124
	fi
fi
if [ ! -s "$rundir/status" ]; then
	echo "run.sh: the VM stopped without a result (panic or setup failure). Console log:" >&2
	tail -n 40 "$rundir/console.log" >&2 2>/dev/null || true
	[ ! -s "$rundir/setup.log" ] || tail -n 40 "$rundir/setup.log" >&2
	exit 125
fi
exit "$(cat "$rundir/status")"
