// SPDX-License-Identifier: MIT
/*
 * RDMA resources and the ring data path of one upgraded connection
 * (conn.h).  Callers hold the owning socket's lock.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "shm.h"
#include "sig.h"
#include "stats.h"

/*
 * Queue depths.  rxe keeps every queue in memory mapped into the process,
 * so depth is most of an idle connection's cost.  The data path needs
 * little: a write moves at most a quarter of the ring (RSX_CHUNK_MAX) per
 * message, so a bulk stream has four DATA messages in flight, and a
 * stream of small writes is held by the SQ long before 96 receives run
 * out.  128 is the smallest rq_depth the wire allows (RSX_WIRE_RQ_MIN);
 * a quarter of it stays reserved for control messages.  The CQ takes
 * every request of both queues, signalled or not, so it cannot overflow.
 */
#define RSX_SQ_DEPTH		64
#define RSX_RQ_DEPTH		128
#define RSX_RQ_RESERVE		32	/* receives kept for control messages */
#define RSX_CREDIT_MSGS		32	/* return message credits this often */
#define RSX_RQ_BATCH		16	/* re-post receives this many at once */
#define RSX_SIGNAL_EVERY	16
#define RSX_CHUNK_MAX		(256u * 1024)
#define RSX_POLL_BATCH		32

#define RSX_IMM(type, val)	(((uint32_t)(type) << 28) | (val))

static uint32_t rsx_rand24(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
	return v & 0xffffff;
}

static void rsx_chan_hide(struct ibv_comp_channel *chan)
{
	chan->fd = rsx_fd_hide(chan->fd);
	rsx_libc.fcntl(chan->fd, F_SETFL,
		       rsx_libc.fcntl(chan->fd, F_GETFL) | O_NONBLOCK);
}

#define RSX_PEER_RING_FREE (4u << 20)

/* Every connection with a QP, for rsx_conn_port_down(). */
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
void rsx_conn_fork_child(void)
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
int rsx_conn_port_down(struct ibv_context *ctx, int port)
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

/*
 * What every connection has, whatever its transport: the kick, the
 * random start of its sequence and its nonce.
 */
