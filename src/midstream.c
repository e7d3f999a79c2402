// SPDX-License-Identifier: MIT
/*
 * The socket's side of the out-of-band upgrade (oob.h): the counted TCP
 * data path of connections that may move to a queue pair at any moment,
 * the switch itself on either end, and the waits around it.  Negotiation
 * in band and the data path of upgraded connections are upgrade.c's;
 * the requests and answers on the RDMA CM are oob.c's.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "conn.h"
#include "dev.h"
#include "fdtab.h"
#include "libc.h"
#include "local.h"
#include "log.h"
#include "oob.h"
#include "probe.h"
#include "rdma.h"
#include "ready.h"
#include "share.h"
#include "shm.h"
#include "stats.h"
#include "upgrade.h"
#include "upgrade-int.h"

/*
 * The descriptor that wakes a sleeper without a connection when the
 * socket may still move to a queue pair (another thread takes a HELLO, a
 * request comes out of band), made on the first such sleep; -1 where
 * nothing can come.  Under s->lock.
 */
int rsx_wake_fd(struct rsx_sock *s)
{
	int fd;

	if (!rsx_may_move(s))
		return -1;
	if (s->wake_fd >= 0)
		return s->wake_fd;
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return -1;
	s->wake_fd = rsx_fd_move_high(fd);
	rsx_fd_set_private(s->wake_fd, NULL);
	return s->wake_fd;
}

/* Its last sleeper gone and no upgrade to come: the eventfd goes too. */
void rsx_wake_close(struct rsx_sock *s)
{
	if (s->wake_fd < 0 || s->wake_users || rsx_may_move(s))
		return;
	rsx_fd_private_close(s->wake_fd);
	s->wake_fd = -1;
}

/* s changed its data path under threads asleep on it: they look again. */
void rsx_wake_sleepers(struct rsx_sock *s)
{
	uint64_t one = 1;

	if (s->wake_fd >= 0 && rsx_libc.write(s->wake_fd, &one,
					      sizeof(one)) < 0)
		rsx_dbg("wake: %s", strerror(errno));
	rsx_wake_close(s);
	if (s->conn)
		rsx_kick(s->conn);
}

/*
 * The first send of a client whose rules say rdma, the probe's answer
 * still out: wait for it (RSOCKX_PROBE_TIMEOUT_MS at most, once per
 * destination, a non-blocking send too: the rule asks for it), and when
 * the server runs rsockx and the stream is still empty, lead it with a
 * HELLO after all.  1: CLIENT_NEW now.
 */
static int rsx_inband_try(struct rsx_sock *s)
{
	struct sockaddr_storage dst;
	int answer;

	s->inband_try = 0;
	if (s->state != RSX_ST_CLIENT_WAIT || s->tcp_tx || s->tcp_rx ||
	    rsx_sock_oob_dst(s, &dst))
		return 0;
	s->inband_try = 2;	/* the CM thread leaves it to us meanwhile */
	rsx_sock_unlock(s);
	answer = rsx_probe_wait((struct sockaddr *)&dst, sizeof(dst));
	rsx_sock_lock(s);
	s->inband_try = 0;
	if (answer != RSX_PROBE_YES || s->state != RSX_ST_CLIENT_WAIT ||
	    s->tcp_tx || s->tcp_rx)
		return 0;
	rsx_sock_set_state(s, RSX_ST_CLIENT_NEW);
	/*
	 * A reader asleep on TCP and the wake-up alone: the answer this
	 * thread may take off TCP would never wake it, and the server's
	 * bytes after it come by the ring.  It sleeps anew, on the
	 * connection.
	 */
	rsx_wake_sleepers(s);
	return 1;
}

/* The CM thread knocked: it takes the lock (a few ms at most) before us. */
static void rsx_counted_yield(struct rsx_sock *s)
{
	int i;

	rsx_sock_unlock(s);
	for (i = 0; i < 1000 && atomic_load(&s->cm_knock); i++)
		sched_yield();
	rsx_sock_lock(s);
}

