/* SPDX-License-Identifier: MIT */
#ifndef RSX_STATS_H
#define RSX_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Process-wide counters.  They count events (a socket tracked, a connection
 * accepted), never intercepted calls, so plain relaxed atomics are cheap
 * enough.  They live in a static array until the process tracks its first
 * TCP socket; from then on in the statistics region that rsockx-stat reads
 * (statshm.h), unless RSOCKX_STATS_SHM=0 or the region cannot be made.
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
	X(exec_handed)		/* sockets handed to a new program */	\
	X(exec_lost)		/* upgraded sockets a new program inherits */ \
	X(config_errors)	/* invalid configuration: nothing upgrades */ \
	X(hello_sent)		/* client: HELLO written to TCP */	\
	X(hello_received)	/* server: HELLO taken off TCP */	\
	X(ack_sent) X(ack_received) X(nak_sent) X(nak_received)	\
	X(upgraded)		/* connections now carried by a QP */	\
	X(fallback_rules)	/* stayed TCP: rules say tcp */		\
	X(fallback_nodev)	/* ... no RDMA device for the address */	\
	X(fallback_resources)	/* ... memory, QP or registration failed */ \
	X(fallback_peer)	/* ... peer answered with data, not ACK */	\
	X(fallback_nak)		/* ... peer said NAK */			\
	X(fallback_qp)		/* ... QP would not reach RTS */	\
	X(fallback_fork)	/* a parent's upgraded socket in a fork child */ \
	X(fallback_evented)	/* in more epoll sets than rsockx follows */ \
	X(rdma_tx_bytes)	/* application bytes sent over RDMA */	\
	X(rdma_rx_bytes)	/* ... received over RDMA */		\
	X(tcp_tx_bytes)		/* bytes of negotiating sockets sent on TCP */ \
	X(tcp_rx_bytes)		/* ... received on TCP */		\
	X(qps_created) X(qps_destroyed)					\
	X(conn_errors)		/* upgraded connections that broke */	\
	X(sleeps)		/* waits on the completion channel */	\
	X(intr_restarts)	/* blocking calls restarted after a signal */ \
	X(naps)			/* waits for another thread's poll */	\
	X(ready_on)		/* upgraded sockets given a poll stand-in */ \
	X(ready_events)		/* watcher wakeups for those */		\
	X(spin_waits)		/* poll/select/epoll waits that spun first */ \
	X(spin_wakes)		/* ... and found an event while spinning */ \
	X(ready_backstops)	/* CQs the watcher armed, left unarmed */ \
	X(fallback_probe)	/* stayed TCP: probe said no (or ended first) */ \
	X(probes_sent) X(probe_yes) X(probe_no)				\
	X(probes_answered)	/* responder: probes rejected as rsockx */ \
	X(probe_adopted)	/* responders taken over: gone parent, exec */ \
	X(exec_downgraded)	/* upgraded sockets back on TCP for exec */ \
	X(peer_downgrades)	/* ... and the peer side of those, settled */ \
	X(down_resent_bytes)	/* ring bytes sent again over TCP for those */ \
	X(pool_chunks)		/* memory pool chunks mapped (mempool.h) */ \
	X(pool_chunks_freed)	/* ... of them released again */	\
	X(pool_bytes)		/* bytes in pool chunks now (a level) */ \
	X(pool_blocks)		/* rings and staging buffers carved */	\
	X(ring_grants)		/* REMOTE_WRITE MRs, one per ring */	\
	X(ring_revoked)		/* ... deregistered at close */		\
	X(port_down_breaks)	/* connections broken: their port went down */ \
	X(fallback_qp_limit)	/* stayed TCP: RSOCKX_MAX_QPS QPs were held */ \
	X(oob_sent)		/* client: out-of-band requests sent */	\
	X(oob_acked)		/* ... answered with ACK */		\
	X(oob_naked)		/* ... answered NAK, or no answer */	\
	X(oob_received)		/* server: out-of-band requests in */	\
	X(oob_answered)		/* ... answered with ACK */		\
	X(oob_refused)		/* ... answered with NAK */		\
	X(oob_deferred)		/* answers left to the program's thread */ \
	X(midstream_upgrades)	/* connections upgraded out of band */	\
	X(fallback_oob)		/* stayed TCP: out-of-band upgrade failed */ \
	X(fork_downgraded)	/* upgraded, back on TCP for a fork child */ \
	X(fork_lost)		/* ... that could not be: shut down */	\
	X(fork_handoffs)	/* child: a parent's connection, TCP now */ \
	X(fallback_pinned)	/* stayed TCP: RSOCKX_PIN_MAX pinned already */ \
	X(closes_lingered)	/* non-blocking closes ended in the background */ \
	X(fallback_no_cutover)	/* stayed TCP: the client's CUTOVER never came */ \
	X(signals_deferred)	/* handlers held back until a socket lock went */ \
	X(fork_alone)		/* a socket fork() shared is one process's again */ \
	X(shm_upgrades)		/* upgraded onto shared memory (same host) */ \
	X(shm_tx_bytes)		/* application bytes sent over shared memory */ \
	X(shm_rx_bytes)		/* ... received over shared memory */ \
	X(fallback_stdio)	/* TCP for good: fdopen()ed, stdio's I/O */ \
	X(ready_told)		/* arrivals told to an epoll wait, not on x */ \
	X(oob_again)		/* client: asked again after the peer's DOWNGRADE */ \
	X(qp_timeouts)		/* connections broken: the peer's device went silent */ \
	X(shm_direct_wakes)	/* shared memory: peers' stand-ins woken directly */ \
	X(chan_kicks)		/* sleepers woken from a device's channel */