struct rsx_conn *rsx_conn_alloc(uint32_t ring_size)
{
	struct rsx_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ring_size = ring_size;
	c->shm_evfd = c->shm_peer_evfd = c->shm_memfd = -1;
	c->kick_fd = rsx_fd_hide(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (c->kick_fd < 0) {
		free(c);
		return NULL;
	}
	c->rx_tcp_limit = -1;
	c->psn = rsx_rand24();
	if (getrandom(&c->nonce, sizeof(c->nonce), GRND_NONBLOCK) !=
	    sizeof(c->nonce))
		c->nonce = ((uint64_t)rsx_rand24() << 40) ^ (uint64_t)c;
	return c;
}

int rsx_conn_create(struct rsx_dev *dev, uint32_t ring_size,
		    struct rsx_conn **out)
{
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
	c->chan = rsx_ibv.create_comp_channel(dev->ctx);
	if (!c->chan)
		goto err_errno;
	rsx_chan_hide(c->chan);
	c->cq = rsx_ibv.create_cq(dev->ctx, RSX_SQ_DEPTH + RSX_RQ_DEPTH, c,
				  c->chan, 0);
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

/* Tears everything down; the peer's rkey for our ring dies with ring_mr. */
void rsx_conn_destroy(struct rsx_conn *c)
{
	if (c->shm) {
		rsx_shm_destroy(c);
		return;
	}
	rsx_live_del(c);
	rsx_guard_enter();
	if (c->qp) {
		rsx_ibv.destroy_qp(c->qp);
		rsx_stat_inc(RSX_STAT_qps_destroyed);
	}
	if (c->cq)
		rsx_ibv.destroy_cq(c->cq);
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
	rsx_fd_private_close(c->kick_fd);
	rsx_guard_leave();
	rsx_qp_slot_give(c);
	free(c);
}

void rsx_conn_hello(struct rsx_conn *c, int type, struct rsx_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->version = RSX_WIRE_VERSION;
	h->nonce = c->nonce;
	if (c->shm) {
		rsx_shm_hello(c, h);
		return;
	}
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
int rsx_conn_connect(struct rsx_conn *c, const struct rsx_hello *peer)
{
	struct ibv_qp_attr qa;
	int ret, mtu;

	if (c->shm)
		return rsx_shm_connect(c, peer);
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
static int rsx_post(struct rsx_conn *c, uint64_t roff, const void *src,
		    uint32_t len, uint32_t lkey, uint32_t imm, int force_signal)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int ret;

	if (c->shm) {
		/* the bytes are in the peer's memory already (stage, ctrl_out) */
		c->sq_done = ++c->sq_posted;
		c->tx_msgs++;
		rsx_shm_put(c, imm);
		return 0;
	}
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)src;
	sge.length = len;
	sge.lkey = lkey;
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
	ret = rsx_post_wr(c, &wr, roff);
	if (!ret)
		c->tx_msgs++;
	return ret;
}

static uint32_t rsx_stage_lkey(const struct rsx_conn *c)
{
	return c->stage_mr ? c->stage_mr->lkey : 0;
}

static int rsx_sq_full(const struct rsx_conn *c)
{
	return c->sq_posted - c->sq_done >= RSX_SQ_DEPTH - 2;
}

/* Messages the peer can still take; control messages may use the reserve. */
static int rsx_msgs_ok(const struct rsx_conn *c, int control)
{
	uint64_t out = c->tx_msgs - c->tx_msgs_acked;
	uint64_t max = c->peer.rq_depth - (control ? 0 : RSX_RQ_RESERVE);

	return out < max && !rsx_sq_full(c);
}

static int rsx_post_ctrl(struct rsx_conn *c, int type)
{
	size_t off = 0, len = 0;

	if (c->err)
		return c->err;
	if (!rsx_msgs_ok(c, 1))
		return -EAGAIN;
	switch (type) {
	case RSX_IMM_CREDIT:
		c->ctrl_out->credit_bytes = c->rx_tail;
		c->ctrl_out->credit_msgs = c->rx_msgs;
		off = offsetof(struct rsx_ctrl, credit_bytes);
		len = 2 * sizeof(uint64_t);
		break;
	case RSX_IMM_CUTOVER:
		c->ctrl_out->cutover = c->tx_tcp;
		c->ctrl_out->cutover_sum = c->tx_sum;
		off = offsetof(struct rsx_ctrl, cutover);
		len = c->oob ? offsetof(struct rsx_ctrl, pad) - off :
			       sizeof(uint64_t);
		break;
	case RSX_IMM_DOWN:
		c->ctrl_out->down_rx = c->rx_tail;
		c->ctrl_out->down_tx = c->tx_head;
		off = offsetof(struct rsx_ctrl, down_rx);
		len = 2 * sizeof(uint64_t);
		break;
	}
	return rsx_post(c, c->peer.ring_size + off,
			(uint8_t *)c->ctrl_out + off, len, rsx_stage_lkey(c),
			RSX_IMM(type, 0),
			type == RSX_IMM_FIN || type == RSX_IMM_DOWN);
}

/* Our sends move to the ring: CUTOVER(n) tells the peer how many bytes to
 * read from TCP first. */
int rsx_conn_cutover(struct rsx_conn *c)
{
	int ret = rsx_post_ctrl(c, RSX_IMM_CUTOVER);

	if (!ret) {
		c->tx_ring = 1;
		rsx_dbg("QP %u: cutover after %llu TCP bytes", rsx_conn_id(c),
			(unsigned long long)c->tx_tcp);
	}
	return ret;
}

/*
 * Receives go back to the receive queue RSX_RQ_BATCH at a time, and all of
 * them before a CREDIT: a message the peer is credited for must find its
 * receive posted (the peer sends up to rq_depth messages beyond the last
 * credit).
 */
static int rsx_repost(struct rsx_conn *c)
{
	int ret;

	if (!c->rq_repost || c->err || c->peer_down)
		return 0;
	if (c->shm) {
		c->rq_repost = 0;	/* a queue entry is free once read */
		return 0;
	}
	ret = rsx_post_recvs(c, c->rq_repost);
	if (ret) {
		rsx_conn_fail(c, ret, "post_recv failed");
		return ret;
	}
	c->rq_repost = 0;
	return 0;
}

static void rsx_maybe_credit(struct rsx_conn *c)
{
	if (!c->qp_ready || !c->stage || c->peer_down || c->down_sent)
		return;
	if (c->rx_tail - c->credit_bytes_sent < c->ring_size / 4 &&
	    c->rx_msgs - c->credit_msgs_sent < RSX_CREDIT_MSGS)
		return;
	if (rsx_repost(c) || rsx_post_ctrl(c, RSX_IMM_CREDIT))
		return;	/* retried on the next poll */
	c->credit_bytes_sent = c->rx_tail;
	c->credit_msgs_sent = c->rx_msgs;
}

void rsx_conn_fail(struct rsx_conn *c, int err, const char *why)
{
	if (!c->err) {
		c->err = err;
		/* the deadline's ping: TCP carries on (rsx_cut_abandoned) */
		if (c->cut_ping && !c->peer_cutover && !c->tx_ring) {
			rsx_info("QP %u: the client's QP does not answer: %s",
				 rsx_conn_id(c), why);
			return;
		}
		rsx_stat_inc(RSX_STAT_conn_errors);
		rsx_info("QP %u: connection broken: %s", rsx_conn_id(c), why);
	}
}

static void rsx_handle_recv(struct rsx_conn *c, uint32_t imm)
{
	uint32_t type = imm >> 28, val = imm & 0x0fffffff;
	uint64_t cb, cm, n;

	c->rx_msgs++;
	c->rq_repost++;
	switch (type) {
	case RSX_IMM_DATA:
		if (!val || val > c->ring_size - (c->rx_head - c->rx_tail) ||
		    c->peer_fin) {
			rsx_conn_fail(c, -ECONNRESET, "DATA beyond the ring");
			return;
		}
		c->rx_head += val;
		rsx_stat_add(c->shm ? RSX_STAT_shm_rx_bytes :
			     RSX_STAT_rdma_rx_bytes, val);
		break;
	case RSX_IMM_CREDIT:
		cb = c->ctrl->credit_bytes;
		cm = c->ctrl->credit_msgs;
		if (cb < c->tx_acked || cb > c->tx_head ||
		    cm < c->tx_msgs_acked || cm > c->tx_msgs) {
			rsx_conn_fail(c, -ECONNRESET, "CREDIT out of range");
			return;
		}
		c->tx_acked = cb;
		c->tx_msgs_acked = cm;
		break;
	case RSX_IMM_CUTOVER:
		n = c->ctrl->cutover;
		if (c->peer_cutover || n < c->rx_tcp || n > INT64_MAX) {
			rsx_conn_fail(c, -ECONNRESET, "bad CUTOVER");
			return;
		}
		c->peer_cutover = 1;
		c->rx_tcp_limit = n;
		c->peer_sum = c->ctrl->cutover_sum;
		break;
	case RSX_IMM_FIN:
		c->peer_fin = 1;
		break;
	case RSX_IMM_DOWN:
		/*
		 * Every write of the peer came before, so all it wrote is
		 * in; what it read lies between what it credited and what
		 * we wrote.
		 */
		cb = c->ctrl->down_rx;
		n = c->ctrl->down_tx;
		if (c->peer_down || n != c->rx_head || cb < c->tx_acked ||
		    cb > c->tx_head) {
			rsx_conn_fail(c, -ECONNRESET, "bad DOWNGRADE");
			return;
		}
		c->peer_down = 1;
		c->tx_resend = cb;
		c->tx_ring = 0;
		rsx_info("QP %u: the peer goes back to TCP (exec); %llu of "
			 "our bytes come again over TCP", rsx_conn_id(c),
			 (unsigned long long)(c->tx_head - cb));
		break;
	default:
		rsx_conn_fail(c, -ECONNRESET, "unknown message");
	}
}

/*
 * Takes in all completions.  Returns how many there were, or c->err once
 * the connection is broken.
 */
int rsx_conn_poll(struct rsx_conn *c)
{
	struct ibv_wc wc[RSX_POLL_BATCH];
	int n, i, total = 0;
	uint32_t imm;

	while (c->shm && !c->err && !c->peer_down &&
	       (n = rsx_shm_next(c, &imm)) != 0) {
		if (n < 0) {
			rsx_conn_fail(c, n, "message queue overrun");
			break;
		}
		rsx_handle_recv(c, imm);
		total++;
	}
	for (; !c->shm;) {
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
				rsx_conn_fail(c, -ECONNRESET,
					      "work request failed");
				continue;
			}
			if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				rsx_handle_recv(c, be32toh(wc[i].imm_data));
			else if (wc[i].wr_id > c->sq_done)
				c->sq_done = wc[i].wr_id;
		}
		if (n < RSX_POLL_BATCH)
			break;
	}
	/*
	 * Without a completion nothing that a re-post or a CREDIT waits for
	 * has changed: an empty poll, most polls of a spin, stops here.
	 */
	if (!total)
		return c->err;
	if (c->rq_repost >= RSX_RQ_BATCH)
		rsx_repost(c);
	if (!c->err)
		rsx_maybe_credit(c);
	return c->err ? c->err : total;
}

