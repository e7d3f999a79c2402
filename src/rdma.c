// SPDX-License-Identifier: MIT
/*
 * The RDMA transport (transport.h): one RC queue pair per connection, in
 * a protection domain of its own, and its registered ring and staging
 * buffer; RDMA WRITE WITH IMMEDIATE for every message of conn.h.
 * Callers hold the owning socket's lock.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "rdma.h"
#include "sig.h"
#include "stats.h"

/*
 * Queue depths.  rxe keeps every queue in memory mapped into the process,
 * so depth is most of an idle connection's cost.  The data path needs
 * little: a write moves at most a quarter of the ring (RSX_CHUNK_MAX) per
 * message, so a bulk stream has four DATA messages in flight, and a
 * stream of small writes is held by the SQ (RSX_SQ_DEPTH) long before 96
 * receives run out.  128 is the smallest rq_depth the wire allows
 * (RSX_WIRE_RQ_MIN); a quarter of it stays reserved for control
 * messages.  The CQ takes every request of both queues, signalled or not,
 * so it cannot overflow.
 */
#define RSX_RQ_DEPTH		128
#define RSX_SIGNAL_EVERY	16
#define RSX_POLL_BATCH		32

/*
 * Held while a CQ's events are taken off its device's channel and while a
 * CQ is destroyed.  ibv_destroy_cq() waits until every event it reported
 * has been acknowledged, and the kernel drops those not yet read: under
 * the lock, an event read is acknowledged and its connection told before
 * the CQ and the connection can go.  Nothing else is taken under it.
 */
static pthread_mutex_t rsx_cq_lock = PTHREAD_MUTEX_INITIALIZER;

static void rsx_chan_hide(struct ibv_comp_channel *chan)
{
	chan->fd = rsx_fd_hide(chan->fd);
	rsx_libc.fcntl(chan->fd, F_SETFL,
		       rsx_libc.fcntl(chan->fd, F_GETFL) | O_NONBLOCK);
}

#define RSX_PEER_RING_FREE (4u << 20)

/* Every connection with a QP, for rsx_rdma_port_down(). */
static pthread_mutex_t rsx_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_conn *rsx_live;

static void rsx_live_add(struct rsx_conn *c)
{
	pthread_mutex_lock(&rsx_live_lock);
	c->live_next = rsx_live;
	if (rsx_live)
		rsx_live->live_pprev = &c->live_next;
	rsx_live = c;
	c->live_pprev = &rsx_live;
	pthread_mutex_unlock(&rsx_live_lock);
}

static void rsx_live_del(struct rsx_conn *c)
{
	if (!c->live_pprev)
		return;
	pthread_mutex_lock(&rsx_live_lock);
	*c->live_pprev = c->live_next;
	if (c->live_next)
		c->live_next->live_pprev = c->live_pprev;
	pthread_mutex_unlock(&rsx_live_lock);
	c->live_pprev = NULL;
}

/*
 * Connections that hold (or are making) a QP, against RSOCKX_MAX_QPS.  A
 * slot is taken before anything is allocated, so that two threads racing
 * for the last one cannot both win.
 */
static _Atomic uint32_t rsx_qps_held;

static int rsx_qp_slot_take(struct rsx_conn *c)
{
	uint32_t max = rsx_config.max_qps;

	if (atomic_fetch_add(&rsx_qps_held, 1) >= max && max) {
		atomic_fetch_sub(&rsx_qps_held, 1);
		rsx_info("RSOCKX_MAX_QPS: %u queue pairs held, no more", max);
		return -EDQUOT;
	}
	c->qp_held = 1;
	return 0;
}

static void rsx_qp_slot_give(struct rsx_conn *c)
{
	if (c->qp_held)
		atomic_fetch_sub(&rsx_qps_held, 1);
	c->qp_held = 0;
}

/* In a fork child: the parent's connections are not ours to break. */
void rsx_rdma_fork_child(void)
{
	pthread_mutex_init(&rsx_live_lock, NULL);
	rsx_live = NULL;
	atomic_store(&rsx_qps_held, 0);
}

