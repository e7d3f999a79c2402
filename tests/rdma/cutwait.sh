#!/bin/bash
# The server's wait for a CUTOVER ends (issue 20 item 2; conn.h says how).
# Both servers run with RSOCKX_TEST_CUT_WAIT_MS=1000 (30 s otherwise) and
# RSOCKX_QP_TIMEOUT_MS=300, so that a ping to a QP that is gone fails within
# about 5 s.
#   hello-only: tests/vm/evil sends a HELLO, takes the ACK, destroys its
#          QP and never cuts over.  The server must go back to plain TCP
#          and free its ring (fallback_no_cutover; before, it kept both as
#          long as the TCP connection lived): 64 bytes sent over TCP 8 s
#          later come back over TCP, and an honest client is served after.
#   asleep: an honest client whose out-of-band answer comes while its
#          program sleeps in select() for 5 s (the server answers only
#          then): its QP is ready meanwhile, so the server's ping lands
#          and the server waits on; the connection then cuts over and
#          streams over RDMA, nothing broken.
#   shut:  tests/vm/evil takes the ACK, destroys its QP and at once sends
#          64 bytes over TCP and its end (SHUT_WR); the server's poll()
#          sees the end before any CUTOVER and pings, which fails: the 64
#          bytes it sends back after the end must go over TCP, not be
#          answered by a reset (before: ECONNRESET, 16 of 1,200
#          connections of tests/rdma/cutover.sh under load).
# vm-exclusive: yes
# vm-timeout: 200
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
EVIL=${EVIL:-$abs_top_builddir/tests/vm/evil}
[ -x "$EVIL" ] || bail "$EVIL not built (make check builds it)"
py=$abs_top_srcdir/tests/rdma/evil.py
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000
sv=(env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= RSOCKX_LOG=info
    RSOCKX_TEST_CUT_WAIT_MS=1000 RSOCKX_QP_TIMEOUT_MS=300)

# line FILE PATTERN: FILE has a line matching PATTERN (grep -E)
line() { grep -Eq "$2" "$1"; }

# hello-only ---------------------------------------------------------------------------
d=$tmpdir/hello
mkdir -p "$d"
port=$(vm_port)
timeout 120 "${sv[@]}" RSOCKX_STATS_FILE="$d/sstats" \
	"$PYTHON" "$py" server $HOST_B "$port" 2 >"$d/server" 2>&1 &
spid=$!
wait_listen "$port" 400 || bail "hello-only: server did not listen"
timeout 60 "$EVIL" -d $DEV_A -g $GID_INDEX -c $HOST_B -p "$port" \
	-b $HOST_A -m nocut >"$d/evil" 2>&1
erc=$?
s=$(rxe_snap)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_STATS_FILE="$d/cstats" \
	"$PYTHON" "$py" client $HOST_B "$port" $HOST_A 1000000 >"$d/honest" 2>&1
hrc=$?
reap $spid 60
src=$?
sed 's/^/  evil: /' "$d/evil" >&2
sed 's/^/  server: /' "$d/server" >&2
sed 's/^/  honest: /' "$d/honest" >&2
check "hello-only: the server ACKed the HELLO ($erc)" line "$d/evil" '^acked qpn='
check "hello-only: the server went back to plain TCP, its ring freed" \
	line "$d/server" 'the peer never cut over and its QP is gone: plain TCP'
check "hello-only: counted (fallback_no_cutover $(stat_of "$d/sstats" fallback_no_cutover), conn_errors $(stat_of "$d/sstats" conn_errors))" \
	test "$(stat_of "$d/sstats" fallback_no_cutover)" = 1 -a \
	"$(stat_of "$d/sstats" conn_errors)" = 0
line "$d/evil" '^nocut echo ok$' && echoed=1 || echoed=0
check "hello-only: 64 bytes over TCP afterwards, echoed over TCP" \
	test $erc = 0 -a $echoed = 1
check "hello-only: the server's application read them, then the end" \
	line "$d/server" '^conn 1: eof bytes=64 head=6e6e6e6e6e6e6e6e$'
line "$d/honest" '^honest ok' && echoed=1 || echoed=0
check "hello-only: an honest client afterwards: every byte echoed ($hrc, $src)" \
	test $hrc = 0 -a $src = 0 -a $echoed = 1
check "hello-only: ... upgraded, over RDMA" \
	test "$(stat_of "$d/cstats" upgraded)" = 1 -a \
	"$(stat_of "$d/cstats" rdma_rx_bytes)" -gt 0
rdma_crossed "hello-only: rxe0 and rxe1 carried it" "$s" 10

# asleep -------------------------------------------------------------------------------
d=$tmpdir/asleep
mkdir -p "$d"
port=$(vm_port)
timeout 60 "${sv[@]}" RSOCKX_STATS_FILE="$d/sstats" "$PYTHON" -c '
import socket, sys, time
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
first = c.recv(10)
time.sleep(5)                    # the client sleeps in select() meanwhile
c.sendall(first)
n = 0
while True:                      # then an echo
    b = c.recv(65536)
    if not b:
        break
    c.sendall(b)
    n += len(b)