size_t rsx_conn_tx_room(const struct rsx_conn *c)
{
	if (!rsx_msgs_ok(c, 0))
		return 0;
	return c->peer.ring_size - (c->tx_head - c->tx_acked);
}

/*
 * memcpy in pieces of 4 KiB.  From 8 KiB on (16 KiB with AVX-512) glibc's
 * memcpy copies with `rep movsb` on a CPU that has ERMS without FSRM.
 * QEMU's TCG, the test VM's CPU, runs `rep movsb` at a seventh of the
 * speed of the vector loop that glibc takes for a piece: the 1 MiB stream
 * went from about 0.8x the raw-verbs ceiling to 0.9x and more
 * (ARCHITECTURE, Data path).  On hardware a piece costs one call: 4 KiB
 * pieces of a 64 KiB copy in cache ran at 86 GB/s instead of 105 (a
 * server CPU with FSRM), and beyond the cache as fast as one call.
 */
#define RSX_COPY_PIECE	4096

static void rsx_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	while (n > RSX_COPY_PIECE) {
		memcpy(dst, src, RSX_COPY_PIECE);
		dst += RSX_COPY_PIECE;
		src += RSX_COPY_PIECE;
		n -= RSX_COPY_PIECE;
	}
	memcpy(dst, src, n);
}

