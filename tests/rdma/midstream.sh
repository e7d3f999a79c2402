#!/bin/bash
# Single-connection programs get RDMA with no configuration at all: the
# client's first connection to B cannot wait for the probe, so it starts on
# TCP; the client asks over the RDMA CM for that very connection (out of
# band: the request is this connection's probe too), B's rsockx answers,
# and both ends cut over in the middle of the stream.  nc.openbsd (a file each way), socat (an echo),
# curl from nginx, python's urllib from http.server, one long redis-cli
# session and iperf3 with one stream.  Both ends under librsockx with no
# rules (RSOCKX_CONF=, apps-lib.sh's mode "probe"), server on B, client
# bound to A where the program allows it.  Every transfer is paced by its
# sender to last a few seconds, so that much of it is still to come when
# the cut-over can happen (the first probe of a process takes ~0.6 s here,
# then one more CM round trip).  Checked: the bytes (cmp or sha256), both
# ends upgraded mid-stream out of band, at least a quarter of the bytes
# arrived over RDMA, and the rxe counters moved.
# vm-exclusive: yes
# vm-timeout: 420
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
APPS_MODE=probe
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"
# Not a rule: the probe's deadline (1 s) is for real networks.  With other
# VMs on the same two cores, the first probe of a process (the RDMA
# libraries load inside it) overran it here: the answer counted as no.
export RSOCKX_PROBE_TIMEOUT_MS=${RSOCKX_PROBE_TIMEOUT_MS:-10000}

# mid LABEL WHO MIN: the TAP points of one upgraded program pair.  WHO
# (s, c or sc) are the receiving ends, each of which must have taken at
# least MIN bytes off RDMA.
mid() {
	local l=$1 who=$2 min=$3 s=$tmpdir/$1.sstats c=$tmpdir/$1.cstats e n
	check "$l: both ends upgraded (server $(stat_of "$s" upgraded), client $(stat_of "$c" upgraded))" \
		test "$(stat_of "$s" upgraded)" -ge 1 -a "$(stat_of "$c" upgraded)" -ge 1
	check "$l: both ends upgraded mid-stream (midstream_upgrades: server $(stat_of "$s" midstream_upgrades), client $(stat_of "$c" midstream_upgrades))" \
		test "$(stat_of "$s" midstream_upgrades)" -ge 1 -a "$(stat_of "$c" midstream_upgrades)" -ge 1
	check "$l: the out-of-band request was answered (client oob_sent=$(stat_of "$c" oob_sent) oob_acked=$(stat_of "$c" oob_acked), server oob_answered=$(stat_of "$s" oob_answered))" \
		test "$(stat_of "$c" oob_acked)" -ge 1 -a "$(stat_of "$s" oob_answered)" -ge 1
	for e in s c; do
		[ "${who#*"$e"}" != "$who" ] || continue
		n=$(stat_of "$tmpdir/$l.${e}stats" rdma_rx_bytes)
		check "$l: >= $min bytes reached the $([ $e = s ] && echo server || echo client) over RDMA ($n)" \
			test "$n" -ge "$min"
	done
	check "$l: no upgraded connection broke" \
		test "$(stat_of "$s" conn_errors)$(stat_of "$c" conn_errors)" = 00
	for e in c s; do
		diag "$l ${e}stats: $(tr ' ' '\n' <"$tmpdir/$l.${e}stats" 2>/dev/null |
			grep -E '^(probe|oob_|midstream|fallback|upgraded|hello|rdma_|tcp_tx|conn_err)' |
			grep -v '=0$' | tr '\n' ' ')"
	done
}

# timed DESC CMD...: check, with the seconds CMD took in DESC (the
# transfers must last long enough for the cut-over to matter).
timed() {
	local desc=$1 t0=${EPOCHREALTIME/./} rc=0 ms
	shift
	"$@" || rc=1
	ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	desc="$desc ($((ms / 1000)).$((ms % 1000 / 100)) s)"
	if [ $rc = 0 ]; then ok "$desc"; else not_ok "$desc"; fi
}

