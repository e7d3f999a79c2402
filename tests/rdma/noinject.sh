#!/bin/bash
# A server without rsockx never sees a byte that the client program did not
# write, whatever the client's rules say: no configuration (probe), a rule
# "rdma connect * *", RSOCKX_DEFAULT=rdma, "tcp connect * *", and
# RSOCKX_INBAND=0 (never an in-band HELLO) alone and with the rdma rule.
# The server is a plain python3 program on B that records every byte of
# its connection; the client is nc.openbsd under librsockx, bound to A.
# Twice per setting: the client sends a file (paced, so that the probe's
# answer comes while it sends) and the server answers nothing; then the
# server speaks first (also paced) and the client only reads.  The client
# must count no HELLO, no upgrade and no byte over RDMA.  Only the
# library's counters are asserted, not the rxe ones (the probe itself is
# RDMA CM traffic): no need to run alone.
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
command -v nc.openbsd >/dev/null || skip_all "nc.openbsd not installed"

head -c 1048576 /dev/urandom >"$tmpdir/up"
head -c 786432 /dev/urandom >"$tmpdir/down"

# plain_srv LABEL sink|first: the non-rsockx server, one connection.
# first: it sends $tmpdir/down in 16 KiB pieces 20 ms apart, then shuts
# its side down.  Both: everything received until EOF goes to
# $tmpdir/LABEL.rec.  Port in SRV_PORT, pid in SRV_PID.
plain_srv() {
	SRV_PORT=$(vm_port)
	rm -f "$tmpdir/$1.rec"
	timeout 60 "$PYTHON" - $HOST_B "$SRV_PORT" "$2" "$tmpdir/down" "$tmpdir/$1.rec" \
		>"$tmpdir/$1.server" 2>&1 <<-'EOF' &
	import socket, sys, time
	host, port, mode, down, rec = sys.argv[1:6]
	ls = socket.socket()
	ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((host, int(port)))
	ls.listen(1)
	c, peer = ls.accept()
	if mode == "first":
	    data = open(down, "rb").read()
	    for off in range(0, len(data), 16384):
	        c.sendall(data[off:off + 16384])
	        time.sleep(0.02)
	    c.shutdown(socket.SHUT_WR)
	got = bytearray()
	while True:
	    b = c.recv(65536)
	    if not b:
	        break
	    got += b
	open(rec, "wb").write(got)
	print("server: %s from %s, %d bytes received" % (mode, peer[0], len(got)))
	EOF
	SRV_PID=$!
	wait_listen "$SRV_PORT"
}

# cli LABEL [VAR=value...] CMD...: CMD under the library with those
# variables (env(1) tells them from CMD); counters in $tmpdir/LABEL.cstats.
cli() {
	local l=$1
	shift
	rm -f "$tmpdir/$l.cstats"
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$tmpdir/$l.cstats" "$@"
}

# same RC FILE1 FILE2: the programs ended well (RC 0) and the files have
# equal length and sha256 (the sizes on stderr).
same() {
	local a b
	a="$(stat -c %s "$2" 2>/dev/null) $(sha256sum <"$2" 2>/dev/null)"
	b="$(stat -c %s "$3" 2>/dev/null) $(sha256sum <"$3" 2>/dev/null)"
	echo "  ${2##*/}: ${a%% *} bytes, ${3##*/}: ${b%% *} bytes" >&2
	[ "$1" = 0 ] && [ "$a" = "$b" ]
}

# clean LABEL: three TAP points on the client's counters.
clean() {
	local f=$tmpdir/$1.cstats
	check "$1: no HELLO sent (hello_sent=$(stat_of "$f" hello_sent))" \
		test "$(stat_of "$f" hello_sent)" = 0
	check "$1: nothing upgraded (upgraded=$(stat_of "$f" upgraded))" \
		test "$(stat_of "$f" upgraded)" = 0
	check "$1: no byte over RDMA (rdma_tx_bytes=$(stat_of "$f" rdma_tx_bytes), rdma_rx_bytes=$(stat_of "$f" rdma_rx_bytes))" \
		test "$(stat_of "$f" rdma_tx_bytes)$(stat_of "$f" rdma_rx_bytes)" = 00
	diag "$1: $(tr ' ' '\n' <"$f" | grep -E '^(probe|oob_|fallback|hello|midstream)' |
		grep -v '=0$' | tr '\n' ' ')"
}

# setting LABEL ENV...: both runs under one client setting.
setting() {
	local l=$1 rc
	shift
	# the client sends, paced; nc -N shuts its side down at the end
	plain_srv "$l-up" sink
	pace "$tmpdir/up" 16384 20 |
		cli "$l-up" "$@" nc.openbsd -N -s $HOST_A $HOST_B "$SRV_PORT" >/dev/null
	rc=$?
	reap "$SRV_PID" 30 || rc=1
	cat "$tmpdir/$l-up.server" >&2
	check "$l-up: the server received exactly the client's 1 MiB (exit $rc)" \
		same $rc "$tmpdir/up" "$tmpdir/$l-up.rec"
	clean "$l-up"

	# the server speaks first; the client writes nothing (-d)
	plain_srv "$l-down" first
	cli "$l-down" "$@" nc.openbsd -d -s $HOST_A $HOST_B "$SRV_PORT" >"$tmpdir/$l-down.got"
	rc=$?
	reap "$SRV_PID" 30 || rc=1
	cat "$tmpdir/$l-down.server" >&2
	check "$l-down: the client read exactly the server's 768 KiB (exit $rc)" \
		same $rc "$tmpdir/down" "$tmpdir/$l-down.got"
	check "$l-down: the server received nothing ($(stat -c %s "$tmpdir/$l-down.rec" 2>/dev/null) bytes)" \
		test "$(stat -c %s "$tmpdir/$l-down.rec" 2>/dev/null)" = 0
	clean "$l-down"
}

setting default RSOCKX_CONF=
setting rule-rdma RSOCKX_CONF= 'RSOCKX_RULES=rdma connect * *'
setting default-rdma RSOCKX_CONF= RSOCKX_DEFAULT=rdma
setting rule-tcp RSOCKX_CONF= 'RSOCKX_RULES=tcp connect * *'
setting inband-0 RSOCKX_CONF= RSOCKX_INBAND=0
setting inband-0-rdma RSOCKX_CONF= RSOCKX_INBAND=0 'RSOCKX_RULES=rdma connect * *'
done_testing
