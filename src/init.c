// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "upgrade.h"
#include "wire.h"
#include "init.h"
#include "sig.h"
#include "libc.h"
#include "log.h"
#include "stats.h"
#include "track.h"

_Atomic int rsx_init_state;	/* 0: not yet, 1: running, 2: done */
/*
 * A copy, not the environment string: programs that set their process
 * title (redis-server, nginx's master and workers, postgres) write over
 * the original environment block, and exit would find a different path.
 */
static char rsx_stats_file[PATH_MAX];

/* A numeric knob from the environment; a bad value is logged and ignored. */
static void rsx_env_num(const char *name, uint64_t min, uint64_t max,
			int pow2, void *out, size_t size)
{
	const char *s = secure_getenv(name);
	uint64_t v;

	if (!s || !*s)
		return;
	if (rsx_parse_size(s, min, max, &v) || (pow2 && (v & (v - 1)))) {
		rsx_warn("%s=%s: want %s%llu to %llu; default kept", name, s,
			 pow2 ? "a power of two from " : "",
			 (unsigned long long)min, (unsigned long long)max);
		return;
	}
	if (size == sizeof(uint64_t))
		*(uint64_t *)out = v;
	else if (size == sizeof(uint32_t))
		*(uint32_t *)out = v;
	else
		*(int *)out = v;
}

/* CAP_IPC_LOCK in the effective set: RLIMIT_MEMLOCK does not bind us. */
static int rsx_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return 0;
	return !!(d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32)));
}

/*
 * The default of RSOCKX_PIN_MAX: 1 GiB, or three quarters of a finite
 * RLIMIT_MEMLOCK that binds this process.  The kernel would refuse a
 * registration past the limit anyway (and count the failure as anything);
 * stopping short leaves the program room for its own mlock() and names
 * the reason (fallback_pinned).
 */
static uint64_t rsx_pin_default(void)
{
	uint64_t max = 1ull << 30;
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rsx_cap_ipc_lock())
		return max;
	return rl.rlim_cur / 4 * 3 < max ? rl.rlim_cur / 4 * 3 : max;
}

/*
 * Not at start-up (every process of the host may load the library, most
 * never pin a byte): at the first chunk a pool makes.  Threads that race
 * here work out the same value.
 */
