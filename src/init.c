// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "init.h"
#include "log.h"
#include "stats.h"

_Atomic int rsx_init_state;	/* 0: not yet, 1: running, 2: done */
static const char *rsx_stats_file;

/*
 * Nothing here may print unless RSOCKX_LOG asks, exit, or fail the process:
 * the library can be in /etc/ld.so.preload of every program on the host.
 */
static void rsx_init_env(void)
{
	const char *s, *conf;
	int lvl, ret;

	s = getenv("RSOCKX_DISABLE");
	if (s && *s && strcmp(s, "0")) {
		rsx_config.disabled = 1;
		return;
	}
	s = getenv("RSOCKX_LOG");
	if (s && *s) {
		lvl = rsx_log_parse_level(s);
		rsx_log_level = lvl < 0 ? RSX_LOG_WARN : lvl;
		s = getenv("RSOCKX_LOG_FILE");
		if (s && *s && rsx_log_open(s))
			rsx_warn("cannot open RSOCKX_LOG_FILE %s: %s", s,
				 strerror(errno));
		if (lvl < 0)
			rsx_warn("RSOCKX_LOG: unknown level, using warn");
	}
	rsx_stats_file = getenv("RSOCKX_STATS_FILE");
	conf = getenv("RSOCKX_CONF");
	if (!conf)
		conf = SYSCONFDIR "/rsockx.conf";
	ret = rsx_config_load(&rsx_config, getenv("RSOCKX_RULES"), conf,
			      getenv("RSOCKX_DEFAULT"),
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
	if (rsx_stats_file && *rsx_stats_file)
		rsx_stats_dump(rsx_stats_file);
}
