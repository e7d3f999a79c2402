/* SPDX-License-Identifier: MIT */
#ifndef RSX_STATS_H
#define RSX_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Process-wide counters.  They count events (a socket tracked, a connection
 * accepted), never intercepted calls, so plain relaxed atomics are cheap
 * enough.  Later issues publish them in shared memory for rsockx-stat.
 */
#define RSX_STATS(X)							\
	X(tcp_sockets)		/* TCP sockets created by socket() */	\
	X(tcp_accepted)		/* TCP connections accepted */		\
	X(tcp_connected)	/* connect() started or done */		\
	X(tcp_listening)	/* listen() on a tracked socket */	\
	X(fds_tracked)		/* fd table entries installed */	\
	X(closed)		/* tracked fds closed */		\
	X(stale_cleared)	/* entries of fds closed behind our back */ \
	X(untracked_full)	/* sockets not tracked: table or pool full */ \
	X(private_close_refused) /* program tried to close an fd of ours */ \
	X(forks)		/* fork children seen */		\
	X(execs)		/* execve() calls seen */		\
	X(config_errors)	/* invalid configuration: nothing upgrades */

enum rsx_stat {
#define RSX_STAT_ENUM(name) RSX_STAT_##name,
	RSX_STATS(RSX_STAT_ENUM)
#undef RSX_STAT_ENUM
	RSX_STAT_COUNT
};

extern _Atomic uint64_t rsx_stats[RSX_STAT_COUNT];

static inline void rsx_stat_inc(enum rsx_stat s)
{
	atomic_fetch_add_explicit(&rsx_stats[s], 1, memory_order_relaxed);
}

static inline uint64_t rsx_stat_get(enum rsx_stat s)
{
	return atomic_load_explicit(&rsx_stats[s], memory_order_relaxed);
}

int rsx_stats_format(char *buf, size_t len);
int rsx_stats_dump(const char *path);

#endif