/*
 * Copies len bytes between buf and iov, starting skip bytes into iov:
 * out of iov into buf (to_iov == 0), or out of buf into iov.
 */
static void rsx_iov_copy(const struct iovec *iov, int iovcnt, size_t skip,
			 uint8_t *buf, size_t len, int to_iov)
{
	uint8_t *p;
	size_t n;
	int i;

	for (i = 0; i < iovcnt && len; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - skip;
		if (n > len)
			n = len;
		p = (uint8_t *)iov[i].iov_base + skip;
		rsx_copy(to_iov ? p : buf, to_iov ? buf : p, n);
		buf += n;
		len -= n;
		skip = 0;
	}
}

/* RSOCKX_TEST_QP_ERR_AFTER: the QP breaks when tx_head crosses the mark. */
static void rsx_test_qp_err(struct rsx_conn *c, uint32_t chunk)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	uint64_t mark = rsx_config.test_qp_err_after;

	if (c->shm)
		return;
	if (c->tx_head < mark || c->tx_head - chunk >= mark)
		return;
	rsx_guard_enter();
	if (rsx_ibv.modify_qp(c->qp, &qa, IBV_QP_STATE))
		rsx_warn("test: QP %u to ERR failed", rsx_conn_id(c));
	rsx_guard_leave();
	rsx_info("test: QP %u moved to ERR after %llu bytes", rsx_conn_id(c),
		 (unsigned long long)c->tx_head);
}

