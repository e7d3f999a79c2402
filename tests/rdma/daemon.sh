#!/bin/bash
# Servers that become daemons after listen() get RDMA like the others.  The
# process that answers probes for a port holds an RDMA CM id of its own (the
# responder); a daemon's parent exits right after fork(), and its child,
# which keeps the listener, takes the port's responder over (src/probe.c,
# rsx_probe_adopt).  nginx with "daemon on" and two workers (as Debian's
# unit runs it: the master forks its workers once its parent is gone);
# python servers that listen, then call daemon(3), or fork and let the
# parent exit (once, or twice with setsid() between), and accept in a
# blocking accept(), which they are in before their parent has exited;
# and python servers whose listener comes across exec (socket activation,
# a server that executes itself).  No configuration on either end (probe
# mode): each
# client's one connection moves to RDMA mid-stream, out of band.  Checked:
# the bytes (sha256, cmp), the daemon answered for the port
# (probe_adopted), both ends upgraded every connection, bytes came over
# RDMA, the rxe counters moved.
# vm-exclusive: yes
# vm-timeout: 240
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
APPS_MODE=probe
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"
# as in midstream.sh: the first probe of a process loads the RDMA libraries
export RSOCKX_PROBE_TIMEOUT_MS=${RSOCKX_PROBE_TIMEOUT_MS:-10000}
DAEMON_PY=$abs_top_srcdir/tests/rdma/daemon.py

# gone PID [SECONDS]: a process that is not our child has exited.
gone() {
	local i
	for ((i = 0; i < ${2:-30} * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null
	return 1
}

# adopted LABEL N MIN: the daemon answered for its port, N connections
# upgraded at both ends, >= MIN bytes reached the clients over RDMA.
adopted() {
	local l=$1 n=$2 min=$3 s=$tmpdir/$1.sstats c=$tmpdir/$1.cstats e
	check "$l: the daemon took the responder over (probe_adopted $(stat_of "$s" probe_adopted))" \
		test "$(stat_of "$s" probe_adopted)" -ge 1
	check "$l: $n connections upgraded at both ends (server $(stat_of "$s" upgraded), client $(stat_of "$c" upgraded))" \
		test "$(stat_of "$s" upgraded)" -ge "$n" -a "$(stat_of "$c" upgraded)" -ge "$n"
	check "$l: >= $min bytes reached the clients over RDMA ($(stat_of "$c" rdma_rx_bytes))" \
		test "$(stat_of "$c" rdma_rx_bytes)" -ge "$min"
	check "$l: no upgraded connection broke" \
		test "$(stat_of "$s" conn_errors)$(stat_of "$c" conn_errors)" = 00
	for e in c s; do
		diag "$l ${e}stats: $(tr ' ' '\n' <"$tmpdir/$l.${e}stats" 2>/dev/null |
			grep -E '^(probe|oob_|midstream|fallback|upgraded|rdma_rx|conn_err)' |
			grep -v '=0$' | tr '\n' ' ')"
	done
}

# --- nginx, daemon on, two workers -------------------------------------------
# Two requests for the 10 MiB file, curl reading at most 2.5 MB/s.
if command -v nginx >/dev/null && command -v curl >/dev/null; then
	l=nginx
	s=$(rxe_snap)
	if APP_NGINX_DAEMON=on APP_NGINX_WORKERS=2 app_nginx_start $l on &&
		wait_filled "$tmpdir/$l.nginx/nginx.pid"; then
		pid=$(cat "$tmpdir/$l.nginx/nginx.pid")
		for i in 1 2; do
			APP_CLI_ERR=$tmpdir/$l.err app_cli "$l.$i" curl -sS --interface $HOST_A \
				--limit-rate 2500K -o "$tmpdir/$l.$i.got" "http://$HOST_B:$APP_PORT/big"
			check "nginx: request $i, the 10 MiB file, sha256 equal" \
				test "$(sha256sum <"$tmpdir/$l.$i.got")" = "$(sha256sum <"$tmpdir/www/big")"
		done
		kill -QUIT "$pid"
		check "nginx: the daemon shuts down gracefully (SIGQUIT)" gone "$pid"
	else
		not_ok "nginx: the daemon listens"
		cat "$tmpdir/$l.nginx/error.log" >&2
	fi
	adopted $l 2 4194304
	rdma_crossed "nginx: rxe0 and rxe1 both sent and received" "$s" 100
else
	skip "nginx or curl not installed"
fi

# --- python: daemon(3), fork, double fork; listeners handed on by exec -------
# One connection each, 3 MiB at 1.6 MB/s.  activate: a socket activator
# without the library (as systemd) executes the server, under it, with the
# listener as descriptor 3 and LISTEN_FDS; reexec: the server executes
# itself with its listener (RSOCKX_INHERIT).  Before, nobody answered for
# such a port after the exec: 0 bytes over RDMA.
head -c 3145728 /dev/urandom >"$tmpdir/blob"
for how in daemon fork double activate reexec; do
	l=py-$how
	s=$(rxe_snap)
	port=$(vm_port)
	rm -f "$tmpdir/$l.pid"
	noprel=()
	[ $how = activate ] &&
		noprel=(env -u LD_PRELOAD DAEMON_PRELOAD="$RSOCKX_PRELOAD")
	app_srv $l "${noprel[@]}" "$PYTHON" "$DAEMON_PY" serve $how $HOST_B "$port" \
		"$tmpdir/blob" "$tmpdir/$l.pid" 1
	if wait_filled "$tmpdir/$l.pid" && app_wait "$port"; then
		pid=$(cat "$tmpdir/$l.pid")
		app_cli "$l" "$PYTHON" "$DAEMON_PY" get $HOST_B "$port" $HOST_A "$tmpdir/$l.out"
		check "$l: 3 MiB, equal" cmp "$tmpdir/blob" "$tmpdir/$l.out"
		check "$l: the daemon served it and exited" gone "$pid"
	else
		not_ok "$l: the daemon listens and answers probes"
		app_fail $l
		[ -s "$tmpdir/$l.pid" ] && kill -9 "$(cat "$tmpdir/$l.pid")"
	fi
	adopted $l 1 1048576
	rdma_crossed "$l: rxe0 and rxe1 both sent and received" "$s" 100
done
done_testing
