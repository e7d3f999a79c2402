// SPDX-License-Identifier: MIT
/*
 * The ring protocol of one upgraded connection (conn.h): credits,
 * messages, cut-over, FIN, DOWNGRADE, and the waits, over either
 * transport (transport.h: rdma.c, shm.c).  Callers hold the owning
 * socket's lock.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "libc.h"
#include "log.h"
#include "sock.h"
#include "stats.h"

/*
 * A write moves at most a quarter of the peer's ring (RSX_CHUNK_MAX) per
 * DATA message.  Of the peer's window of messages (its rq_depth), a part
 * stays reserved for control messages.
 */
#define RSX_RQ_RESERVE		32	/* receives kept for control messages */
#define RSX_CREDIT_MSGS		32	/* return message credits this often */
#define RSX_RQ_BATCH		16	/* re-post receives this many at once */
#define RSX_CHUNK_MAX		(256u * 1024)

#define RSX_IMM(type, val)	(((uint32_t)(type) << 28) | (val))

static uint32_t rsx_rand24(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
	return v & 0xffffff;
}

/*
 * What every connection has, whatever its transport: the random start of
 * its sequence and its nonce.  Its kick comes with its first sleep.
 */
struct rsx_conn *rsx_conn_alloc(uint32_t ring_size)
{
	struct rsx_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ring_size = ring_size;
	c->kick_fd = -1;
	c->rx_tcp_limit = -1;
	/* in band the stream starts here; out of band the socket's go on */
	c->tx_sum = c->rx_sum = RSX_SUM_INIT;
	c->psn = rsx_rand24();
	if (getrandom(&c->nonce, sizeof(c->nonce), GRND_NONBLOCK) !=
	    sizeof(c->nonce))
		c->nonce = ((uint64_t)rsx_rand24() << 40) ^ (uint64_t)c;
	return c;
}

void rsx_conn_destroy(struct rsx_conn *c)
{
	c->tp->destroy(c);
	rsx_fd_private_close(c->kick_fd);
	free(c);
}

void rsx_conn_hello(struct rsx_conn *c, int type, struct rsx_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->version = RSX_WIRE_VERSION;
	h->nonce = c->nonce;
	c->tp->hello(c, h);
}

/* The peer's half, from its HELLO or ACK: the transport joins it. */
int rsx_conn_connect(struct rsx_conn *c, const struct rsx_hello *peer)
{
	return c->tp->connect(c, peer);
}

/*
 * One message: len bytes at src (in the stage) to offset roff of the
 * peer's ring, and imm.  Every message takes one of the peer's receives.
 */
static int rsx_post(struct rsx_conn *c, uint64_t roff, const void *src,
		    uint32_t len, uint32_t imm, int signal)
{
	int ret;

	c->tx_msgs++;
	ret = c->tp->post(c, roff, src, len, imm, signal);
	if (ret)
		c->tx_msgs--;
	return ret;
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
			(uint8_t *)c->ctrl_out + off, len, RSX_IMM(type, 0),
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
	ret = c->tp->repost ? c->tp->repost(c, c->rq_repost) : 0;
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

/* Returns 1 when this broke the connection (counted in conn_errors). */
int rsx_conn_fail(struct rsx_conn *c, int err, const char *why)
{
	if (c->err)
		return 0;
	c->err = err;
	/* a ping before any cut-over: TCP goes on (rsx_cut_abandoned) */
	if (c->cut_ping && !c->peer_cutover && !c->tx_ring) {
		rsx_info("QP %u: the peer's QP does not answer: %s",
			 rsx_conn_id(c), why);
		return 0;
	}
	rsx_stat_inc(RSX_STAT_conn_errors);
	rsx_info("QP %u: connection broken: %s", rsx_conn_id(c), why);
	return 1;
}

/* A message came: what the peer says, checked before it is believed. */
void rsx_conn_recv(struct rsx_conn *c, uint32_t imm)
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
 * Takes in all messages and completions.  Returns how many there were,
 * or c->err once the connection is broken.
 */
int rsx_conn_poll(struct rsx_conn *c)
{
	int total = c->tp->poll(c);

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

/* RSOCKX_TEST_QP_ERR_AFTER: the transport breaks when tx_head crosses it. */
static void rsx_test_break(struct rsx_conn *c, uint32_t chunk)
{
	uint64_t mark = rsx_config.test_qp_err_after;

	if (!c->tp->test_break || c->tx_head < mark ||
	    c->tx_head - chunk >= mark)
		return;
	c->tp->test_break(c);
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
			       RSX_IMM(RSX_IMM_DATA, chunk), 0);
		if (ret)
			return done ? (ssize_t)done : ret;
		c->tx_head += chunk;
		done += chunk;
		rsx_stat_add(c->shm ? RSX_STAT_shm_tx_bytes :
			     RSX_STAT_rdma_tx_bytes, chunk);
		if (unlikely(rsx_config.test_qp_err_after))
			rsx_test_break(c, chunk);
	}
	if (done && c->tp->posted)
		c->tp->posted(c);
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
 * Is the peer still there?  For a peer whose TCP end closed before its
 * cut-over (a half-close or an end: only the transport can tell), and for
 * a client that does not cut over (conn.h).  The transport answers now or
 * later (RDMA: a zero-length write that fails after the retries); a peer
 * that is gone breaks the connection.
 */
int rsx_conn_ping(struct rsx_conn *c)
{
	if (c->err || rsx_sq_full(c))
		return c->err ? c->err : -EAGAIN;
	return c->tp->ping(c);
}

/*
 * Asks for a wake-up; 0 if none can be missed by sleeping now.  xtok: of
 * the readiness stand-in, where the transport can wake it (transport.h);
 * 0: of the channel.
 */
int rsx_conn_arm_to(struct rsx_conn *c, uint64_t xtok)
{
	int ret;

	if (!c->tp->woken || c->x_off)
		xtok = 0;
	ret = c->tp->arm(c, xtok);
	c->armed = !ret;
	c->armed_x = !ret && xtok;
	return ret;
}

int rsx_conn_arm(struct rsx_conn *c)
{
	return rsx_conn_arm_to(c, 0);
}

/*
 * Takes back an arm on the readiness stand-in, so that no writer takes it
 * for bytes that the program has read already: its wake-up would land in x
 * after x was made to show what is left, readable with nothing to read,
 * which some programs (wrk) take for an error.  1 when there was one: the
 * caller arms anew once it has looked for what came meanwhile.
 */
int rsx_conn_disarm_x(struct rsx_conn *c)
{
	if (likely(!c->armed_x) || !c->armed || !c->tp->disarm)
		return 0;
	c->tp->disarm(c);
	c->armed = 0;
	return 1;
}

uint32_t rsx_conn_woken(struct rsx_conn *c)
{
	return c->tp->woken ? c->tp->woken(c) : 0;
}

/* The channel fired: consume the wake-up (non-blocking fd). */
void rsx_conn_event(struct rsx_conn *c)
{
	c->tp->event(c);
}

int rsx_conn_chan_fd(const struct rsx_conn *c)
{
	return c->tp->channel(c);
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
