# Real programs between hosts A and B (issue 5): one function per program
# pair, shared by the VM tests tests/rdma/apps-*.sh (under rsockx, with the
# counters checked) and tools/apps-bench.sh (the same pairs over plain TCP,
# rsockx and rdma-core's librspreload, measured side by side).
# Source after tests/lib.sh, tests/vm/lib.sh and tests/rdma/stream-lib.sh.
#
# APPS_MODE says how both ends run:
#   tcp        no preload library (plain kernel TCP)
#   rsockx     both under librsockx: the client's rules say rdma, the server
#              has no rules (RSOCKX_CONF=); counters in $tmpdir/LABEL.sstats
#              and $tmpdir/LABEL.cstats (all processes of each side)
#   probe      both under librsockx with no configuration at all (no rules,
#              RSOCKX_CONF= on both ends): the client probes, as a program
#              run under rsockx by hand would; counters as for rsockx
#   rspreload  both under librspreload
# Each app_* function runs one server on B and its client(s) on A (bound to
# $HOST_A where the program allows it), verifies the program's own output,
# returns 0 when it is right, and leaves one number (the measure named in
# its comment) in $tmpdir/LABEL.metric.  The programs' outputs stay in
# $tmpdir/LABEL.server and $tmpdir/LABEL.client; a failure prints them on
# stderr.
APPS_MODE=${APPS_MODE:-rsockx}
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

# app_env SIDE LABEL: the environment words of one side, in APP_ENV.
# APP_SRV_ENV: extra words for the server under rsockx (e.g. the HELLO
# grace of a server that speaks first).
app_env() {
	APP_ENV=()
	case $APPS_MODE in
	rsockx|probe)
		APP_ENV=(LD_PRELOAD="$RSOCKX_PRELOAD")
		if [ "$1" = s ]; then
			# shellcheck disable=SC2206 # words on purpose
			APP_ENV+=(RSOCKX_CONF= RSOCKX_STATS_FILE="$tmpdir/$2.sstats" ${APP_SRV_ENV:-})
		elif [ "$APPS_MODE" = probe ]; then
			APP_ENV+=(RSOCKX_CONF= RSOCKX_STATS_FILE="$tmpdir/$2.cstats")
		else
			APP_ENV+=(RSOCKX_CONF="$tmpdir/rdma.conf" RSOCKX_STATS_FILE="$tmpdir/$2.cstats")
		fi ;;
	rspreload) APP_ENV=(LD_PRELOAD="$RSPRELOAD") ;;
	esac
}

# app_srv LABEL CMD...: start the server in the background (APP_SPID),
# output in $tmpdir/LABEL.server; bounded by APP_SRV_TIME (default 120 s).
# timeout(1) passes the signals of app_stop on to the program.
app_srv() {
	local label=$1
	shift
	rm -f "$tmpdir/$label.sstats" "$tmpdir/$label.cstats" "$tmpdir/$label.metric" \
		"$tmpdir/$label".*.client
	app_env s "$label"
	timeout "${APP_SRV_TIME:-120}" env "${APP_ENV[@]}" "$@" >"$tmpdir/$label.server" 2>&1 &
	APP_SPID=$!
}

# app_cli LABEL[.PART] CMD...: one client run in the foreground, stdout
# appended to $tmpdir/LABEL[.PART].client (stderr too unless APP_CLI_ERR
# names a file), counters to $tmpdir/LABEL.cstats; bounded by APP_CLI_TIME
# (default 60 s).
app_cli() {
	local label=$1
	shift
	app_env c "${label%%.*}"
	timeout "${APP_CLI_TIME:-60}" env "${APP_ENV[@]}" "$@" >>"$tmpdir/$label.client" \
		2>>"${APP_CLI_ERR:-$tmpdir/$label.client}"
}