/*
 * A connection that may move to a QP at any moment (oob.h): the bytes it
 * moves on TCP are counted, so every one of them passes here, under
 * s->lock, in non-blocking kernel calls; a blocking call sleeps with the
 * lock dropped.  *done: bytes of this call moved so far.  Returns the
 * call's result, or -ERESTART once the socket's data path changed (the
 * caller goes on with the rest of the call there).
 */
ssize_t rsx_counted_io(struct rsx_sock *s, int fd, const struct iovec *iov,
		       int iovcnt, size_t len, int flags, int nonblock,
		       int send, size_t *done)
{
	int peek = flags & MSG_PEEK;
	int waitall = !send && (flags & MSG_WAITALL) && !peek;
	ssize_t n;
	int ret;

	if (flags & MSG_OOB) {
		/* urgent data has its own place in TCP: it stays there */
		rsx_to_tcp(s, RSX_STAT_COUNT);
		return -ERESTART;
	}
	if (send && s->inband_try == 1 && rsx_inband_try(s))
		return -ERESTART;
	/* a fork child's: its CM thread asks once it alone holds s */
	if (unlikely(s->shared) && s->state == RSX_ST_CLIENT_WAIT)
		rsx_cm_running();
	for (;;) {
		if (unlikely(atomic_load_explicit(&s->cm_knock,
						  memory_order_relaxed)))
			rsx_counted_yield(s);
		if (unlikely(s->oob_ok) && s->state == RSX_ST_SERVER_WAIT)
			rsx_board_check(s, fd);	/* after a sleep: rsx_sleep */
		if (!rsx_counts(s))
			return -ERESTART;
		if (s->state == RSX_ST_SERVER_WAIT &&
		    rsx_now_ms() >= s->oob_until) {
			rsx_to_tcp(s, RSX_STAT_COUNT);
			return -ERESTART;
		}
		n = rsx_tcp_io(fd, iov, iovcnt, *done, len - *done,
			       flags | MSG_DONTWAIT, send);
		if (n > 0) {
			if (!peek && send) {
				s->tcp_tx += n;
				s->tx_sum = rsx_sum_iov(s->tx_sum, iov, iovcnt,
							*done, n);
				rsx_stat_add(RSX_STAT_tcp_tx_bytes, n);
			} else if (!peek) {
				s->tcp_rx += n;
				s->rx_sum = rsx_sum_iov(s->rx_sum, iov, iovcnt,
							*done, n);
				rsx_stat_add(RSX_STAT_tcp_rx_bytes, n);
			}
			if (unlikely(s->shared) && !peek)
				rsx_share_moved(s);
			*done += n;
			if (*done == len || (!send && !waitall))
				return *done;
			continue;
		}
		if (n == 0)
			return *done;
		if (n != -EAGAIN || nonblock)
			return *done ? (ssize_t)*done : n;
		ret = rsx_sleep(s, fd, send ? POLLOUT : POLLIN, NULL, NULL);
		if (ret < 0)
			return *done ? (ssize_t)*done : ret;
	}
}

/*
 * Out of band (oob.h), the socket's part, under s->lock: from the CM
 * thread, or from the program's thread for an answer left to it while
 * the program was asleep in poll() or select() on the TCP socket.
 */

/* What the socket counted on TCP goes on in its connection. */
static void rsx_oob_counts(const struct rsx_sock *s, struct rsx_conn *c)
{
	c->oob = 1;
	c->tx_tcp = s->tcp_tx;
	c->rx_tcp = s->tcp_rx;
	c->tx_sum = s->tx_sum;
	c->rx_sum = s->rx_sum;
}