print("server: echoed %d" % n)' $HOST_B $port >"$d/server" 2>&1 &
spid=$!
wait_listen "$port" 400 || bail "asleep: server did not listen"
s=$(rxe_snap)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= RSOCKX_LOG=info \
	RSOCKX_STATS_FILE="$d/cstats" PYTHONPATH="${py%/*}" "$PYTHON" -c '
import select, socket, sys, time
from evil import echoed
s = socket.create_connection((sys.argv[1], int(sys.argv[2])),
                             source_address=(sys.argv[3], 0))
s.sendall(b"0123456789")
t = time.monotonic()
r, _, _ = select.select([s], [], [], 20)
first = s.recv(10)
print("client: select slept %.1f s, got %r" % (time.monotonic() - t, first))
ok = echoed(s, 1000000)
print("client: %s" % ("ok" if first == b"0123456789" and ok else "WRONG"))' \
	$HOST_B $port $HOST_A >"$d/client" 2>&1
crc=$?
reap $spid 30
src=$?
sed 's/^/  /' "$d/client" "$d/server" >&2
line "$d/client" '^client: ok$' && echoed=1 || echoed=0
check "asleep: every byte right ($crc, $src)" \
	test $crc = 0 -a $src = 0 -a $echoed = 1
check "asleep: the client slept in select() past the server's deadline" \
	line "$d/client" 'select slept [4-9]\.'
check "asleep: the server's ping landed on the client's QP, and it waited on" \
	line "$d/server" "no CUTOVER yet, but the client's QP answers: waiting on"
check "asleep: its answer waited for the program (oob_deferred $(stat_of "$d/cstats" oob_deferred))" \
	test "$(stat_of "$d/cstats" oob_deferred)" -ge 1
check "asleep: upgraded on both ends, over RDMA" \
	test "$(stat_of "$d/cstats" upgraded)" = 1 -a \
	"$(stat_of "$d/sstats" upgraded)" = 1 -a \
	"$(stat_of "$d/cstats" rdma_rx_bytes)" -gt 0 -a \
	"$(stat_of "$d/sstats" rdma_rx_bytes)" -gt 0
check "asleep: the server waited on (fallback_no_cutover $(stat_of "$d/sstats" fallback_no_cutover), conn_errors $(stat_of "$d/sstats" conn_errors)/$(stat_of "$d/cstats" conn_errors))" \
	test "$(stat_of "$d/sstats" fallback_no_cutover)" = 0 -a \
	"$(stat_of "$d/sstats" conn_errors)" = 0 -a \
	"$(stat_of "$d/cstats" conn_errors)" = 0
rdma_crossed "asleep: rxe0 and rxe1 carried it" "$s" 10

# shut ---------------------------------------------------------------------------------
d=$tmpdir/shut
mkdir -p "$d"
port=$(vm_port)
timeout 60 "${sv[@]}" RSOCKX_STATS_FILE="$d/sstats" "$PYTHON" -c '
import select, socket, sys, time
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
p = select.poll()
p.register(c, select.POLLIN | select.POLLRDHUP)
got = b""
while True:                      # the client ends its stream
    p.poll(20000)
    b = c.recv(65536)
    if not b:
        break
    got += b
time.sleep(8)                    # the ping to its QP fails meanwhile
try:
    c.sendall(got)
    c.close()
    print("server: sent %d after the end" % len(got))
except OSError as e:
    print("server: send after the end: %s" % e)' $HOST_B $port >"$d/server" 2>&1 &
spid=$!
wait_listen "$port" 400 || bail "shut: server did not listen"
timeout 60 "$EVIL" -d $DEV_A -g $GID_INDEX -c $HOST_B -p "$port" \
	-b $HOST_A -m nocutshut >"$d/evil" 2>&1
erc=$?
reap $spid 30
src=$?
sed 's/^/  /' "$d/evil" "$d/server" >&2
check "shut: the server's 64 bytes after the client's end came over TCP ($erc, $src)" \
	line "$d/evil" '^nocutshut echo ok$'
check "shut: ... sent without an error" \
	line "$d/server" '^server: sent 64 after the end$'
check "shut: the server's ping found no QP: plain TCP, no reset" \
	line "$d/server" 'the peer never cut over and its QP is gone: plain TCP'
check "shut: counted (fallback_no_cutover $(stat_of "$d/sstats" fallback_no_cutover), conn_errors $(stat_of "$d/sstats" conn_errors))" \
	test "$(stat_of "$d/sstats" fallback_no_cutover)" = 1 -a \
	"$(stat_of "$d/sstats" conn_errors)" = 0
done_testing