# app_wait PORT: the server listens (an RDMA CM listener for librspreload).
# probe: and answers probes; its responder starts after the real listen()
# (the RDMA libraries load then, ~0.5 s here), and a client that asked
# before would be told no (and the no cached).
app_wait() {
	case $APPS_MODE in
	rspreload) wait_cm_listen "$1" 50 || wait_listen "$1" 20 ;;
	probe) wait_listen "$1" && wait_cm_listen "$1" 50 ;;
	*) wait_listen "$1" ;;
	esac
}

# app_stop [SIGNAL] [SECONDS]: stop the server with SIGNAL (default INT) so
# that it exits through exit() (and writes its counters); its status.
app_stop() {
	kill -"${1:-INT}" "$APP_SPID" 2>/dev/null
	reap "$APP_SPID" "${2:-20}"
}

# app_fail LABEL: show what the programs said (on stderr), return 1.
app_fail() {
	echo "--- $1 (mode $APPS_MODE) server:" >&2
	tail -n 30 "$tmpdir/$1.server" >&2
	echo "--- $1 client:" >&2
	tail -n 30 "$tmpdir/$1.client" >&2
	return 1
}

# app_rdma_bytes LABEL: bytes both ends received over RDMA.
app_rdma_bytes() {
	echo $(($(stat_of "$tmpdir/$1.sstats" rdma_rx_bytes) +
		$(stat_of "$tmpdir/$1.cstats" rdma_rx_bytes)))
}

# --- iperf3 -----------------------------------------------------------------
# app_iperf LABEL ARGS...: one iperf3 test (the one-off server -s -1 with
# JSON output; the client with -J and ARGS, e.g. -n 4M, -R, -P 4).  iperf3
# opens a control connection, then one data connection per stream.  Checks
# that the client sent exactly the -n bytes, that the client's report of
# what the receiver counted agrees with the receiver's own JSON and that
# it is close to what was sent (see below).  Metric: Gbit/s received.
app_iperf() {
	local label=$1 port
	shift
	port=$(vm_port)
	rm -f "$tmpdir/$label.client"
	app_srv "$label" iperf3 -s -1 -B $HOST_B -p "$port" -J
	app_wait "$port" || { app_stop KILL; app_fail "$label"; return 1; }
	APP_CLI_ERR=$tmpdir/$label.err app_cli "$label" iperf3 -c $HOST_B -B $HOST_A -p "$port" -J "$@"
	reap "$APP_SPID" 30
	"$PYTHON" - "$tmpdir/$label.client" "$tmpdir/$label.server" "$tmpdir/$label.metric" "$@" <<-'EOF' ||
	import json, sys
	cli, srv, metric, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
	want = 1
	if "-n" in args:
	    v = args[args.index("-n") + 1]
	    want = int(v[:-1]) << {"K": 10, "M": 20, "G": 30}[v[-1]] if v[-1] in "KMG" else int(v)
	c = json.load(open(cli))
	s = json.load(open(srv))
	for j, who in ((c, "client"), (s, "server")):
	    if j.get("error"):
	        sys.exit("%s: %s" % (who, j["error"]))
	tx = c["end"]["sum_sent"]["bytes"]
	rx = c["end"]["sum_received"]["bytes"]
	# the receiver's own count (server, or client with -R)
	rrx = c["end"]["sum_received"]["bytes"] if "-R" in args else s["end"]["sum_received"]["bytes"]
	streams = len(c["end"]["streams"])
	print("iperf3 %s: sent %d received %d (receiver says %d), %d streams, %.3f Gbit/s"
	      % (" ".join(args), tx, rx, rrx, streams,
	         c["end"]["sum_received"]["bits_per_second"] / 1e9))
	want_streams = int(args[args.index("-P") + 1]) if "-P" in args else 1
	# The receiver stops counting when TEST_END comes on the control
	# connection; data of the last moments may still be under way on the
	# data connections then (iperf3 does this over any network): allow
	# 10% short of what was sent with -n, or two 128 KiB of each stream
	# (a send and a receive buffer of -w 64K, doubled by the kernel) when
	# that is more (CI: -P 4 received 3,735,552 of 4,194,304, all of
	# which had arrived at the library), half with -t (the socket
	# buffers of a whole run at full speed).
	short = 0.5
	if "-n" in args:
	    short = min(0.9, 1 - want_streams * 262144 / max(tx, 1))
	# With -n iperf3 may send up to one block (128 KiB) per stream more
	# than asked (CI, with -w 64K: 33 blocks for -n 4M, both ends
	# agreeing on them).
	over = want_streams * 131072
	if ("-n" in args and not want <= tx <= want + over) or tx < want \
	        or rx != rrx \
	        or not short * tx <= rx <= tx or streams != want_streams \
	        or ("-R" in args and s["end"]["sum_sent"]["bytes"] != tx):
	    sys.exit("iperf3: wrong byte count or stream count")
	open(metric, "w").write("%.3f\n" % (c["end"]["sum_received"]["bits_per_second"] / 1e9))
	EOF
		{ cat "$tmpdir/$label.err" >>"$tmpdir/$label.client"; app_fail "$label"; }
}