/* The server's end: a request names s.  p is answered either way. */
static void rsx_server_oob(struct rsx_sock *s, int fd, struct rsx_oob_pend *p)
{
	enum rsx_stat stat;
	struct rsx_hello h;
	int reason;

	if (!rsx_counts(s) || rsx_sock_shared(s) || s->rd_shut ||
	    s->wr_shut || s->conn || s->oob || rsx_now_ms() > p->expires) {
		reason = RSX_NAK_STATE;
		goto nak;
	}
	reason = rsx_server_conn(s, fd, &p->h, p->shm, &stat);
	if (reason) {
		rsx_to_tcp(s, stat);
		rsx_wake_sleepers(s);
		goto nak;
	}
	rsx_oob_counts(s, s->conn);
	rsx_conn_hello(s->conn, RSX_MSG_ACK, &h);
	if (p->ufd < 0) {
		if (p->shm)	/* the listener relays it (local.h) */
			rsx_local_board_answer(p, &h, s->conn, fd);
		rsx_oob_send(p, &h);
	} else if (rsx_local_send(p, &h, s->conn, fd)) {
		/* the client is gone; a fork child of its may ask again */
		if (rsx_may_count_on(s, s->conn))
			rsx_count_on(s, NULL, RSX_STAT_COUNT);
		else
			rsx_to_tcp(s, RSX_STAT_fallback_oob);
		rsx_wake_sleepers(s);
		return;
	}
	if (s->conn->shm)
		rsx_stat_inc(RSX_STAT_shm_upgrades);
	rsx_stat_inc(RSX_STAT_upgraded);
	rsx_stat_inc(RSX_STAT_midstream_upgrades);
	rsx_info("fd %d: upgraded out of band (server) after %llu bytes out, "
		 "%llu in, QP %u", fd, (unsigned long long)s->tcp_tx,
		 (unsigned long long)s->tcp_rx, rsx_conn_id(s->conn));
	rsx_sock_set_state(s, RSX_ST_UPGRADED);
	rsx_ready_upgraded(s);
	rsx_wake_sleepers(s);
	return;

nak:
	memset(&h, 0, sizeof(h));
	h.type = RSX_MSG_NAK;
	h.nonce = p->h.nonce;
	h.reason = reason;
	rsx_oob_send(p, &h);
}

/*
 * The client's end: the server's answer to our request (NULL: none, and
 * why says what came instead).
 */
static void rsx_client_oob(struct rsx_sock *s, int fd, struct rsx_oob_pend *p,
			   int why)
{
	struct rsx_conn *c = s->conn;
	enum rsx_stat stat = RSX_STAT_fallback_qp;

	if (!p || p->type != RSX_MSG_ACK) {
		stat = p ? RSX_STAT_fallback_nak : why;
		goto tcp;
	}
	if (atomic_load(&s->evented)) {
		stat = RSX_STAT_fallback_evented;
		goto tcp;
	}
	/* our sends must go on after a CUTOVER: without it, both stay TCP */
	if (s->shared) {
		stat = RSX_STAT_fallback_fork;
		goto tcp;
	}
	if (s->wr_shut || s->rd_shut) {
		stat = RSX_STAT_fallback_probe;	/* its stream ended first */
		goto tcp;
	}
	if (s->nepreg && rsx_ready_on(s, fd) < 0) {
		stat = RSX_STAT_fallback_resources;
		goto tcp;
	}
	rsx_oob_counts(s, c);
	if ((!c->qp_ready && rsx_conn_connect(c, &p->h)) ||
	    rsx_conn_cutover(c))
		goto tcp;
	rsx_stat_inc(RSX_STAT_upgraded);
	rsx_stat_inc(RSX_STAT_midstream_upgrades);
	if (c->shm)
		rsx_stat_inc(RSX_STAT_shm_upgrades);
	rsx_info("fd %d: upgraded out of band (client) after %llu bytes out, "
		 "%llu in, QP %u", fd, (unsigned long long)s->tcp_tx,
		 (unsigned long long)s->tcp_rx, rsx_conn_id(c));
	rsx_sock_set_state(s, RSX_ST_UPGRADED);
	rsx_ready_upgraded(s);
	rsx_wake_sleepers(s);
	rsx_oob_pend_free(p);
	return;

tcp:
	rsx_to_tcp(s, stat);
	rsx_wake_sleepers(s);
	rsx_oob_pend_free(p);
}

