#!/bin/bash
# fclose() of a stream that fdopen() made of an upgraded socket: the
# socket is closed inside libc, past close().  The number, once reused by
# a file the program opens next, must read the file, never the old
# connection's ring (issue 20 item 8).  The client (python, through
# ctypes: fdopen and fclose of libc, the latter interposed) reads the
# first bytes of an upgraded stream whose server keeps sending, fcloses it
# and opens a file, which gets the same number.
# vm-exclusive: no
# vm-timeout: 120
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000
printf 'the file, not the ring\n' >"$tmpdir/file"
port=$(vm_port)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
	RSOCKX_STATS_FILE="$tmpdir/sstats" "$PYTHON" -c '
import socket, sys
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
c.recv(10)
try:
    for _ in range(40):
        c.sendall(b"R" * 65536)
except OSError:
    pass' $HOST_B $port >"$tmpdir/server" 2>&1 &
spid=$!
wait_listen $port || bail "server did not listen"
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_STATS_FILE="$tmpdir/cstats" "$PYTHON" -c '
import ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
s = socket.create_connection((sys.argv[1], int(sys.argv[2])),
                             source_address=(sys.argv[3], 0))
s.sendall(b"hello")
got = 0
while got < 300000:                  # well past the cut-over
    got += len(s.recv(65536))
time.sleep(0.5)                      # more of the stream waits in the ring
fd = s.detach()
f = libc.fdopen(fd, b"r+")
print("fclose", libc.fclose(f))
fd2 = os.open(sys.argv[4], os.O_RDONLY)
print("same number", fd2 == fd)
print("read", os.read(fd2, 100))' $HOST_B $port $HOST_A "$tmpdir/file" \
	>"$tmpdir/client" 2>&1
rc=$?
reap $spid 30
sed 's/^/  /' "$tmpdir/client" >&2
check "the client ended well ($rc)" test $rc = 0
check "the connection was upgraded and read over RDMA" \
	test "$(stat_of $tmpdir/cstats upgraded)" = 1 -a \
	"$(stat_of $tmpdir/cstats rdma_rx_bytes)" -gt 0
check "fclose returned 0" grep -qx "fclose 0" "$tmpdir/client"
check "the file took the socket's number" grep -qx "same number True" "$tmpdir/client"
check "reading that number reads the file" \
	grep -qxF "read b'the file, not the ring\\n'" "$tmpdir/client"
done_testing
