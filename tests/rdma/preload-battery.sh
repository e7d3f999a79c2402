#!/bin/bash
# librsockx.so in /etc/ld.so.preload (issue 7): a battery of ordinary
# programs, unchanged, run once plain and once with the library in every
# process through the system-wide preload file: shell scripts, coreutils,
# python3 (a TCP pair on loopback too), iproute2, curl and nc against local
# servers, the project's own test programs.  Outputs and exit statuses must
# be equal, nothing may crash, and two preloaded processes on A and B must
# get their TCP connection upgraded.
# The guest's /etc is the initramfs' (writable) but the suite shares it:
# the preloaded run happens in a mount namespace (unshare -m) where a copy
# of /etc holding ld.so.preload is bind-mounted over /etc.
# vm-exclusive: yes
# vm-timeout: 480
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"

LOAD=$abs_top_builddir/tests/vm/rsx-load

# --- the battery: battery OUTDIR; each case NAME leaves OUTDIR/NAME.{out,rc}
battery() {
	local o=$1 port web route
	mkdir -p "$o"
	case_() { # NAME CMD...: stdout and exit status kept, stderr apart
		local name=$1
		shift
		"$@" >"$o/$name.out" 2>"$o/$name.err" </dev/null
		echo $? >"$o/$name.rc"
	}
	case_ maps grep -c "$(basename "$RSOCKX_LIB")" /proc/self/maps
	case_ sh sh -c 'x=0; for i in 1 2 3 4 5; do x=$((x + i)); echo "$i $x"; done; echo "$(echo sub)" | tr a-z A-Z; exit 3'
	case_ bash bash -c 'set -o pipefail; a=(one two three); printf "%s\n" "${a[@]}" | sort -r; read -r x < <(echo procsubst); echo "$x"; cat <<-E
	heredoc $((6 * 7))
	E
	( exit 5 ) || echo "subshell $?"; f() { local y=$1; echo "f $y"; }; f arg; wait'
	case_ ls ls -l --time-style=+%s "$abs_top_srcdir/src"
	case_ cat-sort sh -c "cat '$abs_top_srcdir'/src/*.c | sort | uniq -c | sort -rn | head -20"
	case_ sha256sum sh -c "sha256sum '$abs_top_srcdir'/src/*.h"
	case_ dd sh -c 'dd if=/dev/zero bs=65536 count=64 2>/dev/null | tr "\0" x | sha256sum'
	case_ dd-file sh -c "dd if='$RSOCKX_LIB' bs=4096 2>/dev/null | sha256sum"
	case_ seq-sort sh -c 'seq 1 200000 | sort -rn | head -3; seq 1 50000 | sha256sum'
	case_ coreutils sh -c 'echo a:b:c | cut -d: -f2; printf "%05d\n" 42; basename /x/y/z; expr 6 \* 7; wc -c </etc/passwd; env -i A=1 env; id -u; true; false; echo $?'
	case_ tar-gzip sh -c "tar -cf - -C '$abs_top_srcdir/src' --sort=name --mtime=@0 --owner=0 --group=0 . | gzip -n | sha256sum"
	case_ find sh -c "find '$abs_top_srcdir/tests/unit' -name '*.c' | sort"
	case_ python python3 -c 'import hashlib, json, subprocess, os
print(sum(range(10**5)))
print(json.dumps({"a": [1, 2, 3]}, sort_keys=True))
print(hashlib.sha256(b"rsockx" * 1000).hexdigest())
print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, b"forked"); os._exit(0)
os.wait(); print(os.read(r, 6).decode())'
	case_ python-tcp python3 -c 'import socket, threading, hashlib
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def serve():
    c, _ = srv.accept()
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
t = threading.Thread(target=serve); t.start()
c = socket.create_connection(srv.getsockname())
data = bytes(range(256)) * 4096
got = bytearray()
for i in range(0, len(data), 32768):
    c.sendall(data[i:i + 32768])
    while len(got) < i + 32768: got += c.recv(65536)
c.shutdown(socket.SHUT_WR); assert c.recv(1) == b""
c.close(); t.join()
print(len(got), hashlib.sha256(got).hexdigest(), got == data)'
	# ip route's print_route() copies with an overlapping strncpy, which
	# the ASan runtime reports (iproute2 6.1): not under it
	route="; ip route show table 10"
	[ -n "${BATTERY_ASAN:-}" ] && route=
	case_ ip-addr sh -c "ip -br addr show dev $NETDEV_A; ip -br link show dev $NETDEV_B | awk '{print \$1, \$2}'$route"
	case_ ss-listen sh -c 'ss -H -ltn | wc -l; ss -H -lx | wc -l >/dev/null; echo done'
	case_ rdma-tool sh -c 'rdma link show | sed "s/ state .*//"'
	# curl and nc against local servers (started in this run, so preloaded too)
	port=$(vm_port)
	mkdir -p "$o/www"
	seq 1 100000 >"$o/www/file.txt"
	python3 -m http.server -b 127.0.0.1 -d "$o/www" "$port" >/dev/null 2>&1 &
	web=$!
	wait_listen "$port"
	# curl hangs in its second setlocale() under the ASan runtime, with or
	# without rsockx: python's client there (tests/san/san.test)
	if [ -n "${BATTERY_ASAN:-}" ]; then
		case_ curl python3 -c 'import hashlib, sys, urllib.request, urllib.error