# --- nc.openbsd ---------------------------------------------------------------
# nc_pair LABEL up|down: 2 MiB in 32 KiB pieces 25 ms apart (4-6 s here).  up:
# the client sends (-N: shuts its side down at the end); down: the server
# sends first, fed through a fifo by a pacer that waits for nc to read.
nc_pair() {
	local l=$1 port rc
	port=$(vm_port)
	rm -f "$tmpdir/$l.client" "$tmpdir/$l.out" "$tmpdir/$l.fifo"
	head -c 2097152 /dev/urandom >"$tmpdir/$l.in"
	if [ "$2" = up ]; then
		app_srv "$l" sh -c 'exec nc.openbsd -l -s "$1" -p "$2" >"$3"' sh \
			$HOST_B "$port" "$tmpdir/$l.out"
		app_wait "$port" || { app_stop KILL; app_fail "$l"; return 1; }
		pace "$tmpdir/$l.in" 32768 25 |
			app_cli "$l" nc.openbsd -N -s $HOST_A $HOST_B "$port"
	else
		mkfifo "$tmpdir/$l.fifo"
		pace "$tmpdir/$l.in" 32768 25 >"$tmpdir/$l.fifo" &
		app_srv "$l" sh -c 'exec nc.openbsd -N -l -s "$1" -p "$2" <"$3"' sh \
			$HOST_B "$port" "$tmpdir/$l.fifo"
		app_wait "$port" || { app_stop KILL; app_fail "$l"; return 1; }
		app_cli "$l" sh -c 'exec nc.openbsd -d -s "$1" "$2" "$3" >"$4"' sh \
			$HOST_A $HOST_B "$port" "$tmpdir/$l.out"
	fi
	rc=$?
	reap "$APP_SPID" 30 || rc=1
	[ $rc = 0 ] && cmp "$tmpdir/$l.in" "$tmpdir/$l.out" || app_fail "$l"
}

if command -v nc.openbsd >/dev/null; then
	for dir in up down; do
		s=$(rxe_snap)
		timed "nc-$dir: 2 MiB arrived intact" nc_pair nc-$dir $dir
		mid nc-$dir "$([ $dir = up ] && echo s || echo c)" 524288
		rdma_crossed "nc-$dir: rxe0 and rxe1 both sent and received" "$s" 100
	done
else
	skip "nc.openbsd not installed"
fi

# --- socat --------------------------------------------------------------------
# socat_echo LABEL: the server echoes through a pipe (PIPE: one process, no
# fork); the client sends 2 MiB in 32 KiB pieces 30 ms apart and must get
# all of it back.  -t: after its input ends, the client waits for the
# echo's end, not the default 0.5 s.  Without fork, socat closes its
# listening socket as soon as it has accepted, before the probe arrives
# (today's probe then says no): the answer for a connection must not
# depend on its listener still being there.  socat_echo LABEL fork: the
# server forks per connection (socat's fork option): its parent closes the
# accepted socket and listens on, the child echoes, and it is the child,
# alone with the socket then (src/share.c), that upgrades.
socat_echo() {
	local l=$1 fork=${2:+,fork} port rc
	port=$(vm_port)
	rm -f "$tmpdir/$l.client" "$tmpdir/$l.out"
	head -c 2097152 /dev/urandom >"$tmpdir/$l.in"
	app_srv "$l" socat -t 30 TCP-LISTEN:"$port",bind=$HOST_B,reuseaddr$fork PIPE
	app_wait "$port" || { app_stop KILL; app_fail "$l"; return 1; }
	pace "$tmpdir/$l.in" 32768 30 |
		APP_CLI_ERR=$tmpdir/$l.err app_cli "$l.echo" socat -t 30 - TCP:$HOST_B:"$port",bind=$HOST_A
	rc=$?
	cat "$tmpdir/$l.err" >>"$tmpdir/$l.client" 2>/dev/null
	if [ -n "$fork" ]; then
		# the child has ended with the echo; the parent listens on
		wait_filled "$tmpdir/$l.sstats" 100
		app_stop TERM
	else
		reap "$APP_SPID" 30 || rc=1
	fi
	[ $rc = 0 ] && cmp "$tmpdir/$l.in" "$tmpdir/$l.echo.client" || app_fail "$l"
}

