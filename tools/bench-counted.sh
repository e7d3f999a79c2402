#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench-counted.sh: what a server under librsockx costs a client that does
# not run it, while the server still counts the connection's bytes.
#
# A server that may be asked for an out-of-band upgrade counts and sums
# every byte of an accepted connection (crc.h) for RSOCKX_OOB_WINDOW_MS,
# whatever its client runs.  iperf3 streams over loopback for SECONDS (2,
# inside the 3 s window) to a server that is plain, then preloaded with
# RSOCKX_LOCAL=1 (on a machine without RDMA the server would not count
# otherwise); the client is plain both times.  ROUNDS alternating pairs,
# the median of each column and of the per-pair ratios.
#
# Not a test: it prints numbers, it does not fail on them.  `make bench`
# runs it with the build's library.
set -eu
: "${RSOCKX_LIB:?the library to measure}"
rounds=${ROUNDS:-5}
secs=${SECONDS_EACH:-2}
port=${PORT:-5399}
command -v iperf3 >/dev/null || { echo "bench-counted: iperf3 missing, skipped"; exit 0; }
[ "$secs" -lt 3 ] || echo "bench-counted: note: past 3 s the server stops counting"

# one run: prints the receiver's bits/s
run() { # plain|rsockx
	if [ "$1" = rsockx ]; then
		env LD_PRELOAD="$RSOCKX_LIB" RSOCKX_LOCAL=1 \
			RSOCKX_STATS_FILE="$tmp/stats" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
	else
		iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
	fi
	spid=$!
	sleep 0.5
	iperf3 -c 127.0.0.1 -p "$port" -t "$secs" -i 0 -J |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])'
	wait $spid
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
i=0
while [ $i -lt "$rounds" ]; do
	p=$(run plain)
	r=$(run rsockx)
	echo "$p" >>"$tmp/plain"
	echo "$r" >>"$tmp/rsockx"
	echo "$r $p" | awk '{ print $1 / $2 }' >>"$tmp/ratio"
	i=$((i + 1))
done
echo "bench-counted: a plain iperf3 client, ${secs} s over loopback, $rounds alternating pairs (median)"
printf '  server plain TCP       %8.2f Gbit/s\n' "$(median <"$tmp/plain" | awk '{ print $1 / 1e9 }')"
printf '  server under rsockx    %8.2f Gbit/s (counting)\n' "$(median <"$tmp/rsockx" | awk '{ print $1 / 1e9 }')"
printf '  ratio rsockx / plain   %8.2f\n' "$(median <"$tmp/ratio")"
# the path: the last preloaded server counted what it received
echo "  the last rsockx server counted $(tail -n 1 "$tmp/stats" | tr ' ' '\n' | sed -n 's/^tcp_rx_bytes=//p') bytes on TCP (tcp_rx_bytes)"
