// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "upgrade.h"
#include "wire.h"
#include "init.h"
#include "log.h"
#include "stats.h"

_Atomic int rsx_init_state;	/* 0: not yet, 1: running, 2: done */
static const char *rsx_stats_file;

/* Numeric knobs: a bad value is logged and the default kept. */
static void rsx_init_tunables(void)
{
	const char *s;
	uint64_t v;

	rsx_config.ring_size = 256 * 1024;
	rsx_config.spin_us = 0;
	rsx_config.linger_ms = 5000;
	rsx_config.hello_wait_ms = 200;
	rsx_config.hello_grace_ms = 5;
	s = secure_getenv("RSOCKX_RING_SIZE");
	if (s && *s) {
		if (rsx_parse_size(s, RSX_RING_MIN, RSX_RING_MAX, &v) ||
		    (v & (v - 1)))
			rsx_warn("RSOCKX_RING_SIZE=%s: want a power of two "
				 "from 4k to 128m; using %u", s,
				 rsx_config.ring_size);
		else
			rsx_config.ring_size = v;
	}
	s = secure_getenv("RSOCKX_SPIN_US");
	if (s && *s) {
		if (rsx_parse_size(s, 0, 1000000, &v))
			rsx_warn("RSOCKX_SPIN_US=%s: want 0 to 1000000", s);
		else
			rsx_config.spin_us = v;
	}
	s = secure_getenv("RSOCKX_HELLO_GRACE_MS");
	if (s && *s) {
		if (rsx_parse_size(s, 0, 10000, &v))
			rsx_warn("RSOCKX_HELLO_GRACE_MS=%s: want 0 to 10000", s);
		else
			rsx_config.hello_grace_ms = v;
	}
	s = secure_getenv("RSOCKX_LINGER_MS");
	if (s && *s) {
		if (rsx_parse_size(s, 0, 3600000, &v))
			rsx_warn("RSOCKX_LINGER_MS=%s: want 0 to 3600000", s);
		else
			rsx_config.linger_ms = v;
	}
}

/*
 * Nothing here may print unless RSOCKX_LOG asks, exit, or fail the process:
 * the library can be in /etc/ld.so.preload of every program on the host.
 */
static void rsx_init_env(void)
{
	const char *s, *conf;
	int lvl, ret;

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
	rsx_stats_file = secure_getenv("RSOCKX_STATS_FILE");
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
}

int rsx_init_slow(void)
{
	int expect = 0;

	if (!atomic_compare_exchange_strong(&rsx_init_state, &expect, 1))
		return expect == 2 ? 0 : -EAGAIN;
	rsx_init_env();
	atomic_store_explicit(&rsx_init_state, 2, memory_order_release);
	return 0;
}

void rsx_fini(void)
{
	rsx_exit_flush();
	if (rsx_stats_file && *rsx_stats_file)
		rsx_stats_dump(rsx_stats_file);
}