# --- redis ------------------------------------------------------------------
# app_redis_start LABEL: redis-server on B (no persistence), port in
# APP_PORT.  app_redis_stop: SIGTERM (redis shuts down through exit()).
app_redis_start() {
	APP_PORT=$(vm_port)
	rm -f "$tmpdir/$1.client"
	app_srv "$1" redis-server --bind $HOST_B --port "$APP_PORT" --save '' --protected-mode no \
		--appendonly no --dir "$tmpdir" --logfile ''
	app_wait "$APP_PORT"
}

# app_redis_bench LABEL N: redis-benchmark (no bind option: B to B) with
# -t set,get,lpush, pipelining 16, N requests each; every test must report
# a rate.  Metric: the GET requests/s.
app_redis_bench() {
	local label=$1 n=$2
	app_cli "$label" redis-benchmark -h $HOST_B -p "$APP_PORT" -t set,get,lpush \
		-P 16 -n "$n" -c 4 --csv &&
		awk -F'"' '$2 == "SET" || $2 == "GET" || $2 ~ /^LPUSH/ { if ($4 + 0 > 0) n++ }
			$2 == "GET" { print $4 + 0 > "/dev/stderr" } END { exit n != 3 }' \
			"$tmpdir/$label.client" 2>"$tmpdir/$label.metric"
}

# app_redis_value LABEL BYTES: redis-cli (B to B) SETs a random value of
# BYTES bytes and GETs it back byte for byte.  Metric: none.
app_redis_value() {
	local label=$1 n=$2
	head -c "$n" /dev/urandom >"$tmpdir/$label.val"
	app_cli "$label" redis-cli -h $HOST_B -p "$APP_PORT" -x SET bigkey \
		<"$tmpdir/$label.val" &&
		APP_CLI_ERR=/dev/null app_cli "$label.get" redis-cli -h $HOST_B -p "$APP_PORT" \
			--raw GET bigkey >/dev/null 2>&1
	# stdout of app_cli went to $label.get.client: the value and a newline
	[ "$(stat -c %s "$tmpdir/$label.get.client")" = $((n + 1)) ] &&
		head -c "$n" "$tmpdir/$label.get.client" | cmp -s - "$tmpdir/$label.val"
}