enum rsx_stat {
#define RSX_STAT_ENUM(name) RSX_STAT_##name,
	RSX_STATS(RSX_STAT_ENUM)
#undef RSX_STAT_ENUM
	RSX_STAT_COUNT
};

/* Where the counters are now: the static array, or the mapped region. */
extern _Atomic uint64_t *_Atomic rsx_stats;

static inline _Atomic uint64_t *rsx_stat_slot(enum rsx_stat s)
{
	return atomic_load_explicit(&rsx_stats, memory_order_acquire) + s;
}

static inline void rsx_stat_inc(enum rsx_stat s)
{
	atomic_fetch_add_explicit(rsx_stat_slot(s), 1, memory_order_relaxed);
}

static inline void rsx_stat_add(enum rsx_stat s, uint64_t n)
{
	atomic_fetch_add_explicit(rsx_stat_slot(s), n, memory_order_relaxed);
}

static inline uint64_t rsx_stat_get(enum rsx_stat s)
{
	return atomic_load_explicit(rsx_stat_slot(s), memory_order_relaxed);
}

const char *rsx_stat_name(enum rsx_stat s);
int rsx_stats_dump(const char *path);

/*
 * The statistics region (statshm.h).  rsx_stats_shm_enable() at start
 * allows it; rsx_stats_publish() makes it the first time it is called
 * (one load and one test afterwards); the others keep it right across
 * fork, exec and exit.  Every failure simply leaves the counters private.
 */
enum rsx_shm_pub {
	RSX_PUB_OFF = 0,	/* not allowed (default: unit tests, disabled) */
	RSX_PUB_NONE,		/* allowed, not made yet */
	RSX_PUB_BUSY,		/* being made */
	RSX_PUB_MAPPED,		/* counters live in the region */
	RSX_PUB_FAILED,		/* could not be made: private for good */
};

extern _Atomic int rsx_stats_pub;

void rsx_stats_shm_enable(void);
int rsx_stats_publish_slow(void);
void rsx_stats_fork_prepare(void);
void rsx_stats_fork_child(void);
void rsx_stats_exec(int starting);
void rsx_stats_exit(void);

/* Connection entries of the region; key: the socket's struct rsx_sock. */
void rsx_stats_conn_open(const void *key, int fd, int family, int role,
			 int state);
void rsx_stats_conn_state(const void *key, int state);
void rsx_stats_conn_close(const void *key);

static inline void rsx_stats_publish(void)
{
	if (atomic_load_explicit(&rsx_stats_pub, memory_order_relaxed) ==
	    RSX_PUB_NONE)
		rsx_stats_publish_slow();
}

#endif