if command -v socat >/dev/null; then
	s=$(rxe_snap)
	timed "socat: 2 MiB echoed back intact" socat_echo socat
	mid socat sc 524288
	rdma_crossed "socat: rxe0 and rxe1 both sent and received" "$s" 100
	s=$(rxe_snap)
	timed "socat fork: 2 MiB echoed back intact" socat_echo socatfork fork
	mid socatfork sc 524288
	check "socatfork: the child that served it was alone with the socket (fork_alone $(stat_of "$tmpdir/socatfork.sstats" fork_alone))" \
		test "$(stat_of "$tmpdir/socatfork.sstats" fork_alone)" -ge 1
	rdma_crossed "socatfork: rxe0 and rxe1 both sent and received" "$s" 100
else
	skip "socat not installed"
fi

# --- curl from nginx ----------------------------------------------------------
# One request for the 10 MiB file, curl reading at most 2.5 MB/s (5-7 s here);
# nginx single process (master_process off).
curl_get() {
	local l=$1
	APP_CLI_ERR=$tmpdir/$l.err app_cli "$l.curl" curl -sS --interface $HOST_A \
		--limit-rate 2500K -o "$tmpdir/$l.got" "http://$HOST_B:$APP_PORT/big" &&
		[ "$(sha256sum <"$tmpdir/$l.got")" = "$(sha256sum <"$tmpdir/www/big")" ] ||
		{ cat "$tmpdir/$l.err" >>"$tmpdir/$l.client"; app_fail "$l"; }
}

if command -v nginx >/dev/null && command -v curl >/dev/null; then
	s=$(rxe_snap)
	if app_nginx_start curl off; then
		timed "curl: the 10 MiB file at 2.5 MB/s, sha256 equal" curl_get curl
	else
		not_ok "curl: nginx listens"
	fi
	check "curl: nginx shuts down gracefully (SIGQUIT)" app_stop QUIT
	mid curl c 2621440
	rdma_crossed "curl: rxe0 and rxe1 both sent and received" "$s" 100
else
	skip "nginx or curl not installed"
fi

# --- python: urllib from http.server -----------------------------------------
# The same file from python's http.server (its threading server, as
# "python3 -m http.server" runs it) with a handler that sends 64 KiB every
# 25 ms (~4 s): a client that read slowly instead would not hold the
# server back, whose socket buffers took 8 MB of the file within 2 s here.
# The urllib client binds to A through its own handler.  SIGINT stops the
# server through shutdown() and is ignored from then on: timeout(1) passes
# it on twice (to the program, then to its group), and with python's
# KeyboardInterrupt the second one killed python during its exit (no
# counters) in 5 of 30 runs on the host.
cat >"$tmpdir/httpd.py" <<'EOF'
import http.server, signal, sys, threading, time
class Paced(http.server.SimpleHTTPRequestHandler):
    def copyfile(self, src, dst):
        while True:
            b = src.read(65536)
            if not b:
                break
            dst.write(b)
            time.sleep(0.025)
host, port, root = sys.argv[1:4]
handler = lambda *a, **k: Paced(*a, directory=root, **k)
srv = http.server.ThreadingHTTPServer((host, int(port)), handler)
def stop(*a):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=srv.shutdown).start()
signal.signal(signal.SIGINT, stop)
srv.serve_forever()
EOF

