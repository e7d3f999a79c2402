# Helpers shared by the passthrough tests (sourced after tests/lib.sh).
#
# Every run under the library is traced (RSOCKX_LOG=trace) into $trace, and
# the pid of the program itself (not of a wrapper) is recorded, so that a
# test can prove that the library was loaded in *that* process and that its
# wrappers were reached.  A test that would also pass with an empty
# LD_PRELOAD is a broken test.

trace=$tmpdir/trace.log
: >"$trace"

# The sanitizer runtime that ASan builds put in front of the library in
# RSOCKX_PRELOAD, or empty.
san=${RSOCKX_PRELOAD%"$RSOCKX_LIB"}
san=${san%:}

# need PROG...: skip the whole test when a program is really missing.
need() {
	local p
	for p; do
		command -v "$p" >/dev/null 2>&1 ||
			skip_all "$p not installed (package list: tools/deps.txt)"
	done
}

# need_san CMD...: in ASan builds, skip the whole test when CMD cannot run
# under the sanitizer runtime alone (curl deadlocks there): then nothing
# about our library could be learnt from it.
need_san() {
	[ -z "$san" ] && return 0
	timeout 10 env LD_PRELOAD="$san" ASAN_OPTIONS=detect_leaks=0 "$@" \
		>/dev/null 2>&1 ||
		skip_all "$1 does not run under the ASan runtime alone"
}

# run MODE PIDFILE SECS CMD...: run CMD for at most SECS seconds, plain
# (MODE=plain) or under librsockx with tracing (MODE=pre).  The small sh
# writes its own pid and then execs, so PIDFILE holds the pid that the
# program's trace lines carry.  Nothing but LD_PRELOAD and the RSOCKX_LOG*
# variables (and ASAN_OPTIONS in ASan builds) differs between the two
# modes.  $PT_PRELOAD, if set, replaces the preload list (to add other
# libraries around ours).
run() {
	local mode=$1 pidf=$2 secs=$3
	shift 3
	case $mode in
	plain) ;;
	pre) set -- env LD_PRELOAD="${PT_PRELOAD:-$RSOCKX_PRELOAD}" RSOCKX_LOG=trace \
		RSOCKX_LOG_FILE="$trace" "$@"
		# ASan builds: other programs' own leaks are not ours (the
		# unit tests check the library's)
		[ -n "$san" ] && set -- env \
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$@"
		;;
	*) bail "run: bad mode $mode" ;;
	esac
	set -- timeout -k 2 "$secs" sh -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@"
	# In a background job (run ... &) replace the subshell, so that $! is
	# timeout itself: killing it (or lib.sh's exit trap) then reaches the
	# program, which would otherwise hold the test's output open.
	if [ "$BASHPID" != "$$" ]; then
		exec "$@"
	fi
	"$@"
}

# others PIDFILE NAME: a process other than PIDFILE's (a child) was traced
# calling NAME.
others() {
	local pid
	pid=$(cat "$1") || return 1
	grep "^rsockx\[[0-9]*\]: trace: call $2 fd=" "$trace" |
		grep -vq "^rsockx\[$pid\]:"
}

# traced PIDFILE NAME...: the process in PIDFILE reached the wrapper of
# every NAME (a `call NAME fd=N` trace line with its pid).
traced() {
	local pid n
	pid=$(cat "$1" 2>/dev/null) || { diag "no pid file $1"; return 1; }
	shift
	for n; do
		grep -q "^rsockx\[$pid\]: trace: call $n fd=" "$trace" && continue
		diag "pid $pid: no 'call $n' line in the trace"
		return 1
	done
}

# untraced PIDFILE: the process left no trace line at all (a plain run must
# not be traced; it catches a test that mixes its modes up).
untraced() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	! grep -q "^rsockx\[$pid\]:" "$trace"
}

# stat_of FILE NAME: counter NAME summed over the processes of FILE
# (RSOCKX_STATS_FILE).
stat_of() {
	grep -o " $2=[0-9]*" "$1" 2>/dev/null | awk -F= '{s += $2} END {print s + 0}'
}

# wait_listen PORT [SECS]: wait until a socket listens on PORT.  Unlike
# wait_port this does not connect, which would use up the one connection
# of a single-shot server such as nc -l.
wait_listen() {
	local port=$1 tries=$((${2:-10} * 20))
	while [ "$tries" -gt 0 ]; do
		[ -n "$(${PT_NETNS:+ip netns exec "$PT_NETNS"} ss -Hltn "sport = :$port" 2>/dev/null)" ] && return 0
		sleep 0.05
		tries=$((tries - 1))
	done
	diag "nothing listens on port $port"
	return 1
}

# same DESC FILE_A FILE_B: one test point, files byte for byte identical.
same() {
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		not_ok "$1"
		diag "$2 and $3 differ:"
		diff "$2" "$3" 2>&1 | head -n 10 | sed 's/^/#   /'
	fi
}

# Both ends of a client/server test in the four ways: server and client
# plain (the reference), server under the library, client under it, both.
modes="plain:plain pre:plain plain:pre pre:pre"
