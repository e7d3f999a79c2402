#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench-passthrough.sh: what librsockx adds to a call it passes through.
#
# Two measurements of tools/echo-bench (a loopback TCP echo whose data path
# is read()/write() only, every call counted), without and with
# LD_PRELOAD=$RSOCKX_LIB:
#
# 1. Instructions, counted by callgrind over the whole process (both echo
#    threads: one process, so --trace-children=no loses nothing).  Two run
#    lengths N1 < N2 make start-up (ld.so, our constructor, dlsym) cancel:
#      added per call = ((Ipre(N2) - Ipre(N1)) - (Iplain(N2) - Iplain(N1)))
#                       / (calls(N2) - calls(N1))
#    calls= is echo-bench's own count of read()+write(), each of which the
#    library intercepts once (tests/tools/echo-bench.test checks that).
#    Kernel time is not counted; the program's calls reach the wrapper
#    through the PLT like any call into libc, and the wrapper's call to the
#    real function is an indirect call instead of a direct one.
# 2. CPU time (user + sys of the round trips, from getrusage) of the same
#    echo run natively, in alternating pairs, as the median of the per-pair
#    ratios: alternating cancels drift (other load, frequency), the median
#    drops outliers.  By default both ends run in one thread (echo-bench -1):
#    the same calls, without the scheduler's wake-ups, whose noise is far
#    larger than what is measured.  The spread (quartiles of the pair
#    ratios) is printed too: a ratio is only as good as its spread.
#
# Not a test: it prints numbers and compares them with the goals, it does not
# fail on them.  `make bench` runs it with the build's library.

set -eu

usage() {
	cat <<EOF
Usage: $0 [OPTION]...
Measure the cost of librsockx's pass-through path with tools/echo-bench.

  --n1 N          short callgrind run, round trips (default $n1)
  --n2 N          long callgrind run, round trips (default $n2)
  --cpu-n N       round trips per CPU-time run (default $cpu_n)
  --runs R        CPU-time pairs, plain and preloaded (default $runs)
  --size S        bytes per message (default $size)
  --mode M        echo-bench mode for both parts: thread (server thread),
                  fork (server process), single (both ends in one thread);
                  default thread for callgrind, single for CPU time
  --pin CPU       run the CPU-time runs on one CPU (taskset)
  --annotate      also show where the library's instructions go
                  (callgrind_annotate of the librsockx functions)
  --no-callgrind  skip the instruction counts
  --no-cpu        skip the CPU-time runs
  --quick         tiny runs, to check that the benchmark works
  -h, --help      show this help

Environment: RSOCKX_LIB (the library, required), ECHO_BENCH (the echo
program; default tools/echo-bench beside this script's build tree).
EOF
}

n1=10000
n2=50000
cpu_n=50000
runs=21
size=64
cg_mode=thread
cpu_mode=single
pin=
annotate=0
do_cg=1
do_cpu=1
goal_instr=25
goal_ratio=1.02

while [ $# -gt 0 ]; do
	case $1 in
	--n1) n1=$2; shift ;;
	--n2) n2=$2; shift ;;
	--cpu-n) cpu_n=$2; shift ;;
	--runs) runs=$2; shift ;;
	--size) size=$2; shift ;;
	--mode)
		case $2 in
		thread|fork|single) cg_mode=$2; cpu_mode=$2 ;;
		*) echo "$0: --mode: thread, fork or single" >&2; exit 2 ;;
		esac
		shift ;;
	--pin) pin=$2; shift ;;
	--annotate) annotate=1 ;;
	--no-callgrind) do_cg=0 ;;
	--no-cpu) do_cpu=0 ;;
	--quick) n1=200; n2=1000; cpu_n=2000; runs=3 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "$0: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[ "$n1" -lt "$n2" ] || { echo "$0: --n1 must be below --n2" >&2; exit 2; }

: "${RSOCKX_LIB:?set RSOCKX_LIB to the library (make bench does)}"
ECHO_BENCH=${ECHO_BENCH:-tools/echo-bench}
[ -f "$RSOCKX_LIB" ] || { echo "$0: no library at $RSOCKX_LIB" >&2; exit 1; }
[ -x "$ECHO_BENCH" ] || { echo "$0: no echo-bench at $ECHO_BENCH" >&2; exit 1; }
# A sanitizer build measures the sanitizer, and does not run under valgrind.
if ldd "$RSOCKX_LIB" 2>/dev/null | grep -q 'lib[a-z]*san\.so'; then
	echo "$0: $RSOCKX_LIB is a sanitizer build: configure without --enable-asan/--enable-ubsan" >&2
	exit 1
