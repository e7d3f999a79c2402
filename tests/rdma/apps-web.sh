#!/bin/bash
# Real programs over RDMA (issue 5), the web: nginx (epoll, sendfile,
# writev) serving a 10 MiB file to curl (bound to A; sha256 compared) and a
# small page to wrk (2 s, 4 connections; no bind option, so B to B), once
# as a single process (master_process off) and once with a master that
# forks its worker after listen() (the pre-fork pattern: the worker
# accepts, so the upgrade happens in the worker).  Both ends under
# librsockx, the clients' rules say rdma.
# vm-exclusive: yes
# vm-timeout: 180
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
command -v nginx >/dev/null || skip_all "nginx not installed"
APPS_MODE=rsockx
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"

for master in off on; do
	l=nginx-master-$master
	s=$(rxe_snap)
	if app_nginx_start $l $master; then
		check "$l: curl got the 10 MiB file, sha256 equal" app_curl $l
		diag "$l: curl $(cat "$tmpdir/$l.metric") MB/s"
	else
		not_ok "$l: nginx listens"
	fi
	check "$l: graceful shutdown (SIGQUIT)" app_stop QUIT
	# the server sends over TCP until the client's CUTOVER is in: how
	# much of the file goes that way depends on timing
	app_upgraded $l 1 1048576
	rdma_crossed "$l: rxe0 and rxe1 both sent and received" "$s" 100

	if command -v wrk >/dev/null; then
		l=nginx-wrk-master-$master
		s=$(rxe_snap)
		if app_nginx_start $l $master; then
			check "$l: wrk 2 s, requests done, no non-2xx answer" app_wrk $l 2
			diag "$l: $(cat "$tmpdir/$l.metric") requests/s"
			# wrk counts a read() of -1 (EAGAIN too) as a read
			# error: the answer to its HELLO must not wake it
			e=$(cat "$tmpdir/$l.sockerr" 2>/dev/null)
			check "$l: no socket errors (${e:-0})" test "${e:-0}" = 0
		else
			not_ok "$l: nginx listens"
		fi
		check "$l: graceful shutdown (SIGQUIT)" app_stop QUIT
		app_upgraded $l 4 10000
		rdma_only_dev "$l: rxe1 carried it (B to B)" "$s" rxe1
	else
		skip "wrk not installed"
	fi
done
done_testing