# --- memcached ----------------------------------------------------------------
# app_memcached LABEL COUNT: memcached on B, a python3 text-protocol client
# bound to A sets COUNT random values of 1 byte to 512 KiB and gets each
# back (also a multi-get), checking every byte.  Metric: set+get ops/s.
app_memcached() {
	local label=$1 count=$2 port
	port=$(vm_port)
	rm -f "$tmpdir/$label.client"
	app_srv "$label" memcached -l $HOST_B -p "$port" -U 0 -u root -m 64 -t 1
	app_wait "$port" || { app_stop KILL; app_fail "$label"; return 1; }
	app_cli "$label" "$PYTHON" - $HOST_B "$port" $HOST_A "$count" \
		"$tmpdir/$label.metric" <<-'EOF'
	import os, random, socket, sys, time
	host, port, bind, count, metric = sys.argv[1:6]
	s = socket.socket()
	s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
	s.bind((bind, 0))
	s.connect((host, int(port)))
	f = s.makefile("rb")
	def cmd(line, data=None):
	    s.sendall(line.encode() + b"\r\n" + (b"" if data is None else data + b"\r\n"))
	def get(keys):
	    cmd("get " + " ".join(keys))
	    got = {}
	    while True:
	        h = f.readline().split()
	        if h[0] == b"END":
	            return got
	        assert h[0] == b"VALUE", h
	        n = int(h[3])
	        v = f.read(n + 2)
	        assert v[n:] == b"\r\n"
	        got[h[1].decode()] = v[:n]
	def setget(k, v, flags):
	    cmd("set %s %d 0 %d" % (k, flags, len(v)), v)
	    r = f.readline()
	    assert r == b"STORED\r\n", r
	    assert get([k]) == {k: v}, "value of %s differs" % k
	rnd = random.Random(5)
	sizes = [1, 2, 100, 1000, 4095, 4096, 65536, 100000, 524288]
	vals = {}
	for i in range(int(count)):
	    k = "k%d" % i
	    vals[k] = os.urandom(sizes[i] if i < len(sizes) else rnd.randint(1, 300000))
	    setget(k, vals[k], i)
	many = get(list(vals))
	assert many == vals, "multi-get differs"
	# the measure: small values, one set and one get at a time
	small = os.urandom(100)
	t0 = time.monotonic()
	for i in range(300):
	    setget("s%d" % i, small, 0)
	dt = time.monotonic() - t0
	cmd("quit")
	print("memcached: %d values (%d bytes) set and got back intact, %.0f ops/s"
	      % (len(vals), sum(map(len, vals.values())), 600 / dt))
	open(metric, "w").write("%.0f\n" % (600 / dt))
	EOF
	local rc=$?
	app_stop INT || rc=1
	[ $rc = 0 ] && grep -q 'got back intact' "$tmpdir/$label.client" || app_fail "$label"
}

# --- nginx --------------------------------------------------------------------
# app_nginx_start LABEL on|off: nginx on B with a minimal configuration in
# $tmpdir/LABEL.nginx (master_process on|off; "on" forks one worker after
# listen(): the pre-fork pattern), serving $tmpdir/www (a 10 MiB file and a
# small page).  app_nginx_stop: SIGQUIT, the graceful shutdown.
# APP_NGINX_DAEMON=on: nginx becomes a daemon (its pid in LABEL.nginx/
# nginx.pid), APP_NGINX_WORKERS: how many workers (1).
app_nginx_start() {
	local label=$1 master=$2 d=$tmpdir/$1.nginx
	APP_PORT=$(vm_port)
	rm -f "$tmpdir/$label.client"
	mkdir -p "$d" "$tmpdir/www"
	[ -f "$tmpdir/www/big" ] || head -c 10485760 /dev/urandom >"$tmpdir/www/big"
	[ -f "$tmpdir/www/small" ] || head -c 600 /dev/urandom >"$tmpdir/www/small"
	cat >"$d/nginx.conf" <<-EOF
	daemon ${APP_NGINX_DAEMON:-off};
	master_process $master;
	worker_processes ${APP_NGINX_WORKERS:-1};
	user root root;
	pid $d/nginx.pid;
	error_log $d/error.log warn;
	events { worker_connections 128; }
	http {
	    access_log off;
	    client_body_temp_path $d/body;
	    proxy_temp_path $d/proxy;
	    fastcgi_temp_path $d/fastcgi;
	    uwsgi_temp_path $d/uwsgi;
	    scgi_temp_path $d/scgi;
	    default_type application/octet-stream;
	    sendfile on;
	    keepalive_requests 100000;
	    server {
	        listen $HOST_B:$APP_PORT;
	        root $tmpdir/www;
	    }
	}
	EOF
	app_srv "$label" nginx -p "$d" -c "$d/nginx.conf" -e "$d/error.log"
	app_wait "$APP_PORT"
}