fi

# The library's default behaviour is what is measured: no log, no rules from
# the caller's environment, no statistics file.
unset RSOCKX_LOG RSOCKX_LOG_FILE RSOCKX_CONF RSOCKX_RULES RSOCKX_DEFAULT \
	RSOCKX_DISABLE RSOCKX_STATS_FILE LD_PRELOAD

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsockx-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# field NAME LINE: the value of NAME=value in echo-bench's output line.
field() {
	echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# mode_flag MODE: echo-bench's option for a --mode.
mode_flag() {
	case $1 in
	thread) echo ;;
	fork) echo -f ;;
	single) echo -1 ;;
	esac
}

# echo_run plain|pre MODE N [PREFIX...]: one echo-bench run, its output line
# on stdout.
echo_run() {
	er_pre=$1 er_flag=$(mode_flag "$2") er_n=$3
	shift 3
	if [ "$er_pre" = pre ]; then
		LD_PRELOAD=$RSOCKX_LIB "$@" "$ECHO_BENCH" $er_flag -n "$er_n" -s "$size"
	else
		"$@" "$ECHO_BENCH" $er_flag -n "$er_n" -s "$size"
	fi
}

# cg_total MODE N: instructions of all processes of that callgrind run (one
# output file per process: the forked server of --mode fork has its own).
cg_total() {
	cat "$tmp/cg.$1.$2".* | awk '/^summary:/ { s += $2 } END { printf "%d\n", s }'
}

echo "rsockx pass-through cost: echo-bench, $size-byte messages over loopback TCP"
echo "library: $RSOCKX_LIB"

if [ $do_cg -eq 1 ]; then
	command -v valgrind >/dev/null ||
		{ echo "$0: valgrind not installed (--no-callgrind to skip)" >&2; exit 1; }
	for mode in plain pre; do
		for n in $n1 $n2; do
			out=$(echo_run $mode $cg_mode "$n" valgrind --tool=callgrind \
				--trace-children=no \
				--callgrind-out-file="$tmp/cg.$mode.$n.%p" 2>"$tmp/vg.$mode.$n") ||
				{ cat "$tmp/vg.$mode.$n" >&2; exit 1; }
			eval "calls_${mode}_$n=$(field calls "$out")"
			eval "ir_${mode}_$n=$(cg_total $mode "$n")"
		done
	done
	eval "ip1=\$ir_plain_$n1 ip2=\$ir_plain_$n2 iq1=\$ir_pre_$n1 iq2=\$ir_pre_$n2"
	eval "c1=\$calls_pre_$n1 c2=\$calls_pre_$n2"
	eval "cp1=\$calls_plain_$n1 cp2=\$calls_plain_$n2"
	if [ "$c1" != "$cp1" ] || [ "$c2" != "$cp2" ]; then
		echo "warning: plain and preloaded runs made different numbers of calls ($cp1/$c1, $cp2/$c2): short reads or writes" >&2
	fi
	echo
	awk -v n1="$n1" -v n2="$n2" -v ip1="$ip1" -v ip2="$ip2" \
		-v iq1="$iq1" -v iq2="$iq2" -v c1="$c1" -v c2="$c2" \
		-v goal="$goal_instr" -v mode="$cg_mode" 'BEGIN {
		per = ((iq2 - iq1) - (ip2 - ip1)) / (c2 - c1)
		printf "%-50s %14s %14s\n", "instructions (callgrind, whole process, " mode ")", "plain", "preloaded"
		printf "  %-48s %14d %14d\n", "N1 = " n1 " round trips", ip1, iq1
		printf "  %-48s %14d %14d\n", "N2 = " n2 " round trips", ip2, iq2
		printf "  %-48s %14d %14d\n", "N2 - N1", ip2 - ip1, iq2 - iq1
		printf "  %-48s %14.1f %14.1f\n", "per call (N2 - N1)", (ip2 - ip1) / (c2 - c1), (iq2 - iq1) / (c2 - c1)
		printf "%-50s %29d\n", "intercepted calls between N1 and N2", c2 - c1
		printf "%-50s %29.2f   goal <= %d: %s\n", "added instructions per intercepted call", per, goal, per <= goal ? "met" : "NOT met"
		printf "%-50s %29d\n", "start-up cost of the library (instructions)", (iq1 - ip1) - per * c1
	}'