/*
 * A request (HELLO) or our answer (ACK, NAK) for s: now, or,
 * while a poll() or select() of the program sleeps on the TCP socket,
 * when it returns (rsx_sock_poll_done) or at the next call on s.
 */
static void rsx_oob_take(struct rsx_sock *s, int fd, struct rsx_oob_pend *p)
{
	int ret;

	if (p->type != RSX_MSG_NAK && !s->oob &&
	    atomic_load(&s->pollers) && rsx_counts(s)) {
		/*
		 * An ACK: our QP answers the server's deadline ping while the
		 * CUTOVER waits for the program (conn.h).
		 */
		if (p->type == RSX_MSG_ACK && s->conn && !s->conn->qp_ready) {
			ret = rsx_conn_connect(s->conn, &p->h);
			if (ret) {
				rsx_to_tcp(s, rsx_fallback_of(ret));
				rsx_wake_sleepers(s);
				rsx_oob_pend_free(p);
				return;
			}
		}
		s->oob = p;
		rsx_stat_inc(RSX_STAT_oob_deferred);
	} else if (p->type == RSX_MSG_HELLO) {
		rsx_server_oob(s, fd, p);
	} else {
		rsx_client_oob(s, fd, p, RSX_STAT_fallback_oob);
	}
}

/* The one left for the program's thread, now that no poll() sleeps. */
void rsx_oob_apply(struct rsx_sock *s, int fd)
{
	struct rsx_oob_pend *p = s->oob;

	s->oob = NULL;
	rsx_oob_take(s, fd, p);
}

/*
 * A request for s may have come to another process of the family (the
 * listener of a pre-forked server): s takes it off the board.  Cheap
 * when there is no news.
 */
void rsx_board_check(struct rsx_sock *s, int fd)
{
	struct rsx_oob_pend *p;

	/* shared: the news waits until one process alone holds s */
	if (!s->oob_ok || s->oob || rsx_sock_shared(s) ||
	    !rsx_board_news(&s->board_seen) || !(p = rsx_board_take(s)))
		return;
	rsx_oob_take(s, fd, p);
}

/*
 * A request for s while s still runs on the connection its peer left with
 * a DOWNGRADE (a fork child that is alone with the other end now asks
 * again at once): s settles into counting on TCP once its program has
 * read the ring, which may be later than the request.  1: not yet.
 */
static int rsx_oob_settling(struct rsx_sock *s, int fd)
{
	if (s->state != RSX_ST_UPGRADED)
		return 0;
	rsx_progress(s, fd);
	return !rsx_down_settle(s, fd) && s->conn->peer_down;
}

/*
 * A request for s while s waits for the CUTOVER of an earlier one (both
 * named the same TCP connection).  A client that forked while its first
 * request was out let that answer go and asks again once alone with the
 * socket (share.h); a request that is late, or not the client's, comes
 * after a newer one.  The earlier connection's ping tells them apart: a
 * peer whose QP is gone never cut over, and s counts on over TCP
 * (rsx_cut_abandoned) to take this request; one whose QP answers keeps
 * it, and this request is refused.  Over shared memory the ping answers
 * at once; a queue pair's fails within RSOCKX_QP_TIMEOUT_MS, while the
 * request waits (its deadline is RSOCKX_OOB_TIMEOUT_MS).  1: not yet.
 */