urllib_get() {
	local l=$1
	app_cli "$l" "$PYTHON" - $HOST_A "http://$HOST_B:$APP_PORT/big" "$tmpdir/$l.got" <<-'EOF' &&
	import functools, http.client, sys, urllib.request
	bind, url, out = sys.argv[1:4]
	class FromA(urllib.request.HTTPHandler):
	    def http_open(self, req):
	        return self.do_open(functools.partial(http.client.HTTPConnection,
	                                              source_address=(bind, 0)), req)
	r = urllib.request.build_opener(FromA).open(url)
	with open(out, "wb") as f:
	    while True:
	        b = r.read(65536)
	        if not b:
	            break
	        f.write(b)
	print("urllib: status %d" % r.status)
	EOF
		[ "$(sha256sum <"$tmpdir/$l.got")" = "$(sha256sum <"$tmpdir/www/big")" ] ||
		app_fail "$l"
}

s=$(rxe_snap)
APP_PORT=$(vm_port)
rm -f "$tmpdir/urllib.client"
mkdir -p "$tmpdir/www"
[ -f "$tmpdir/www/big" ] || head -c 10485760 /dev/urandom >"$tmpdir/www/big"
app_srv urllib "$PYTHON" "$tmpdir/httpd.py" $HOST_B "$APP_PORT" "$tmpdir/www"
if app_wait "$APP_PORT"; then
	timed "urllib: the 10 MiB file, sha256 equal" urllib_get urllib
else
	not_ok "urllib: http.server listens"
fi
check "urllib: http.server stops on SIGINT" app_stop INT
mid urllib c 2621440
rdma_crossed "urllib: rxe0 and rxe1 both sent and received" "$s" 100

# --- redis-cli ----------------------------------------------------------------
# One redis-cli session (it reads its commands line by line from a pipe,
# one connection): 200 rounds of SET and GET of a 6000-byte value and an
# INCR, a round every 15 ms, then DBSIZE; its whole output must be what
# the generator expects.  redis-cli cannot bind: B to B, inside rxe1.
redis_session() {
	local l=$1
	"$PYTHON" - 200 "$tmpdir/$l.want" <<-'EOF' |
	import os, sys, time
	n, want = int(sys.argv[1]), open(sys.argv[2], "w")
	for i in range(n):
	    v = os.urandom(3000).hex()
	    sys.stdout.write("SET k%d %s\nGET k%d\nINCR rounds\n" % (i, v, i))
	    sys.stdout.flush()
	    want.write("OK\n%s\n%d\n" % (v, i + 1))
	    time.sleep(0.015)
	sys.stdout.write("DBSIZE\n")
	want.write("%d\n" % (n + 1))
	EOF
		APP_CLI_ERR=$tmpdir/$l.err app_cli "$l.session" redis-cli -h $HOST_B -p "$APP_PORT"
	cmp "$tmpdir/$l.want" "$tmpdir/$l.session.client" ||
		{ cat "$tmpdir/$l.err" >>"$tmpdir/$l.client"; app_fail "$l"; }
}

if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	s=$(rxe_snap)
	if app_redis_start redis; then
		timed "redis-cli: 601 commands on one connection, every answer right" \
			redis_session redis
	else
		not_ok "redis-server listens"
	fi
	check "redis-server: clean shutdown (SIGTERM)" app_stop TERM
	mid redis sc 300000
	rdma_only_dev "redis: rxe1 alone carried it (B to B)" "$s" rxe1
	rdma_moved "redis: more than the probe's packets" "$s" 100
else
	skip "redis-server/redis-tools not installed"
fi

