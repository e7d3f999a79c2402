// SPDX-License-Identifier: MIT
#include <errno.h>

#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "handoff.h"
#include "linger.h"
#include "local.h"
#include "oob.h"
#include "pool.h"
#include "probe.h"
#include "ready.h"
#include "share.h"
#include "sock.h"
#include "stats.h"
#include "upgrade.h"

static struct rsx_pool rsx_sock_pool;
_Atomic int rsx_engine_socks;
_Atomic int rsx_client_waits;
static _Atomic uint32_t rsx_sock_gen;

int rsx_sock_pool_init(uint32_t max)
{
	return rsx_pool_init(&rsx_sock_pool, sizeof(struct rsx_sock), max);
}

struct rsx_sock *rsx_sock_new(int kind, int family, int role)
{
	struct rsx_sock *s = rsx_pool_get(&rsx_sock_pool);

	if (!s)
		return NULL;
	s->kind = kind;
	s->family = family;
	atomic_store(&s->role, role);
	atomic_store(&s->mode, 0);
	atomic_store(&s->nonblock, 0);
	atomic_store(&s->evented, 0);
	s->state = RSX_ST_TCP;
	s->action = 0;
	s->rd_shut = 0;
	s->wr_shut = 0;
	s->rcvlowat = 0;
	s->partial_since = 0;
	s->conn = NULL;
	s->probe_id = NULL;
	s->probe_pid = 0;
	s->probe_sid = 0;
	s->probe_heir = 0;
	s->probe_adopt_at = 0;
	s->rdy = NULL;
	atomic_store(&s->spinners, 0);
	s->rdy_retired = NULL;
	s->nepreg = 0;
	s->orphan_fd = -1;
	s->lingered = 0;
	s->cut_watched = 0;
	s->oob_ok = 0;
	s->shared = 0;
	s->share_slot = -1;
	s->share_seq = 0;
	s->inband_try = 0;
	s->probed = 0;
	s->local = 0;
	s->local_listen = 0;
	s->board_seen = 0;
	s->peer_port = 0;
	s->local_port = 0;
	s->oob_until = 0;
	s->tcp_tx = 0;
	s->tcp_rx = 0;
	s->tx_sum = s->rx_sum = RSX_SUM_INIT;
	atomic_store(&s->pollers, 0);
	atomic_store(&s->cm_knock, 0);
	atomic_store(&s->vfork_exec, 0);
	s->gen = atomic_fetch_add(&rsx_sock_gen, 1);
	s->oob = NULL;
	s->wake_fd = -1;
	s->wake_users = 0;
	s->ho_page = NULL;
	s->ho_slot = -1;
	s->ho_seq = 0;
	pthread_mutex_init(&s->lock, NULL);
	/* Published last: a racing rsx_sock_tryget() sees 0 until then. */
	atomic_store_explicit(&s->ref, 1, memory_order_release);
	return s;
}

/*
 * Takes a reference unless the object is being freed (ref already 0): the
 * caller found the pointer without holding one.
 */
int rsx_sock_tryget(struct rsx_sock *s)
{
	int ref = atomic_load_explicit(&s->ref, memory_order_relaxed);

	do {
		if (ref <= 0)
			return 0;
	} while (!atomic_compare_exchange_weak(&s->ref, &ref, ref + 1));
	return 1;
}

void rsx_sock_put(struct rsx_sock *s)
{
	if (s->kind == RSX_SOCK_PRIVATE)
		return;		/* static sentinel, never freed */
	if (atomic_fetch_sub_explicit(&s->ref, 1, memory_order_acq_rel) != 1)
		return;
	if (s->cut_watched)
		rsx_linger_forget(s);	/* before anything of s goes */
	if (s->orphan_fd >= 0)
		rsx_sock_orphan_end(s);
	/*
	 * Nobody else holds a reference, but the watcher thread may be in
	 * the middle of an event of s under s->lock (it finds s through its
	 * table, without a reference): take the stand-in away under the lock,
	 * so that the watcher is done with it first.
	 */
	rsx_sock_lock(s);
	rsx_ready_off(s, 0);
	rsx_sock_unlock(s);
	rsx_ready_quiesce(s);
	if (s->conn) {
		rsx_conn_destroy(s->conn);
		s->conn = NULL;
	}
	rsx_oob_sock_free(s);
	if (s->state == RSX_ST_CLIENT_WAIT)
		atomic_fetch_sub(&rsx_client_waits, 1);
	/* it ended before its probe (or its request, one too) answered */
	if (s->state == RSX_ST_CLIENT_WAIT || s->state == RSX_ST_CLIENT_OOB)
		rsx_stat_inc(RSX_STAT_fallback_probe);
	s->state = RSX_ST_TCP;
	if (atomic_exchange(&s->mode, 0))
		atomic_fetch_sub(&rsx_engine_socks, 1);
	rsx_stats_conn_close(s);
	rsx_probe_unlisten(s);
	rsx_local_unlisten(s);
	rsx_handoff_release(s);
	rsx_share_drop(s);
	rsx_pool_put(&rsx_sock_pool, s);
}

uint32_t rsx_sock_inuse(void)
{
	return atomic_load(&rsx_sock_pool.inuse);
}

void rsx_sock_set_state(struct rsx_sock *s, int state)
{
	uint8_t mode = state != RSX_ST_TCP;

	if ((s->state == RSX_ST_CLIENT_WAIT) != (state == RSX_ST_CLIENT_WAIT)) {
		atomic_fetch_add(&rsx_client_waits,
				 state == RSX_ST_CLIENT_WAIT ? 1 : -1);
		if (state == RSX_ST_CLIENT_WAIT)
			rsx_cm_nudge();	/* asked within RSX_CM_ROUND_MS */
	}
	/*
	 * Before the first call of the program can find a socket's lock
	 * taken: its handlers must wait for the lock (sig.h).
	 */
	if (mode && unlikely(!rsx_sig_wrapped()) && rsx_config.wrap_handlers)
		rsx_sig_wrap_all();
	s->state = state;
	rsx_stats_conn_state(s, state);
	if (atomic_exchange(&s->mode, mode) != mode)
		atomic_fetch_add(&rsx_engine_socks, mode ? 1 : -1);
}