# app_curl LABEL: curl bound to A downloads the 10 MiB file; sha256 equal.
# Metric: MB/s of the download.
app_curl() {
	local label=$1 got
	case $RSOCKX_PRELOAD in
	*libasan*)
		# curl hangs in its second setlocale() under the ASan runtime
		# (tests/san/san.test), with or without rsockx: python's
		# client, the same request from A, the same speed line
		APP_CLI_ERR=/dev/null app_cli "$label.curl" "$PYTHON" -c 'import http.client, sys, time
c = http.client.HTTPConnection(sys.argv[2], int(sys.argv[3]), source_address=(sys.argv[1], 0))
t = time.monotonic()
c.request("GET", "/big")
r = c.getresponse()
n = 0
with open(sys.argv[4], "wb") as f:
    while True:
        b = r.read(1 << 16)
        if not b: break
        f.write(b); n += len(b)
print(n / (time.monotonic() - t))
sys.exit(r.status != 200)' $HOST_A $HOST_B $APP_PORT "$tmpdir/$label.got" ||
			return 1 ;;
	*)
		APP_CLI_ERR=/dev/null app_cli "$label.curl" curl -sS --interface $HOST_A \
			-o "$tmpdir/$label.got" -w '%{speed_download}\n' "http://$HOST_B:$APP_PORT/big" ||
			return 1 ;;
	esac
	got=$(sha256sum <"$tmpdir/$label.got")
	echo "curl: sha256 ${got%% *}" >>"$tmpdir/$label.client"
	awk '{ printf "%.1f\n", $1 / 1e6 }' "$tmpdir/$label.curl.client" >"$tmpdir/$label.metric"
	[ "$got" = "$(sha256sum <"$tmpdir/www/big")" ]
}

# app_wrk LABEL SECONDS: wrk (no bind option: B to B), 1 thread, 4
# connections, on the small page; requests must have completed with no
# non-2xx answer.  Its socket error count (read errors: read() said -1 or
# the connection ended early) goes to $tmpdir/LABEL.sockerr.  Metric:
# requests/s.
app_wrk() {
	local label=$1 secs=$2
	rm -f "$tmpdir/$label.wrk.client"
	app_cli "$label.wrk" wrk -t1 -c4 -d"${secs}s" "http://$HOST_B:$APP_PORT/small" ||
		return 1
	cat "$tmpdir/$label.wrk.client" >>"$tmpdir/$label.client"
	awk '/^Requests\/sec:/ { print $2 }' "$tmpdir/$label.wrk.client" >"$tmpdir/$label.metric"
	sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' \
		"$tmpdir/$label.wrk.client" | awk '{ print $1 + $2 + $3 + $4 }' >"$tmpdir/$label.sockerr"
	grep -Eq '^ +[0-9]+ requests in' "$tmpdir/$label.wrk.client" &&
		! grep -q 'Non-2xx' "$tmpdir/$label.wrk.client"
}