/*
 * Port port of ctx (0: every port) went down: each QP on it moves to the
 * error state.  Its requests and receives complete flushed, which wakes
 * whoever waits on the connection and breaks it (ECONNRESET) the way the
 * transport's retries would on hardware, only sooner; Soft-RoCE retries a
 * request on a port that is down for as long as it stays down.  The
 * owners' threads are not involved: modify_qp may run beside their posts
 * and polls.  Returns how many connections it broke.
 */
int rsx_rdma_port_down(struct ibv_context *ctx, int port)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct rsx_conn *c;
	int n = 0;

	pthread_mutex_lock(&rsx_live_lock);
	rsx_guard_enter();
	for (c = rsx_live; c; c = c->live_next) {
		if (c->dev->ctx != ctx || (port && c->dev->port != port))
			continue;
		if (rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE))
			rsx_info("QP %u to ERR failed", rsx_conn_id(c));
		else
			n++;
	}
	rsx_guard_leave();
	pthread_mutex_unlock(&rsx_live_lock);
	rsx_stat_add(RSX_STAT_port_down_breaks, n);
	return n;
}

static int rsx_post_recvs(struct rsx_conn *c, uint32_t n)
{
	struct ibv_recv_wr wr[RSX_POLL_BATCH], *bad;
	uint32_t i, k;
	int ret;

	while (n) {
		k = n < RSX_POLL_BATCH ? n : RSX_POLL_BATCH;
		for (i = 0; i < k; i++) {
			wr[i] = (struct ibv_recv_wr){
				.wr_id = 0,
				.next = i + 1 < k ? &wr[i + 1] : NULL,
				.sg_list = NULL,
				.num_sge = 0,
			};
		}
		ret = ibv_post_recv(c->qp, wr, &bad);
		if (ret)
			return -ret;
		n -= k;
	}
	return 0;
}

/* Tears it all down; the peer's rkey for our ring dies with ring_mr. */
static void rsx_rdma_destroy(struct rsx_conn *c)
{
	rsx_live_del(c);
	rsx_guard_enter();
	if (c->qp) {
		rsx_ibv.destroy_qp(c->qp);
		rsx_stat_inc(RSX_STAT_qps_destroyed);
	}
	if (c->cq) {
		pthread_mutex_lock(&rsx_cq_lock);
		rsx_ibv.destroy_cq(c->cq);
		pthread_mutex_unlock(&rsx_cq_lock);
	}
	if (c->chan) {
		rsx_fd_private_drop(c->chan->fd);	/* closed in there */
		rsx_ibv.destroy_comp_channel(c->chan);
	}
	/* the QP is gone: no write is under way when the grant goes */
	if (c->ring_mr) {
		rsx_ibv.dereg_mr(c->ring_mr);
		rsx_stat_inc(RSX_STAT_ring_revoked);
	}
	if (c->stage_mr)
		rsx_ibv.dereg_mr(c->stage_mr);
	if (c->pd)
		rsx_ibv.dealloc_pd(c->pd);
	/* the ring pool zeroes the ring and control area for the next user */
	rsx_mempool_free(c->dev->ring_pool, &c->rxblk);
	rsx_mempool_free(c->dev->stage_pool, &c->txblk);
	rsx_guard_leave();
	rsx_qp_slot_give(c);
}

int rsx_rdma_create(struct rsx_dev *dev, uint32_t ring_size, int evented,
		    struct rsx_conn **out)
{
	struct ibv_comp_channel *chan;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct rsx_conn *c;
	int ret = -ENOMEM;

	c = rsx_conn_alloc(ring_size);
	if (!c)
		return -ENOMEM;
	ret = rsx_qp_slot_take(c);
	if (ret) {
		rsx_fd_private_close(c->kick_fd);
		free(c);
		return ret;
	}
	c->tp = &rsx_rdma_transport;
	c->dev = dev;