u = "http://127.0.0.1:%s/" % sys.argv[1]
print(hashlib.sha256(urllib.request.urlopen(u + "file.txt").read()).hexdigest() + "  -")
try:
    urllib.request.urlopen(u + "nothing")
except urllib.error.HTTPError as e:
    print(e.code)' "$port"
	else
		case_ curl sh -c "curl -sS http://127.0.0.1:$port/file.txt | sha256sum; curl -sS -o /dev/null -w '%{http_code}\n' http://127.0.0.1:$port/nothing"
	fi
	kill $web
	wait $web 2>/dev/null
	port=$(vm_port)
	nc -l 127.0.0.1 "$port" >"$o/nc.recv" &
	web=$!
	wait_listen "$port"
	case_ nc sh -c "seq 1 20000 | nc -N 127.0.0.1 $port; echo nc exit \$?"
	wait $web
	case_ nc-recv sha256sum <"$o/nc.recv"
	# the project's programs, on loopback
	case_ xfer sh -c "p=\$(python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])')
		'$XFER' server -b 127.0.0.1 -p \$p -r '$o/xfer.ready' >'$o/xfer.srv' &
		while [ ! -e '$o/xfer.ready' ]; do sleep 0.05; done
		'$XFER' client -c 127.0.0.1 -p \$p -n 300000 | grep -v preloaded; wait \$!; grep -v preloaded '$o/xfer.srv'"
	case_ rsx-load sh -c "'$LOAD' server -l 127.0.0.1 -p 31999 -r '$o/load.ready' >/dev/null & s=\$!
		while [ ! -e '$o/load.ready' ]; do sleep 0.05; done
		'$LOAD' hold -c 127.0.0.1 -p 31999 -n 30 | grep -v '^setup:\|^workload:'; kill \$s; wait \$s"
	return 0
}
if [ "${1:-}" = --battery ]; then
	battery "$2"
	exit 0
fi

in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
[ -f "$RSOCKX_LIB" ] || bail "$RSOCKX_LIB not built"
[ -x "$XFER" ] && [ -x "$LOAD" ] || bail "test programs not built (make check builds them)"
command -v unshare >/dev/null || skip_all "no unshare"
unset LD_PRELOAD
lib=$(basename "$RSOCKX_LIB")

# /etc as the preloaded processes see it.  Under the sanitizers
# (tests/san/san.test: RSOCKX_PRELOAD is the ASan runtime, then the
# library) the runtime must be the first library of every process: it goes
# into the file before the library, and both runs of the battery use
# python's HTTP client instead of curl.
cp -a /etc "$tmpdir/etc"
case $RSOCKX_PRELOAD in
*libasan*)
	export BATTERY_ASAN=1
	echo "${RSOCKX_PRELOAD%%:*} $RSOCKX_LIB" ;;
*)
	echo "$RSOCKX_LIB" ;;
esac >"$tmpdir/etc/ld.so.preload"
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
inside() { # CMD...: in a mount namespace with the preload file
	unshare -m sh -c 'mount --bind "$0" /etc && exec "$@"' "$tmpdir/etc" "$@"
}
segv0=$(dmesg | grep -c 'segfault\|general protection\|trap invalid')

check "the namespace sees /etc/ld.so.preload" inside test -s /etc/ld.so.preload
check "the library is in a program started there" \
	test "$(inside grep -c "$lib" /proc/self/maps)" -ge 1
check "and not outside" test ! -e /etc/ld.so.preload

bash "$0" --battery "$tmpdir/plain"
RSOCKX_STATS_SHM=0 inside bash "$0" --battery "$tmpdir/pre"
names=$(cd "$tmpdir/plain" && ls -- *.rc | sed 's/\.rc$//')
check "battery: the library was in the plain run: no; preloaded run: yes" \
	test "$(cat "$tmpdir/plain/maps.out")" = 0 -a "$(cat "$tmpdir/pre/maps.out")" -ge 1