# --- nc.openbsd -----------------------------------------------------------------
# app_nc LABEL up|down BYTES: a file of BYTES random bytes A -> B (up: the
# client sends) or B -> A (down: the server sends first, so under rsockx it
# needs the HELLO grace, see apps-net.sh).  Metric: none.
app_nc() {
	local label=$1 dir=$2 n=$3 port
	port=$(vm_port)
	rm -f "$tmpdir/$label.client" "$tmpdir/$label.out"
	head -c "$n" /dev/urandom >"$tmpdir/$label.in"
	if [ "$dir" = up ]; then
		app_srv "$label" sh -c 'exec nc.openbsd -l -s "$1" -p "$2" >"$3"' sh \
			$HOST_B "$port" "$tmpdir/$label.out"
		app_wait "$port" || { app_stop KILL; app_fail "$label"; return 1; }
		app_cli "$label" nc.openbsd -N -s $HOST_A $HOST_B "$port" <"$tmpdir/$label.in"
	else
		app_srv "$label" sh -c 'exec nc.openbsd -N -l -s "$1" -p "$2" <"$3"' sh \
			$HOST_B "$port" "$tmpdir/$label.in"
		app_wait "$port" || { app_stop KILL; app_fail "$label"; return 1; }
		app_cli "$label" sh -c 'exec nc.openbsd -d -s "$1" "$2" "$3" >"$4"' sh \
			$HOST_A $HOST_B "$port" "$tmpdir/$label.out"
	fi
	local rc=$?
	reap "$APP_SPID" 20 || rc=1
	[ $rc = 0 ] && cmp -s "$tmpdir/$label.in" "$tmpdir/$label.out" || app_fail "$label"
}

# --- sockperf -------------------------------------------------------------------
# app_sockperf LABEL pp|tp SECONDS: sockperf server on B over TCP, the
# client bound to A runs ping-pong (pp) or throughput (tp); its summary must
# parse.  Metric: pp: average latency in usec; tp: MBps.
app_sockperf() {
	local label=$1 what=$2 secs=$3 port
	port=$(vm_port)
	rm -f "$tmpdir/$label.client"
	app_srv "$label" sockperf sr --tcp -i $HOST_B -p "$port"
	app_wait "$port" || { app_stop KILL; app_fail "$label"; return 1; }
	app_cli "$label" sockperf "$what" --tcp -i $HOST_B -p "$port" --client_ip $HOST_A \
		-t "$secs" -m 64
	local rc=$?
	app_stop INT 20 || rc=1
	if [ "$what" = pp ]; then
		sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$tmpdir/$label.client"
	else
		sed -n 's/.*Summary: BandWidth is \([0-9.]*\) MBps.*/\1/p' "$tmpdir/$label.client"
	fi >"$tmpdir/$label.metric"
	[ $rc = 0 ] && [ -s "$tmpdir/$label.metric" ] &&
		awk '$1 + 0 > 0 { f = 1 } END { exit !f }' "$tmpdir/$label.metric" ||
		app_fail "$label"
}

# --- assertions of the VM tests (APPS_MODE=rsockx) ------------------------------
# app_upgraded LABEL CONNS BYTES: three TAP points: each side counted at
# least CONNS upgraded connections, at least BYTES application bytes went
# over RDMA (both sides' rdma_rx_bytes), and no upgraded connection broke.
app_upgraded() {
	local label=$1 n=$2 bytes=$3 s c b
	s=$(stat_of "$tmpdir/$label.sstats" upgraded)
	c=$(stat_of "$tmpdir/$label.cstats" upgraded)
	b=$(app_rdma_bytes "$label")
	check "$label: both ends upgraded >= $n connections (server $s, client $c)" \
		test "$s" -ge "$n" -a "$c" -ge "$n"
	check "$label: >= $bytes bytes over RDMA ($b)" test "$b" -ge "$bytes"
	# where connections stayed TCP, why (the clients' fallback counters)
	diag "$label: client fallbacks: $(tr ' ' '\n' <"$tmpdir/$label.cstats" 2>/dev/null |
		grep -E '^(fallback_|probe_)' | grep -v '=0$' | tr '\n' ' ')"
	check "$label: no upgraded connection broke" test \
		"$(stat_of "$tmpdir/$label.sstats" conn_errors)$(stat_of "$tmpdir/$label.cstats" conn_errors)" = 00
}