uint64_t rsx_pin_max(void)
{
	if (__atomic_load_n(&rsx_config.pin_max_default, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&rsx_config.pin_max, rsx_pin_default(),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&rsx_config.pin_max_default, 0,
				 __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&rsx_config.pin_max, __ATOMIC_RELAXED);
}

static void rsx_init_tunables(void)
{
	struct rsx_config *c = &rsx_config;

	c->ring_size = 256 * 1024;
	c->spin_us = 100;
	c->wrap_handlers = 1;
	c->linger_ms = 5000;
	c->hello_wait_ms = 200;
	c->hello_grace_ms = 5;
	c->probe_timeout_ms = 1000;
	c->probe_ttl_s = 60;
	c->probe_neg_ttl_s = 5;
	c->qp_timeout_ms = 500;
	c->oob = 1;
	c->inband = 1;
	c->oob_timeout_ms = 3000;
	c->local = 0;
	rsx_env_num("RSOCKX_RING_SIZE", RSX_RING_MIN, RSX_RING_MAX, 1,
		    &c->ring_size, sizeof(c->ring_size));
	rsx_env_num("RSOCKX_SPIN_US", 0, 1000000, 0, &c->spin_us,
		    sizeof(c->spin_us));
	rsx_env_num("RSOCKX_WRAP_HANDLERS", 0, 1, 0, &c->wrap_handlers,
		    sizeof(int));
	rsx_sig_masks = !c->wrap_handlers;	/* sig.h */
	rsx_env_num("RSOCKX_LINGER_MS", 0, 3600000, 0, &c->linger_ms,
		    sizeof(int));
	rsx_env_num("RSOCKX_HELLO_GRACE_MS", 0, 10000, 0, &c->hello_grace_ms,
		    sizeof(int));
	rsx_env_num("RSOCKX_PROBE_TIMEOUT_MS", 1, 60000, 0,
		    &c->probe_timeout_ms, sizeof(int));
	rsx_env_num("RSOCKX_PROBE_TTL_S", 0, 86400, 0, &c->probe_ttl_s,
		    sizeof(int));
	rsx_env_num("RSOCKX_PROBE_NEG_TTL_S", 0, 86400, 0,
		    &c->probe_neg_ttl_s, sizeof(int));
	rsx_env_num("RSOCKX_QP_TIMEOUT_MS", 1, 3600000, 0, &c->qp_timeout_ms,
		    sizeof(int));
	c->qp_timeout = rsx_qp_timeout_exp(c->qp_timeout_ms);
	rsx_env_num("RSOCKX_OOB", 0, 1, 0, &c->oob, sizeof(int));
	rsx_env_num("RSOCKX_INBAND", 0, 1, 0, &c->inband, sizeof(int));
	/*
	 * A client asks for its connection once its probe has its answer:
	 * a peer given a longer probe deadline (a slow fabric) must find the
	 * request window still open on this side.
	 */
	c->oob_window_ms = c->probe_timeout_ms + 2000 > 3000 ?
			   c->probe_timeout_ms + 2000 : 3000;
	rsx_env_num("RSOCKX_OOB_WINDOW_MS", 0, 3600000, 0, &c->oob_window_ms,
		    sizeof(int));
	rsx_env_num("RSOCKX_OOB_TIMEOUT_MS", 100, 600000, 0,
		    &c->oob_timeout_ms, sizeof(int));
	rsx_env_num("RSOCKX_LOCAL", 0, 1, 0, &c->local, sizeof(int));
	rsx_env_num("RSOCKX_MAX_QPS", 0, UINT32_MAX, 0, &c->max_qps,
		    sizeof(uint32_t));
	/*
	 * What a process pins for its rings and staging buffers: the kernel's
	 * RLIMIT_MEMLOCK bounds only processes without CAP_IPC_LOCK, and with
	 * /etc/ld.so.preload every daemon that accepts TCP runs rsockx; past
	 * this, connections stay TCP (fallback_pinned).
	 */
	c->pin_max = UINT64_MAX;	/* not a value the variable takes */
	rsx_env_num("RSOCKX_PIN_MAX", 0, UINT64_MAX - 1, 0, &c->pin_max,
		    sizeof(uint64_t));
	c->pin_max_default = c->pin_max == UINT64_MAX;
	/* lossless (PFC) and ECN fabrics put RDMA in a class of its own */
	rsx_env_num("RSOCKX_TCLASS", 0, 255, 0, &c->tclass, sizeof(int));
	rsx_env_num("RSOCKX_SL", 0, 15, 0, &c->sl, sizeof(int));
	/* fault tests: break each QP after it sent this many bytes */
	rsx_env_num("RSOCKX_TEST_QP_ERR_AFTER", 1, UINT32_MAX, 0,
		    &c->test_qp_err_after, sizeof(uint32_t));
	/* hostile-peer tests: a server that cannot answer probes gets the
	 * HELLO a rule says rdma for, as if its probe had said yes */
	rsx_env_num("RSOCKX_TEST_PROBE_YES", 0, 1, 0, &c->test_probe_yes,
		    sizeof(int));
	/* tests of the cut-over deadline: both ends shorter (conn.h) */
	c->cut_wait_ms = RSX_CUT_WAIT_MS;
	rsx_env_num("RSOCKX_TEST_CUT_WAIT_MS", 300, RSX_CUT_WAIT_MS, 0,
		    &c->cut_wait_ms, sizeof(int));
	/* fork tests: the CM thread runs on this long after the sockets
	 * were shared out for a fork, before it is held (track.c) */
	rsx_env_num("RSOCKX_TEST_FORK_GAP_MS", 0, 10000, 0,
		    &c->test_fork_gap_ms, sizeof(int));
	/* exit tests: a process with connections goes on this long after
	 * exit() flushed them, its threads still taking answers (close.c) */
	rsx_env_num("RSOCKX_TEST_EXIT_GAP_MS", 0, 10000, 0,
		    &c->test_exit_gap_ms, sizeof(int));
	/* fork tests: a request's answer holds its socket's lock this long
	 * before it is taken (midstream.c) */
	rsx_env_num("RSOCKX_TEST_ANSWER_HOLD_MS", 0, 10000, 0,
		    &c->test_answer_hold_ms, sizeof(int));
	/* exec tests: the exec goes on this long after its look at the
	 * sockets the new program inherits, the CM thread answering (track.c) */
	rsx_env_num("RSOCKX_TEST_EXEC_GAP_MS", 0, 10000, 0,
		    &c->test_exec_gap_ms, sizeof(int));
	/* a client on shared memory sends its request once more while its
	 * ACK waits for the program (local.c, rsx_local_ask_again) */
	rsx_env_num("RSOCKX_TEST_OOB_AGAIN", 0, 1, 0, &c->test_oob_again,
		    sizeof(int));
}

/*
 * Nothing here may print unless RSOCKX_LOG asks, exit, or fail the process:
 * the library can be in /etc/ld.so.preload of every program on the host.
 */
static void rsx_init_env(void)
{
	const char *s, *conf;
	int lvl, ret;

	rsx_log_level = RSX_LOG_OFF;
	s = secure_getenv("RSOCKX_DISABLE");
	if (s && *s && strcmp(s, "0")) {
		rsx_config.disabled = 1;
		return;
	}
	s = secure_getenv("RSOCKX_LOG");
	if (s && *s) {
		lvl = rsx_log_parse_level(s);
		rsx_log_level = lvl < 0 ? RSX_LOG_WARN : lvl;
		s = secure_getenv("RSOCKX_LOG_FILE");
		if (s && *s && rsx_log_open(s))
			rsx_warn("cannot open RSOCKX_LOG_FILE %s: %s", s,
				 strerror(errno));
		if (lvl < 0)
			rsx_warn("RSOCKX_LOG: unknown level, using warn");
	}
	s = secure_getenv("RSOCKX_STATS_FILE");
	if (s && strlen(s) < sizeof(rsx_stats_file))
		strcpy(rsx_stats_file, s);
	s = secure_getenv("RSOCKX_STATS_SHM");
	if (!s || strcmp(s, "0"))
		rsx_stats_shm_enable();
	rsx_init_tunables();
	conf = secure_getenv("RSOCKX_CONF");
	if (!conf)
		conf = SYSCONFDIR "/rsockx.conf";
	ret = rsx_config_load(&rsx_config, secure_getenv("RSOCKX_RULES"), conf,
			      secure_getenv("RSOCKX_DEFAULT"),
			      program_invocation_short_name);
	if (ret) {
		rsx_stat_inc(RSX_STAT_config_errors);
		rsx_err("configuration error, nothing will be upgraded: %s",
			rsx_config.error);
	}
	rsx_dbg("initialised: %u rules, default action %d", rsx_config.rules.n,
		rsx_config.default_action);
	s = secure_getenv("RSOCKX_INHERIT");
	if (s) {
		rsx_adopt_inherited(s);
		unsetenv("RSOCKX_INHERIT");	/* our exec wrappers set it anew */
	}
	rsx_adopt_listen_fds(secure_getenv("LISTEN_FDS"),
			     secure_getenv("LISTEN_PID"));
}

int rsx_init_slow(void)
{
	int expect = 0;

	if (!atomic_compare_exchange_strong(&rsx_init_state, &expect, 1))
		return expect == 2 ? 0 : -EAGAIN;
	/* we may be here before the shim's constructor ran */
	rsx_libc_resolve();
	rsx_init_env();
	atomic_store_explicit(&rsx_init_state, 2, memory_order_release);
	return 0;
}

/* Before an exec: the counters so far (the new program counts anew). */
void rsx_exec_stats(void)
{
	if (*rsx_stats_file)
		rsx_stats_dump(rsx_stats_file);
}

void rsx_fini(void)
{
	rsx_exit_flush();
	if (*rsx_stats_file)
		rsx_stats_dump(rsx_stats_file);
	rsx_stats_exit();
}