/*
 * Writes up to len bytes of iov (after skip) into the peer's ring, as much
 * as credits allow now.  Returns the bytes written (0 if none fit).
 */
ssize_t rsx_conn_write(struct rsx_conn *c, const struct iovec *iov,
		       int iovcnt, size_t skip, size_t len)
{
	uint32_t size = c->peer.ring_size, off, chunk, max;
	size_t done = 0, room;
	int ret;

	if (c->err)
		return c->err;
	max = size / 4 < RSX_CHUNK_MAX ? size / 4 : RSX_CHUNK_MAX;
	while (done < len) {
		room = rsx_conn_tx_room(c);
		if (!room)
			break;
		off = c->tx_head & (size - 1);
		chunk = len - done;
		if (chunk > room)
			chunk = room;
		if (chunk > size - off)
			chunk = size - off;
		if (chunk > max)
			chunk = max;
		rsx_iov_copy(iov, iovcnt, skip + done, c->stage + off, chunk, 0);
		ret = rsx_post(c, off, c->stage + off, chunk,
			       rsx_stage_lkey(c), RSX_IMM(RSX_IMM_DATA, chunk),
			       0);
		if (ret)
			return done ? (ssize_t)done : ret;
		c->tx_head += chunk;
		done += chunk;
		rsx_stat_add(c->shm ? RSX_STAT_shm_tx_bytes :
			     RSX_STAT_rdma_tx_bytes, chunk);
		if (unlikely(rsx_config.test_qp_err_after))
			rsx_test_qp_err(c, chunk);
	}
	if (c->shm && done)
		rsx_shm_sent(c);
	return done;
}

size_t rsx_conn_readable(const struct rsx_conn *c)
{
	return c->rx_head - c->rx_tail;
}

/* Copies up to len readable ring bytes into iov (after skip). */
size_t rsx_conn_read(struct rsx_conn *c, const struct iovec *iov, int iovcnt,
		     size_t skip, size_t len, int peek)
{
	size_t avail = rsx_conn_readable(c), n, first;
	uint32_t off = c->rx_tail & (c->ring_size - 1);

	n = len < avail ? len : avail;
	first = c->ring_size - off < n ? c->ring_size - off : n;
	rsx_iov_copy(iov, iovcnt, skip, c->ring + off, first, 1);
	if (n > first)
		rsx_iov_copy(iov, iovcnt, skip + first, c->ring, n - first, 1);
	if (!peek && n) {
		c->rx_tail += n;
		rsx_maybe_credit(c);
	}
	return n;
}

int rsx_conn_fin(struct rsx_conn *c)
{
	int ret;

	if (c->fin_sent || !c->tx_ring || c->down_sent)
		return 0;
	ret = rsx_post_ctrl(c, RSX_IMM_FIN);
	if (!ret) {
		c->fin_sent = 1;
		c->fin_wr = c->sq_posted;
	}
	return ret;
}

/*
 * Is the peer's QP still there?  A zero-length RDMA WRITE (no immediate:
 * the peer's receives and credits are untouched) completes when it does,
 * and fails after the transport's retries (RSOCKX_QP_TIMEOUT_MS) when its
 * process is gone, which breaks the connection.  For a peer whose TCP end
 * closed before its cut-over: that is a half-close or an end, and only
 * the QP can tell; and for a client that does not cut over (conn.h).
 */
int rsx_conn_ping(struct rsx_conn *c)
{
	struct ibv_send_wr wr;
	int ret;

	if (c->err || rsx_sq_full(c))
		return c->err ? c->err : -EAGAIN;
	if (c->shm) {
		/* no transport to ask: is the peer's process still there? */
		c->sq_done = ++c->sq_posted;
		if (rsx_shm_alive(c))
			return 0;
		/*
		 * A client that never cut over and let go (its whole stream
		 * went on TCP before our answer was of use): TCP carries on,
		 * as after the deadline's ping (rsx_cut_abandoned).
		 */
		if (!c->peer_cutover && !c->tx_ring)
			c->cut_ping = 1;
		rsx_conn_fail(c, -ECONNRESET, "the peer's memory or process is gone");
		return 0;
	}
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	ret = rsx_post_wr(c, &wr, 0);
	if (!ret)
		rsx_dbg("QP %u: ping", rsx_conn_id(c));
	return ret;
}

