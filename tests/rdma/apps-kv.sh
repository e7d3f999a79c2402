#!/bin/bash
# Real programs over RDMA (issue 5), key-value stores: redis-server with
# redis-benchmark (set, get, lpush, pipelining 16) and redis-cli (a 1 MB
# random value set and got back byte for byte); memcached with a python3
# text-protocol client (random values of 1 byte to 512 KiB, each got back
# and compared, a multi-get, then 300 small set/get pairs).  Server on host
# B under librsockx, clients under librsockx with rules that say rdma;
# redis-benchmark and redis-cli cannot bind, so they run on B (B to B:
# loopback inside rxe1), the memcached client binds to A (crosses to B).
# vm-exclusive: yes
# vm-timeout: 180
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
APPS_MODE=rsockx
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"
# Not a rule: the probe's deadline (1 s) is for real networks.  The rule
# rdma makes redis-cli's first send wait for its process's first probe
# (the RDMA libraries load inside it, ~0.6 s here), which other work on
# the machine's two cores can make overrun it, as in the other VM tests.
export RSOCKX_PROBE_TIMEOUT_MS=${RSOCKX_PROBE_TIMEOUT_MS:-10000}

if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
	s=$(rxe_snap)
	if app_redis_start redis; then
		check "redis-benchmark: set, get, lpush (-P 16, 5000 each) all report a rate" \
			app_redis_bench redis 5000
		diag "redis-benchmark: $(grep -E '^"(SET|GET|LPUSH)' "$tmpdir/redis.client" | cut -d, -f1,2 | tr '\n' ' ')"
		check "redis-cli: a 1 MB random value SET and GET back byte for byte" \
			app_redis_value redis 1000000
	else
		not_ok "redis-server listens"
	fi
	check "redis-server: clean shutdown (SIGTERM)" app_stop TERM
	# benchmark: 4 connections per test and one for CONFIG, redis-cli: 2.
	# The benchmark moves about 680,000 bytes over RDMA.  redis-cli's 1 MB
	# SET leaves right behind the in-band HELLO, on TCP while the ACK is
	# out, and so does the GET's answer when the server's first write
	# comes before the client read its ACK: on a slow guest (the ASan
	# pass) both stayed TCP with the probe's yes and no fallback at all
	# (682,325 bytes).  The bytes the benchmark guarantees are checked.
	app_upgraded redis 6 500000
	rdma_only_dev "redis: rxe1 carried it (B to B)" "$s" rxe1
else
	skip "redis-server/redis-tools not installed"
fi

if command -v memcached >/dev/null; then
	s=$(rxe_snap)
	check "memcached: 20 random values set and got back intact" app_memcached memcached 20
	diag "$(grep '^memcached:' "$tmpdir/memcached.client")"
	app_upgraded memcached 1 1000000
	rdma_crossed "memcached: rxe0 and rxe1 both sent and received" "$s" 100
else
	skip "memcached not installed"
fi
done_testing