static int rsx_oob_superseded(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (s->state != RSX_ST_UPGRADED || !c->oob || !c->qp_ready)
		return 0;
	rsx_progress(s, fd);
	if (s->conn != c || c->peer_cutover || c->tx_ring || c->peer_down ||
	    rsx_cut_abandoned(s) || (c->err && !c->cut_ping))
		return 0;
	if (!c->cut_ping) {
		if (rsx_conn_ping(c))
			return 0;
		c->cut_ping = 1;
		c->ping_wr = c->sq_posted;
		if (rsx_cut_abandoned(s))
			return 0;
	}
	if (c->sq_done < c->ping_wr)
		return 1;
	rsx_dbg("fd %d: another request, the first answer's client is there: "
		"refused", fd);
	return 0;
}

/*
 * The CM thread found the socket a request names (or accept() did).
 * -EBUSY: fork() shared it and another process may still hold it; the
 * request goes up on the board for the one that ends up alone with it.
 * -EAGAIN: s is still settling its peer's DOWNGRADE, or finding out
 * whether an earlier request's client let it go; the CM thread asks it
 * again (rsx_oob_tick) until the request expires.
 */
int rsx_sock_oob_request(struct rsx_sock *s, int fd, struct rsx_oob_pend *p)
{
	rsx_sock_lock_cm(s);
	if (s->share_slot >= 0 && rsx_sock_shared(s)) {
		rsx_sock_unlock(s);
		return -EBUSY;
	}
	if (p->type == RSX_MSG_HELLO &&
	    (rsx_oob_settling(s, fd) || rsx_oob_superseded(s, fd))) {
		rsx_sock_unlock(s);
		return -EAGAIN;
	}
	if (unlikely(rsx_config.test_answer_hold_ms) &&
	    p->type == RSX_MSG_HELLO)
		usleep(rsx_config.test_answer_hold_ms * 1000);
	rsx_oob_take(s, fd, p);
	rsx_sock_unlock(s);
	return 0;
}

/*
 * The answer to our request for s, nonce its own; p NULL: none came, and
 * why (a fallback counter) says what came instead.
 */
void rsx_sock_oob_answer(struct rsx_sock *s, int fd, struct rsx_oob_pend *p,
			 uint64_t nonce, int why)
{
	struct rsx_hello again;
	int test_again = 0;

	rsx_sock_lock_cm(s);
	/* shared: a fork is under way, s goes to TCP after it */
	if (s->state != RSX_ST_CLIENT_OOB || !s->conn ||
	    s->conn->nonce != nonce || s->oob || s->shared)
		rsx_oob_pend_free(p);
	else if (!p)
		rsx_client_oob(s, fd, NULL, why);
	else if (p->type == RSX_MSG_ACK && s->conn->shm &&
		 rsx_local_give(s->conn, p))
		rsx_client_oob(s, fd, NULL, RSX_STAT_fallback_oob);
	else
		rsx_oob_take(s, fd, p);
	/* test hook: the ACK waits for the program, the request goes again */
	if (unlikely(rsx_config.test_oob_again) && s->oob == p && p &&
	    s->conn && s->conn->shm) {
		rsx_conn_hello(s->conn, RSX_MSG_HELLO, &again);
		test_again = 1;
	}
	rsx_sock_unlock(s);
	if (test_again)
		rsx_local_ask_again(s, fd, &again);
}

/*
 * A waiting client: its QP and ring, the request (h, from src to dst;
 * port: our TCP port), and CLIENT_OOB.  yes: the probe says the server
 * runs rsockx.  -EAGAIN: not connected yet; -EALREADY: a HELLO went in
 * band instead; another -errno: it stays TCP.
 */
int rsx_sock_oob_start(struct rsx_sock *s, int fd, int yes,
		       struct rsx_hello *h, struct sockaddr_storage *src,
		       struct sockaddr_storage *dst, uint16_t *port)
{
	socklen_t len = sizeof(*dst);
	struct rsx_dev *dev;
	uint8_t addr[16];
	int ret = -EAGAIN;