	rsx_guard_enter();
	ret = rsx_mempool_alloc(dev->ring_pool, ring_size + RSX_CTRL_SIZE,
				&c->rxblk);
	if (ret)
		goto err;
	c->rxmem = c->rxblk.addr;
	c->rxmem_len = c->rxblk.len;
	c->ring = c->rxmem;
	c->ctrl = (volatile struct rsx_ctrl *)(c->rxmem + ring_size);
	/*
	 * A protection domain per connection: the device checks an rkey
	 * against the PD of the QP that a request arrives on, so the grant
	 * below is good for this connection's QP alone.  In one PD shared by
	 * the device's connections, any peer that learnt or guessed another
	 * connection's rkey and ring address (rxe's rkeys are an index and 8
	 * random bits) could write into that connection's stream
	 * (tests/rdma/evil.sh neighbour).  doc/ARCHITECTURE.md, departure 7.
	 */
	c->pd = rsx_ibv.alloc_pd(dev->ctx);
	if (!c->pd)
		goto err_errno;
	/*
	 * The peer's grant: an MR of its own over exactly the ring and the
	 * control area, so that its rkey reaches nothing else of the pool and
	 * dies with this connection.
	 */
	c->ring_mr = rsx_ibv.reg_mr(c->pd, c->rxmem,
				    ring_size + RSX_CTRL_SIZE,
				    IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE);
	if (!c->ring_mr) {
		ret = errno ? -errno : -ENOMEM;
		rsx_info("reg_mr of the ring failed: %s", strerror(-ret));
		goto err;
	}
	rsx_stat_inc(RSX_STAT_ring_grants);
	/*
	 * Whose completion channel: a blocking socket's thread sleeps in
	 * poll() on a channel of the connection's own, as before; an evented
	 * one (non-blocking) has its CQ on the device's, which the readiness
	 * watcher drains for all of them (rsx_dev_chan): a descriptor and an
	 * epoll registration fewer per connection (issue 20, item 7).  A
	 * blocking sleep on the device's channel would hear of its
	 * completions only through the watcher, a thread wake-up more: in
	 * the test VM that made a 64-byte round trip without spin three
	 * times as slow (doc/ARCHITECTURE.md, departure 1).
	 */
	if (evented) {
		chan = rsx_dev_chan(dev);
	} else {
		chan = c->chan = rsx_ibv.create_comp_channel(dev->ctx);
		if (chan)
			rsx_chan_hide(chan);
	}
	if (!chan)
		goto err_errno;
	c->cq = rsx_ibv.create_cq(dev->ctx, RSX_SQ_DEPTH + RSX_RQ_DEPTH, c,
				  chan, 0);
	if (!c->cq)
		goto err_errno;
	memset(&qia, 0, sizeof(qia));
	qia.send_cq = c->cq;
	qia.recv_cq = c->cq;
	qia.qp_type = IBV_QPT_RC;
	qia.sq_sig_all = 0;
	qia.cap.max_send_wr = RSX_SQ_DEPTH;
	qia.cap.max_recv_wr = RSX_RQ_DEPTH;
	qia.cap.max_send_sge = 1;
	qia.cap.max_recv_sge = 1;
	qia.cap.max_inline_data = 64;
	c->qp = rsx_ibv.create_qp(c->pd, &qia);
	if (!c->qp) {
		/* some devices have no inline data */
		qia.cap.max_inline_data = 0;
		c->qp = rsx_ibv.create_qp(c->pd, &qia);
	}
	if (!c->qp)
		goto err_errno;
	c->max_inline = qia.cap.max_inline_data;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = dev->port;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ret = rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret) {
		rsx_info("QP %u RESET->INIT failed: %s", rsx_conn_id(c),
			 strerror(ret));
		ret = -ret;
		goto err;
	}
	/* receives before the peer can possibly send */
	ret = rsx_post_recvs(c, RSX_RQ_DEPTH);
	if (ret)
		goto err;
	rsx_guard_leave();
	rsx_stat_inc(RSX_STAT_qps_created);
	rsx_live_add(c);
	*out = c;
	return 0;

err_errno:
	ret = errno ? -errno : -ENOMEM;
	rsx_info("creating RDMA resources failed: %s", strerror(-ret));
err:
	rsx_guard_leave();
	rsx_conn_destroy(c);
	return ret;
}

static void rsx_rdma_hello(const struct rsx_conn *c, struct rsx_hello *h)
{
	h->qpn = rsx_conn_id(c);
	h->psn = c->psn;
	memcpy(h->gid, c->dev->gid.raw, 16);
	h->mtu = c->dev->mtu;
	h->rq_depth = RSX_RQ_DEPTH;
	h->ring_size = c->ring_size;
	h->ring_addr = (uintptr_t)c->ring;
	h->rkey = c->ring_mr->rkey;
}