/* Asks for a completion event; 0 if none can be missed by sleeping now. */
int rsx_conn_arm(struct rsx_conn *c)
{
	int ret = c->shm ? rsx_shm_arm(c) : -ibv_req_notify_cq(c->cq, 0);

	c->armed = !ret;
	return ret;
}

/* The completion channel fired: consume the event (non-blocking fd). */
void rsx_conn_event(struct rsx_conn *c)
{
	struct ibv_cq *cq;
	void *ctx;

	if (c->shm) {
		rsx_shm_event(c);
		return;
	}
	rsx_guard_enter();
	if (!rsx_ibv.get_cq_event(c->chan, &cq, &ctx)) {
		rsx_ibv.ack_cq_events(cq, 1);
		c->armed = 0;
	}
	rsx_guard_leave();
}

int rsx_conn_chan_fd(const struct rsx_conn *c)
{
	if (c->shm)
		return c->shm_evfd;
	return c->chan->fd;
}

/*
 * Our last message: the peer takes the data path back to TCP (conn.h).
 * Nothing is posted after it.
 */
int rsx_conn_downgrade(struct rsx_conn *c)
{
	int ret;

	if (c->down_sent)
		return 0;
	ret = rsx_post_ctrl(c, RSX_IMM_DOWN);
	if (ret)
		return ret;
	c->down_sent = 1;
	c->down_wr = c->sq_posted;
	c->tx_ring = 0;
	return 0;
}

/*
 * Waits up to timeout_ms until request wr has completed: requests complete
 * in order, so everything posted before it is then in the peer's memory.
 */
int rsx_conn_wait_sent(struct rsx_conn *c, uint64_t wr, int timeout_ms)
{
	struct pollfd pfd = { .fd = rsx_conn_chan_fd(c), .events = POLLIN };
	int ret, waited = 0;

	while (c->sq_done < wr && !c->err) {
		ret = rsx_conn_poll(c);
		if (ret < 0)
			break;
		if (c->sq_done >= wr)
			break;
		if (rsx_conn_arm(c))
			break;
		if (rsx_conn_poll(c) > 0)
			continue;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		rsx_libc.poll(&pfd, 1, 10);
		waited += 10;
		if (pfd.revents)
			rsx_conn_event(c);
	}
	return c->sq_done >= wr ? 0 : c->err ? c->err : -EIO;
}

/*
 * Waits, without the socket's lock, until rsx_conn_wake moves wake_gen
 * past gen, or until (CLOCK_MONOTONIC, absolute; NULL: no end).  Returns 0
 * (woken, or wake_gen had already moved: the caller looks again),
 * -ETIMEDOUT, or -EINTR.  After a signal handler the kernel treats this
 * wait as it treats a socket call's (signal(7)): without an end, restarted
 * under SA_RESTART and failed with EINTR otherwise; with one (the socket's
 * SO_RCVTIMEO/SO_SNDTIMEO), failed with EINTR.  So here the answer needs
 * no guess (rsx_guard_restartable).  The caller holds a waiters count,
 * which keeps c alive.
 */
int rsx_conn_nap(struct rsx_conn *c, uint32_t gen, const struct timespec *until)
{
	long ret;

	ret = syscall(SYS_futex, &c->wake_gen,
		      FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, gen, until, NULL,
		      FUTEX_BITSET_MATCH_ANY);
	if (ret < 0 && (errno == ETIMEDOUT || errno == EINTR))
		return -errno;
	return 0;
}

/* Called with the socket's lock held, so that c outlives the call. */
void rsx_conn_wake(struct rsx_conn *c)
{
	__atomic_add_fetch(&c->wake_gen, 1, __ATOMIC_RELEASE);
	if (c->waiters)
		syscall(SYS_futex, &c->wake_gen, FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
			INT_MAX, NULL, NULL, 0);
}