fi

if [ $annotate -eq 1 ] && [ $do_cg -eq 1 ]; then
	# Self cost of every function of the library in the long run, then the
	# data-path wrappers with what they call (inclusive), so that the share
	# of the wrapper itself and of the real libc call can be told apart.
	# Code inlined from src/*.h shows up without an [object]: matched by the
	# source path.
	ours='librsockx|(^|[ /])(preload|src)/[A-Za-z0-9_-]+\.[chS]:'
	for f in "$tmp/cg.pre.$n2".*; do
		echo
		echo "where the library's instructions go (N2 run, self cost):"
		callgrind_annotate --threshold=100 "$f" | grep -E "$ours" | head -n 30 || true
		echo
		echo "data-path wrappers, inclusive of the libc call (N2 run):"
		callgrind_annotate --inclusive=yes --threshold=100 "$f" |
			grep -E "$ours" | grep -v "=>" | grep -E ':(read|write) ' | head -n 10 || true
	done
	for f in "$tmp/cg.plain.$n2".*; do
		echo
		echo "libc's read/write without the library (plain N2 run, inclusive):"
		callgrind_annotate --inclusive=yes --threshold=100 "$f" |
			grep -E ':(read|write) \[' | head -n 10 || true
	done
fi

if [ $do_cpu -eq 1 ]; then
	set --
	if [ -n "$pin" ]; then
		command -v taskset >/dev/null ||
			{ echo "$0: --pin needs taskset (util-linux)" >&2; exit 1; }
		set -- taskset -c "$pin"
	fi
	: >"$tmp/cpu"
	i=0
	while [ $i -lt "$runs" ]; do
		# Alternate which of the two goes first.
		if [ $((i % 2)) -eq 0 ]; then order="plain pre"; else order="pre plain"; fi
		for mode in $order; do
			out=$(echo_run $mode $cpu_mode "$cpu_n" "$@")
			eval "cpu_$mode=$(( $(field user_us "$out") + $(field sys_us "$out") ))"
		done
		echo "$cpu_plain $cpu_pre" >>"$tmp/cpu"
		i=$((i + 1))
	done
	echo
	awk -v n="$cpu_n" -v runs="$runs" -v goal="$goal_ratio" -v pin="$pin" \
		-v mode="$cpu_mode" '
	function sort(a, k,   i, j, t) {
		for (i = 2; i <= k; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
	}
	# quantile of a sorted array, by linear interpolation
	function q(a, k, f,   x, i) {
		x = 1 + (k - 1) * f; i = int(x)
		return i >= k ? a[k] : a[i] + (x - i) * (a[i + 1] - a[i])
	}
	function median(a, k) { sort(a, k); return q(a, k, 0.5) }
	{ pl[NR] = $1; pre[NR] = $2; r[NR] = $1 > 0 ? $2 / $1 : 0 }
	END {
		mp = median(pl, NR); mq = median(pre, NR); mr = median(r, NR)
		printf "CPU time (%s), user+sys of %d round trips, %d alternating pairs%s\n", mode, n, runs, pin != "" ? ", on CPU " pin : ""
		printf "  %-48s %14d us\n", "median plain", mp
		printf "  %-48s %14d us\n", "median preloaded", mq
		printf "  %-48s %14.2f us\n", "difference per round trip (medians)", (mq - mp) / n
		printf "  %-48s %14.4f\n", "ratio of the medians", mq / mp
		printf "  %-48s %7.4f - %.4f\n", "pair ratios, quartiles", q(r, NR, 0.25), q(r, NR, 0.75)
		printf "%-50s %14.4f   goal <= %.2f: %s\n", "CPU-time ratio (median of pair ratios)", mr, goal, mr <= goal ? "met" : "NOT met"
	}' "$tmp/cpu"
fi