for n in $names; do
	[ "$n" = maps ] && continue
	rp=$(cat "$tmpdir/plain/$n.rc") rq=$(cat "$tmpdir/pre/$n.rc" 2>/dev/null)
	if [ "$rp" = "$rq" ] && cmp -s "$tmpdir/plain/$n.out" "$tmpdir/pre/$n.out" &&
		[ "$rq" -lt 128 ] && [ -s "$tmpdir/plain/$n.out" ]; then
		ok "battery: $n: same output ($(wc -l <"$tmpdir/pre/$n.out") lines), exit $rq"
	else
		not_ok "battery: $n: exit $rp / $rq, outputs differ or empty"
		diff "$tmpdir/plain/$n.out" "$tmpdir/pre/$n.out" | head -20 | sed 's/^/  /' >&2
		sed 's/^/  stderr: /' "$tmpdir/pre/$n.err" | head -20 >&2
	fi
done
segv1=$(dmesg | grep -c 'segfault\|general protection\|trap invalid')
check "no program crashed (kernel log: $segv0 -> $segv1 faults)" test "$segv0" = "$segv1"

# Two preloaded processes on A and B: their connection is upgraded.  The
# client reads its rules from RSOCKX_CONF; nothing else is changed.
s=$(rxe_snap)
port=$(vm_port)
rm -f "$tmpdir/ab.ready"
RSOCKX_STATS_FILE=$tmpdir/ab.sstats inside "$XFER" server -b $HOST_B -p "$port" \
	-r "$tmpdir/ab.ready" >"$tmpdir/ab.server" 2>&1 &
spid=$!
wait_file "$tmpdir/ab.ready" 400
RSOCKX_STATS_FILE=$tmpdir/ab.cstats RSOCKX_CONF=$tmpdir/rdma.conf inside \
	"$XFER" client -c $HOST_B -b $HOST_A -p "$port" -n 2000000 >"$tmpdir/ab.client" 2>&1
rc=$?
reap $spid
sed 's/^/  A-B: /' "$tmpdir/ab.server" "$tmpdir/ab.client" >&2
check "A-B xfer under ld.so.preload: 2 MB echoed intact" \
	test $rc = 0 -a -n "$(grep 'echoed intact' "$tmpdir/ab.client")"
check "A-B xfer: both ends loaded $lib through ld.so.preload" \
	test -n "$(grep "preloaded: .*$lib" "$tmpdir/ab.client")" -a -n "$(grep "preloaded: .*$lib" "$tmpdir/ab.server")"
check "A-B xfer: both ends upgraded, bytes over RDMA" \
	test "$(stat_of "$tmpdir/ab.cstats" upgraded)" = 1 -a "$(stat_of "$tmpdir/ab.sstats" upgraded)" = 1 -a \
	"$(stat_of "$tmpdir/ab.sstats" rdma_rx_bytes)" -gt 0
rdma_crossed "A-B xfer: rxe0 and rxe1 carried it" "$s" 100

# python3 on both ends, plain socket code
s=$(rxe_snap)
port=$(vm_port)
RSOCKX_STATS_FILE=$tmpdir/py.sstats inside python3 -c 'import socket, sys
s = socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
c, _ = s.accept()
n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b); c.sendall(b)
print("server", n)' $HOST_B "$port" >"$tmpdir/py.server" 2>&1 &
spid=$!
wait_listen "$port"
RSOCKX_STATS_FILE=$tmpdir/py.cstats RSOCKX_CONF=$tmpdir/rdma.conf inside python3 -c 'import socket, sys, hashlib
c = socket.socket(); c.bind((sys.argv[1], 0)); c.connect((sys.argv[2], int(sys.argv[3])))
data = hashlib.sha256(b"x").digest() * 32768
got = bytearray()
for i in range(0, len(data), 65536):
    c.sendall(data[i:i + 65536])
    while len(got) < i + 65536: got += c.recv(65536)
c.shutdown(socket.SHUT_WR); assert c.recv(1) == b""
print("client", len(got), got == data)' $HOST_A $HOST_B "$port" >"$tmpdir/py.client" 2>&1
rc=$?
reap $spid
sed 's/^/  python A-B: /' "$tmpdir/py.server" "$tmpdir/py.client" >&2
check "A-B python3 under ld.so.preload: 1 MiB echoed intact" \
	test $rc = 0 -a "$(cat "$tmpdir/py.client")" = "client 1048576 True"
check "A-B python3: both ends upgraded, bytes over RDMA" \
	test "$(stat_of "$tmpdir/py.cstats" upgraded)" = 1 -a "$(stat_of "$tmpdir/py.sstats" upgraded)" = 1 -a \
	"$(stat_of "$tmpdir/py.cstats" rdma_rx_bytes)" -gt 0
rdma_crossed "A-B python3: rxe0 and rxe1 carried it" "$s" 100
done_testing