# --- iperf3 -------------------------------------------------------------------
# One stream for 4 s at 40 Mbit/s (paced by iperf3 itself).  The control
# connection starts before the probe's answer and idles through the test:
# it is upgraded mid-stream; the data connection follows within a moment,
# before or after the answer (out of band or in band: either will do).
# With RSOCKX_INBAND=0 (both ends) both must go out of band.  No -w: with
# it the server closes its listener after each accept and listens anew,
# and a probe that came in between was told no (3 runs in 6 here).
iperf_run() { app_iperf "$@" >"$tmpdir/$1.sum"; } # what both ends counted
iperf() {
	local l=$1 conns=$2 s sent
	s=$(rxe_snap)
	timed "$l: -P 1 -t 4, completed, byte counts agree" \
		iperf_run "$l" -P 1 -t 4 -b 40M
	diag "$(cat "$tmpdir/$l.sum")"
	sent=$(sed -n 's/^iperf3 .*: sent \([0-9]*\) .*/\1/p' "$tmpdir/$l.sum")
	mid "$l" s $((${sent:-20000000} / 4))
	[ "$conns" = 1 ] || check "$l: >= $conns connections upgraded mid-stream on each end (server $(stat_of "$tmpdir/$l.sstats" midstream_upgrades), client $(stat_of "$tmpdir/$l.cstats" midstream_upgrades))" \
		test "$(stat_of "$tmpdir/$l.sstats" midstream_upgrades)" -ge "$conns" \
		-a "$(stat_of "$tmpdir/$l.cstats" midstream_upgrades)" -ge "$conns"
	rdma_crossed "$l: rxe0 and rxe1 both sent and received" "$s" 100
}
if command -v iperf3 >/dev/null; then
	iperf iperf3 1
	RSOCKX_INBAND=0 iperf iperf3-oob 2
	check "iperf3-oob: no HELLO in band (client hello_sent=$(stat_of "$tmpdir/iperf3-oob.cstats" hello_sent), server hello_received=$(stat_of "$tmpdir/iperf3-oob.sstats" hello_received))" \
		test "$(stat_of "$tmpdir/iperf3-oob.cstats" hello_sent)$(stat_of "$tmpdir/iperf3-oob.sstats" hello_received)" = 00
else
	skip "iperf3 not installed"
fi
# --- a client that talks through stdio ----------------------------------------
# tests/prog/stdioc does what busybox wget does: fdopen() on its socket,
# after which libc moves its bytes past the library.  Given 5 s after
# connect(), the out-of-band upgrade lands before the fdopen(), which
# takes the connection back to TCP (a DOWNGRADE, as for an exec); at once
# (0 ms), the connection stays TCP.  Before, the client's reads took the
# kernel's socket while the echo came by the ring: nothing came back.
stdio_echo() {
	local l=$1 ms=$2 port
	port=$(vm_port)
	rm -f "$tmpdir/$l.client"
	app_srv "$l" "$PYTHON" -c '
import socket, sys
l = socket.socket()
l.bind((sys.argv[1], int(sys.argv[2])))
l.listen()
c = l.accept()[0]
while True:
    d = c.recv(65536)
    if not d:
        break
    c.sendall(d)
c.close()' $HOST_B "$port"
	app_wait "$port" || { app_stop KILL; app_fail "$l"; return 1; }
	app_cli "$l" "$abs_top_builddir/tests/prog/stdioc" $HOST_B "$port" 300000 "$ms" &&
		reap "$APP_SPID" 30 && grep -qx 'stdioc: ok 300000' "$tmpdir/$l.client"
}
for ms in 5000 0; do
	l=stdio$ms
	rc=0
	stdio_echo "$l" "$ms" || rc=1
	check "$l: every byte of the stdio client's came back ($(tail -n 1 "$tmpdir/$l.client" 2>/dev/null))" \
		test $rc = 0
	check "$l: the client kept it on TCP for stdio (fallback_stdio $(stat_of "$tmpdir/$l.cstats" fallback_stdio)), nothing broke (conn_errors $(stat_of "$tmpdir/$l.sstats" conn_errors)/$(stat_of "$tmpdir/$l.cstats" conn_errors))" \
		test "$(stat_of "$tmpdir/$l.cstats" fallback_stdio)$(stat_of "$tmpdir/$l.sstats" conn_errors)$(stat_of "$tmpdir/$l.cstats" conn_errors)" = 100
done
check "stdio5000: the connection was on RDMA before the fdopen() (client midstream_upgrades $(stat_of "$tmpdir/stdio5000.cstats" midstream_upgrades), server $(stat_of "$tmpdir/stdio5000.sstats" midstream_upgrades))" \
	test "$(stat_of "$tmpdir/stdio5000.cstats" midstream_upgrades)$(stat_of "$tmpdir/stdio5000.sstats" midstream_upgrades)" = 11
done_testing
