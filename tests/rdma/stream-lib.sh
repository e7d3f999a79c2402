# Helpers for the upgrade tests: rsx-stream pairs between hosts A and B.
# Source after tests/lib.sh and tests/vm/lib.sh.
STREAM=${STREAM:-$abs_top_builddir/tests/stream/rsx-stream}

# stat_of FILE NAME: the summed value of counter NAME in a stats file
# (RSOCKX_STATS_FILE lines of one or more processes).
stat_of() {
	grep -o " $2=[0-9]*" "$1" 2>/dev/null | awk -F= '{s += $2} END {print s + 0}'
}

# stream_pair LABEL SRV_ENV CLI_ENV SADDR BIND ARGS...
# One rsx-stream server (host B side, address SADDR) and client (bound to
# BIND unless empty), each under the library with the given extra
# environment ("-" for no library at all).  Every byte is checked by
# rsx-stream itself; counters land in $tmpdir/LABEL.{s,c}stats.
# STREAM_CONNECT: the address the client connects to (default SADDR);
# STREAM_SERVER_ARGS: extra arguments of the server only;
# STREAM_CLIENT_WRAP: a command the client runs under (see stream_run).
stream_pair() {
	local label=$1 senv=$2 cenv=$3 saddr=$4 bind=$5 port spid rc=0
	local out=$tmpdir/$label
	shift 5
	port=$(vm_port)
	rm -f "$out.sstats" "$out.cstats"
	# shellcheck disable=SC2086
	stream_run "$senv" "$out.sstats" "$STREAM" server -l "$saddr" -p "$port" "$@" \
		${STREAM_SERVER_ARGS:-} >"$out.server" 2>&1 &
	spid=$!
	if ! wait_listen "$port"; then
		echo "stream_pair $label: server did not start" >&2
		kill $spid 2>/dev/null
		return 1
	fi
	# and its rsockx's RDMA CM listener (loading the RDMA libraries
	# after listen() took longer than the client's retries under ASan:
	# the probe and the first request met no listener, probe_no 1);
	# a server whose rules keep it off RDMA has none: 5 s at most
	[ "$senv" = - ] || wait_cm_listen "$port" 50 || :
	STREAM_WRAP=${STREAM_CLIENT_WRAP:-} \
		stream_run "$cenv" "$out.cstats" "$STREAM" client -c "${STREAM_CONNECT:-$saddr}" \
		${bind:+-b "$bind"} -p "$port" "$@" >"$out.client" 2>&1 || rc=1
	reap $spid 60 || rc=1
	sed "s/^/  $label: /" "$out.server" "$out.client" >&2
	[ $rc = 0 ] && grep -q "rsx-stream: ok" "$out.client" &&
		grep -q "rsx-stream: ok" "$out.server"
}

# stream_run ENV STATSFILE CMD...: CMD under the library with ENV (words of
# VAR=value), or without it when ENV is "-".  Bounded in time.  STREAM_WRAP
# (words): a command that all of it runs under, such as strace, which then
# does not get the library itself.
stream_run() {
	local envs=$1 stats=$2
	shift 2
	# shellcheck disable=SC2086
	if [ "$envs" = - ]; then
		bounded 120 ${STREAM_WRAP:-} "$@"
	else
		bounded 120 ${STREAM_WRAP:-} env LD_PRELOAD="$RSOCKX_PRELOAD" \
			RSOCKX_STATS_FILE="$stats" $envs "$@"
	fi
}

# upgraded LABEL: both ends counted an upgrade and moved bytes over RDMA.
# When not, the counters that moved at either end go to stderr: the
# fallback that a flaky run took is then in CI's log.
upgraded() {
	local out=$tmpdir/$1 f
	[ "$(stat_of "$out.sstats" upgraded)" -ge 1 ] &&
		[ "$(stat_of "$out.cstats" upgraded)" -ge 1 ] &&
		[ $(($(stat_of "$out.sstats" rdma_rx_bytes) +
		     $(stat_of "$out.cstats" rdma_rx_bytes))) -gt 0 ] && return 0
	for f in "$out.sstats" "$out.cstats"; do
		echo "$1: ${f##*.}: $(tr ' ' '\n' <"$f" 2>/dev/null |
			grep '=[1-9]' | tr '\n' ' ')" >&2
	done
	return 1
}

# stayed_tcp LABEL: no end upgraded, no byte over RDMA.
stayed_tcp() {
	local out=$tmpdir/$1
	[ "$(stat_of "$out.sstats" upgraded)" = 0 ] &&
		[ "$(stat_of "$out.cstats" upgraded)" = 0 ] &&
		[ "$(stat_of "$out.sstats" rdma_rx_bytes)" = 0 ] &&
		[ "$(stat_of "$out.cstats" rdma_rx_bytes)" = 0 ]
}

# pace FILE CHUNK MS: FILE on stdout, CHUNK bytes at a time with MS
# milliseconds between them: a sender slow enough that an upgrade decided
# during the transfer (a probe's answer, then an RDMA CM round trip) still
# finds much of it unsent.  Run it without the library, feeding the
# program under test.
pace() {
	"$PYTHON" -c 'import sys, time
f, n, ms = open(sys.argv[1], "rb"), int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
while True:
    b = f.read(n)
    if not b:
        break
    out.write(b)
    out.flush()
    time.sleep(ms / 1000)' "$@"
}