static const char *rsx_qp_state_str(int s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD",
					 "SQE", "ERR" };

	return s >= 0 && s < 7 ? n[s] : "?";
}

/* Logs where the QP really is: "are both QPs in RTS?" is question one. */
static void rsx_qp_log_state(struct rsx_conn *c, const char *what, int ret)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	if (rsx_ibv.query_qp(c->qp, &a, IBV_QP_STATE, &ia))
		a.qp_state = -1;
	rsx_info("QP %u: %s failed (%s); QP is in %s", rsx_conn_id(c), what,
		 strerror(ret), rsx_qp_state_str(a.qp_state));
}

/*
 * INIT -> RTR -> RTS with the peer's QP, and the staging mirror of its ring.
 */
static int rsx_rdma_connect(struct rsx_conn *c, const struct rsx_hello *peer)
{
	struct ibv_qp_attr qa;
	int ret, mtu;

	/*
	 * The staging mirror is as large as the peer's ring, and pinned: a
	 * peer must not make us pin what it likes (at most four times our
	 * own ring, or 4 MiB).
	 */
	if (peer->ring_size > 4 * c->ring_size &&
	    peer->ring_size > RSX_PEER_RING_FREE) {
		rsx_info("QP %u: peer's ring of %u bytes is too large",
			 rsx_conn_id(c), peer->ring_size);
		return -ENOBUFS;
	}
	c->peer = *peer;
	rsx_guard_enter();
	ret = -rsx_mempool_alloc(c->dev->stage_pool,
				 peer->ring_size + RSX_CTRL_SIZE, &c->txblk);
	if (ret)
		goto err;
	c->txmem = c->txblk.addr;
	c->txmem_len = c->txblk.len;
	c->stage = c->txmem;
	c->ctrl_out = (struct rsx_ctrl *)(c->txmem + peer->ring_size);
	/* in the connection's PD, as its QP: the device checks the lkey so */
	c->stage_mr = rsx_ibv.reg_mr(c->pd, c->txmem, c->txmem_len,
				     IBV_ACCESS_LOCAL_WRITE);
	if (!c->stage_mr) {
		ret = errno ? errno : ENOMEM;
		rsx_info("QP %u: reg_mr of the staging buffer failed: %s",
			 rsx_conn_id(c), strerror(ret));
		goto err;
	}

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	mtu = peer->mtu < c->dev->mtu ? peer->mtu : c->dev->mtu;
	qa.path_mtu = mtu;
	qa.dest_qp_num = peer->qpn;
	qa.rq_psn = peer->psn;
	qa.max_dest_rd_atomic = 0;
	qa.min_rnr_timer = 12;
	qa.ah_attr.is_global = 1;
	memcpy(qa.ah_attr.grh.dgid.raw, peer->gid, 16);
	qa.ah_attr.grh.sgid_index = c->dev->gid_index;
	qa.ah_attr.grh.hop_limit = 64;
	qa.ah_attr.grh.traffic_class = rsx_config.tclass;	/* RSOCKX_TCLASS */
	qa.ah_attr.sl = rsx_config.sl;				/* RSOCKX_SL */
	qa.ah_attr.port_num = c->dev->port;
	ret = rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE | IBV_QP_AV |
				IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER);
	if (ret) {
		rsx_qp_log_state(c, "INIT->RTR", ret);
		goto err;
	}
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.timeout = rsx_config.qp_timeout;	/* RSOCKX_QP_TIMEOUT_MS */
	qa.retry_cnt = RSX_QP_RETRY_CNT;	/* 7 would retry for ever */
	qa.rnr_retry = 7;
	qa.sq_psn = c->psn;
	qa.max_rd_atomic = 0;
	ret = rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT |
				IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret) {
		rsx_qp_log_state(c, "RTR->RTS", ret);
		goto err;
	}
	rsx_guard_leave();
	c->qp_ready = 1;
	if (rsx_config.wrap_handlers)
		rsx_sig_wrap_all();	/* the spins count handlers from now on */
	rsx_dbg("QP %u -> %u RTS, mtu %d, ring %u/%u", rsx_conn_id(c),
		peer->qpn, 128 << mtu, c->ring_size, peer->ring_size);
	return 0;