	rsx_sock_lock_cm(s);
	if (s->state != RSX_ST_CLIENT_WAIT || s->inband_try == 2)
		goto out;
	/*
	 * A parent's connection that its fork child counts on (handoff.h):
	 * asked once the child alone holds it, until oob_until.
	 */
	if (s->shared && s->share_slot >= 0 && rsx_sock_shared(s) &&
	    rsx_now_ms() < s->oob_until)
		goto out;
	if (s->wr_shut || s->rd_shut || s->shared ||
	    atomic_load(&s->evented)) {
		rsx_to_tcp(s, RSX_STAT_fallback_oob);
		ret = -EPERM;
		goto out;
	}
	if (rsx_libc.getpeername(fd, (struct sockaddr *)dst, &len) ||
	    rsx_local_addr(fd, src) || rsx_oob_addr(src, addr, port))
		goto out;
	if (yes && s->inband_try == 1 && !s->tcp_tx && !s->tcp_rx) {
		/* the rules say rdma, the stream is empty: a HELLO leads it */
		s->inband_try = 0;
		rsx_sock_set_state(s, RSX_ST_CLIENT_NEW);
		rsx_client_start(s, fd, 1);
		rsx_wake_sleepers(s);	/* as in rsx_inband_try */
		ret = -EALREADY;
		goto out;
	}
	*port = ntohs(*port);
	if (s->local) {
		/* same host (local.h): shared memory instead of a QP */
		ret = rsx_shm_create(rsx_config.ring_size, &s->conn);
	} else if (rsx_dev_find((struct sockaddr *)src, &dev)) {
		rsx_to_tcp(s, RSX_STAT_fallback_nodev);
		ret = -ENODEV;
		goto out;
	} else {
		ret = rsx_rdma_create(dev, rsx_config.ring_size,
				      atomic_load(&s->nonblock), &s->conn);
	}
	if (ret) {
		rsx_to_tcp(s, rsx_fallback_of(ret));
		goto out;
	}
	/* the CM request comes from our address, from a port of its own */
	if (src->ss_family == AF_INET)
		((struct sockaddr_in *)src)->sin_port = 0;
	else
		((struct sockaddr_in6 *)src)->sin6_port = 0;
	rsx_conn_hello(s->conn, RSX_MSG_HELLO, h);
	rsx_sock_set_state(s, RSX_ST_CLIENT_OOB);
	rsx_dbg("fd %d: asking out of band after %llu bytes out, %llu in", fd,
		(unsigned long long)s->tcp_tx, (unsigned long long)s->tcp_rx);
out:
	rsx_sock_unlock(s);
	return ret;
}

/* Where a waiting client's probe went: its destination as connect() had it. */
int rsx_sock_oob_dst(const struct rsx_sock *s, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!s->peer_port)
		return -EINVAL;
	if (s->family == AF_INET) {
		s4->sin_family = AF_INET;
		s4->sin_port = s->peer_port;
		memcpy(&s4->sin_addr, s->peer_addr + 12, 4);
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = s->peer_port;
		memcpy(&s6->sin6_addr, s->peer_addr, 16);
	}
	return 0;
}

/*
 * poll()/select() (ready.c) are about to wait on s's TCP socket itself:
 * while they do, an upgrade would go unseen by them.  Returns 1 when s
 * counted the waiter (rsx_sock_poll_done() ends it).
 */
int rsx_sock_poll_begin(struct rsx_sock *s)
{
	if (!rsx_counts(s))
		return 0;
	atomic_fetch_add(&s->pollers, 1);
	return 1;
}

void rsx_sock_poll_done(int fd, uint32_t gen)
{
	struct rsx_sock *s = rsx_fd_get(fd);

	if (!s)
		return;
	rsx_sock_lock(s);
	if (s->gen == gen && atomic_fetch_sub(&s->pollers, 1) == 1) {
		if (rsx_counts(s))
			rsx_board_check(s, fd);
		if (s->oob)
			rsx_oob_apply(s, fd);
	}
	rsx_sock_unlock(s);
	rsx_sock_put(s);
}