err:
	rsx_guard_leave();
	return -ret;
}

/*
 * Posts wr into the peer's ring (its remote address an offset from the
 * ring's start).  wr_id carries the running count of requests, so that a
 * signalled one's completion retires all before it.
 */
static int rsx_post_wr(struct rsx_conn *c, struct ibv_send_wr *wr,
		       uint64_t roff)
{
	struct ibv_send_wr *bad;
	int ret;

	wr->wr_id = ++c->sq_posted;
	wr->wr.rdma.remote_addr = c->peer.ring_addr + roff;
	wr->wr.rdma.rkey = c->peer.rkey;
	ret = ibv_post_send(c->qp, wr, &bad);
	if (ret) {
		c->sq_posted--;
		rsx_info("QP %u: post_send failed: %s", rsx_conn_id(c),
			 strerror(ret));
		return -ret;
	}
	return 0;
}

/*
 * Posts one RDMA WRITE WITH IMMEDIATE of len bytes at src into the peer's
 * memory at remote offset roff from the ring's start.  Every
 * RSX_SIGNAL_EVERY-th request is signalled.
 */
static int rsx_rdma_post(struct rsx_conn *c, uint64_t roff, const void *src,
			 uint32_t len, uint32_t imm, int force_signal)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)src;
	sge.length = len;
	sge.lkey = c->stage_mr ? c->stage_mr->lkey : 0;
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(imm);
	if (len && len <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (force_signal || ++c->unsignaled >= RSX_SIGNAL_EVERY) {
		wr.send_flags |= IBV_SEND_SIGNALED;
		c->unsignaled = 0;
	}
	return rsx_post_wr(c, &wr, roff);
}

static int rsx_rdma_repost(struct rsx_conn *c, uint32_t n)
{
	return rsx_post_recvs(c, n);
}

static void rsx_rdma_event(struct rsx_conn *c);

/* Takes in all completions; returns how many there were. */
static int rsx_rdma_poll(struct rsx_conn *c)
{
	struct ibv_wc wc[RSX_POLL_BATCH];
	int n, i, total = 0;

	if (unlikely(__atomic_load_n(&c->cq_fired, __ATOMIC_RELAXED)))
		rsx_rdma_event(c);
	for (;;) {
		n = ibv_poll_cq(c->cq, RSX_POLL_BATCH, wc);
		if (n <= 0)
			break;
		total += n;
		for (i = 0; i < n; i++) {
			/*
			 * After the peer's DOWNGRADE its QP may be gone
			 * under our writes still in flight: their bytes go
			 * again over TCP, their errors mean nothing.
			 */
			if (wc[i].status != IBV_WC_SUCCESS && c->peer_down)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				/* a flushed request after the first error */
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					rsx_info("QP %u: completion error: %s",
						 rsx_conn_id(c),
						 rsx_ibv.wc_status_str(
							wc[i].status));
				/*
				 * Retries used up (RSOCKX_QP_TIMEOUT_MS): no
				 * fault of either end's rsockx; counted apart
				 * so that a user can tell the two.
				 */
				if (rsx_conn_fail(c, -ECONNRESET,
						  "work request failed") &&
				    wc[i].status == IBV_WC_RETRY_EXC_ERR)
					rsx_stat_inc(RSX_STAT_qp_timeouts);
				continue;
			}
			if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				rsx_conn_recv(c, be32toh(wc[i].imm_data));
			else if (wc[i].wr_id > c->sq_done)
				c->sq_done = wc[i].wr_id;
		}
		if (n < RSX_POLL_BATCH)
			break;
	}
	return total;
}

/*
 * Is the peer's QP still there?  A zero-length RDMA WRITE (no immediate:
 * the peer's receives and credits are untouched) completes when it does,
 * and fails after the transport's retries (RSOCKX_QP_TIMEOUT_MS) when its
 * process is gone, which breaks the connection.  For a peer whose TCP end
 * closed before its cut-over: that is a half-close or an end, and only
 * the QP can tell; and for a client that does not cut over (conn.h).
 */
static int rsx_rdma_ping(struct rsx_conn *c)
{
	struct ibv_send_wr wr;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	ret = rsx_post_wr(c, &wr, 0);
	if (!ret)
		rsx_dbg("QP %u: ping", rsx_conn_id(c));
	return ret;
}

/* Asks for a completion event; 0 if none can be missed by sleeping now. */
static int rsx_rdma_arm(struct rsx_conn *c, uint64_t xtok)
{
	(void)xtok;	/* a CQ wakes its channel only */
	__atomic_store_n(&c->cq_fired, 0, __ATOMIC_SEQ_CST);
	return -ibv_req_notify_cq(c->cq, 0);
}

/*
 * The CQ's event came: on its own channel, consumed here (non-blocking
 * fd); on the device's, taken by rsx_rdma_chan_drain.  Armed no more.
 */
static void rsx_rdma_event(struct rsx_conn *c)
{
	struct ibv_cq *cq;
	void *ctx;

	if (__atomic_exchange_n(&c->cq_fired, 0, __ATOMIC_ACQ_REL))
		c->armed = 0;
	if (!c->chan)
		return;
	rsx_guard_enter();
	if (!rsx_ibv.get_cq_event(c->chan, &cq, &ctx)) {
		rsx_ibv.ack_cq_events(cq, 1);
		c->armed = 0;
	}
	rsx_guard_leave();
}

/*
 * Takes every event off a device's channel (non-blocking): each is
 * acknowledged at once, marks its connection (cq_fired), kicks the thread
 * that may sleep on it, and gives the readiness watcher's key for it.
 * Without the connection's lock, so under rsx_cq_lock: see there.
 * Returns how many keys it put in keys (max at most).
 */
int rsx_rdma_chan_drain(struct ibv_comp_channel *chan, uint64_t *keys,
			int max)
{
	uint64_t key, one = 1;
	struct rsx_conn *c;
	struct ibv_cq *cq;
	int n = 0, kick;
	void *ctx;

	pthread_mutex_lock(&rsx_cq_lock);
	rsx_guard_enter();
	while (n < max && !rsx_ibv.get_cq_event(chan, &cq, &ctx)) {
		rsx_ibv.ack_cq_events(cq, 1);
		c = ctx;
		__atomic_store_n(&c->cq_fired, 1, __ATOMIC_SEQ_CST);
		kick = __atomic_load_n(&c->kick_fd, __ATOMIC_SEQ_CST);
		if (kick >= 0) {
			if (rsx_libc.write(kick, &one, sizeof(one)) < 0)
				rsx_dbg("QP %u: kick: %s", rsx_conn_id(c),
					strerror(errno));
			else
				rsx_stat_inc(RSX_STAT_chan_kicks);
		}
		key = __atomic_load_n(&c->watch_key, __ATOMIC_SEQ_CST);
		if (key)
			keys[n++] = key;
	}
	rsx_guard_leave();
	pthread_mutex_unlock(&rsx_cq_lock);
	return n;
}

/* -1: the device's (rsx_dev_chan), which the watcher drains */
static int rsx_rdma_channel(const struct rsx_conn *c)
{
	return c->chan ? c->chan->fd : -1;
}

/* RSOCKX_TEST_QP_ERR_AFTER: the QP moves to the error state. */
static void rsx_rdma_break(struct rsx_conn *c)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

	rsx_guard_enter();
	if (rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE))
		rsx_warn("test: QP %u to ERR failed", rsx_conn_id(c));
	rsx_guard_leave();
	rsx_info("test: QP %u moved to ERR after %llu bytes", rsx_conn_id(c),
		 (unsigned long long)c->tx_head);
}

const struct rsx_transport rsx_rdma_transport = {
	.name = "rdma",
	.hello = rsx_rdma_hello,
	.connect = rsx_rdma_connect,
	.post = rsx_rdma_post,
	.poll = rsx_rdma_poll,
	.repost = rsx_rdma_repost,
	.ping = rsx_rdma_ping,
	.arm = rsx_rdma_arm,
	.event = rsx_rdma_event,
	.channel = rsx_rdma_channel,
	.destroy = rsx_rdma_destroy,
	.test_break = rsx_rdma_break,
};
