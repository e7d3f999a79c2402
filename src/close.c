// SPDX-License-Identifier: MIT
/*
 * How an upgraded connection ends (upgrade-int.h): shutdown() as a FIN
 * message, the last close (lingering in the background when it must
 * wait), a close under another thread's call, and exit(), all of a
 * process's connections within one RSOCKX_LINGER_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "handoff.h"
#include "linger.h"
#include "libc.h"
#include "log.h"
#include "ready.h"
#include "share.h"
#include "upgrade.h"
#include "upgrade-int.h"

/*
 * Sends our FIN once credits allow, and waits until it has landed: requests
 * complete in order, so every byte sent before it is then in the peer's
 * memory.  A peer that has closed its TCP connection reads no more, so
 * there is nothing to wait for (TCP would answer such data with a reset).
 * Returns 1 when deadline came first (0: no wait at all), 0 when it is
 * done, or nothing is left to do.
 */
int rsx_finish(struct rsx_sock *s, int fd, int64_t deadline)
{
	struct rsx_conn *c = s->conn;
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };

	rsx_call_until(deadline);

	while (c && c->peer_down && rsx_resend(s, fd) == -EAGAIN) {
		if (!deadline)
			return 1;	/* the next pass (rsx_exit_flush) */
		if (rsx_now_ms() > deadline) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			/* a reset, not a stream that ends short */
			rsx_info("fd %d: bytes for the peer's TCP not sent in "
				 "time", fd);
			rsx_libc.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg,
					    sizeof(lg));
			return 0;
		}
		rsx_sock_unlock(s);
		rsx_libc.poll(&pfd, 1, 100);
		rsx_sock_lock(s);
		c = s->conn;
	}
	/*
	 * A side that never sent since the upgrade has not cut over yet: it
	 * does now if the peer's CUTOVER is in, so that the FIN below tells
	 * the peer, whose sends may be waiting for ring space we will never
	 * give, that this end is gone and not only silent.
	 */
	if (c && !c->tx_ring)
		rsx_progress(s, fd);
	if (!c || !c->tx_ring)
		return 0;
	for (;;) {
		rsx_progress(s, fd);
		if (rsx_peer_gone(c))
			return 0;
		if (!c->fin_sent)
			rsx_conn_fin(c);	/* -EAGAIN: no credit yet */
		if (c->fin_sent && c->sq_done >= c->fin_wr)
			return 0;
		if (rsx_now_ms() >= deadline) {
			if (deadline)
				rsx_info("fd %d: FIN not acknowledged in time",
					 fd);
			return 1;
		}
		if (rsx_wait_conn(s, fd, 0) == -ERESTART)
			return 0;	/* TCP's now (rsx_sleep) */
	}
}

int rsx_sock_shutdown(int fd, int how)
{
	struct rsx_sock *s = rsx_fd_get(fd);
	int ret;

	int upgraded = 0;

	if (s) {
		rsx_sock_lock(s);
		rsx_sock_forked_use(s);	/* the parent's QP first */
		upgraded = s->state == RSX_ST_UPGRADED &&
			   (s->conn->tx_ring || s->conn->peer_down);
		if ((how == SHUT_RD || how == SHUT_RDWR) && !s->rd_shut) {
			s->rd_shut = 1;
			/* a recv asleep on the connection returns 0, as on TCP */
			if (upgraded)
				rsx_kick(s->conn);
		}
		if ((how == SHUT_WR || how == SHUT_RDWR) && !s->wr_shut) {
			s->wr_shut = 1;
			/* after the peer's DOWNGRADE: TCP's own shutdown,
			 * once the bytes before it are out (rsx_resend) */
			if (upgraded && s->conn->peer_down) {
				rsx_progress(s, fd);
				rsx_down_settle(s, fd);
			} else if (upgraded)
				rsx_finish(s, fd, rsx_linger_end());
		}
		rsx_sock_ready_sync(s);
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
	/*
	 * Once upgraded, shutdown is the FIN message alone: the TCP
	 * connection stays whole, so that its EOF keeps meaning "the peer
	 * closed" (or died).
	 */
	if (upgraded)
		return rsx_libc.fcntl(fd, F_GETFD) < 0 ? -errno : 0;
	ret = rsx_libc.shutdown(fd, how);
	return ret ? -errno : 0;
}

/*
 * CLIENT_HELLO, and the program is done with the socket (close, exit) or
 * hands it to a new one (exec): take the server's answer off TCP, waiting
 * for it up to RSOCKX_LINGER_MS, and stay TCP (without our CUTOVER the
 * server stays TCP too).  At an exec the answer must not reach the new
 * program.  At a close, an answer left unread, or one that comes after
 * it, makes the kernel reset the connection, and the server loses what it
 * had not read yet of the bytes we sent: a client that only writes and
 * closes before the server answered (a slow server) lost the tail of its
 * stream that way.  An EOF from the server ends the wait at once.
 */
int rsx_client_hello_settle(struct rsx_sock *s, int fd,
			    int64_t deadline)
{
	struct rsx_hello h;
	int ret;

	while ((ret = rsx_peek_msg(s, fd, &h)) == -EAGAIN) {
		if (rsx_now_ms() >= deadline)
			return -ETIMEDOUT;
		rsx_wait_in(s, fd, 10);
	}
	/* s->lock was dropped: another thread may have settled it */
	if (ret > 0 && s->conn && h.nonce == s->conn->nonce &&
	    (h.type == RSX_MSG_ACK || h.type == RSX_MSG_NAK))
		rsx_consume_msg(fd);
	rsx_to_tcp(s, RSX_STAT_COUNT);
	return 0;
}

/*
 * At close or exit, a socket that a fork child may hold goes back to TCP,
 * so that the child can go on with it; unless the stream is over both
 * ways (our FIN went, the peer's came) or the peer is gone, which TCP
 * tells the child as well.
 */
static int rsx_hand_back(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	if (!rsx_handoff_live(s) && !atomic_load(&s->vfork_exec))
		return 0;
	return !(s->state == RSX_ST_UPGRADED && c &&
		 (rsx_peer_gone(c) || (s->wr_shut && c->peer_fin)));
}

/*
 * The program is done with s (its last close, or exit) while s waited to
 * move out of band: an answer or a request that comes after this must not
 * cut it over, for the thread that takes it would send a CUTOVER that our
 * TCP end, right after, turns into a broken connection at the peer (no
 * FIN came).  s is plain TCP now; the peer's ping finds our side gone and
 * it goes on with TCP too (rsx_cut_abandoned).  A socket a fork child
 * holds as well is left to its hand-off.  1 when s went to TCP.  A
 * client's is counted as its end would have been (rsx_sock_put): it ended
 * before its probe or its request was answered.
 */
static int rsx_oob_forgo(struct rsx_sock *s)
{
	if (!rsx_state_counted(s->state) || s->shared || s->share_slot >= 0)
		return 0;
	rsx_to_tcp(s, s->state == RSX_ST_SERVER_WAIT ? RSX_STAT_COUNT :
		   RSX_STAT_fallback_probe);
	return 1;
}

/*
 * The end of a closed socket's stream, under s->lock: the FIN landed, or
 * the answer to the HELLO taken off TCP.  1 while deadline came first (0:
 * no wait at all).
 */
static int rsx_end_step(struct rsx_sock *s, int fd, int64_t deadline)
{
	if (s->state == RSX_ST_UPGRADED && s->conn)
		return rsx_finish(s, fd, deadline);
	if (s->state == RSX_ST_CLIENT_HELLO && s->conn)
		return rsx_client_hello_settle(s, fd, deadline) == -ETIMEDOUT;
	return 0;
}

int rsx_sock_linger_step(struct rsx_sock *s, int64_t deadline)
{
	return rsx_end_step(s, s->orphan_fd, deadline);
}

/*
 * A private duplicate of fd that s goes on with once the program's number
 * is closed (s->orphan_fd), under s->lock: its number, or -errno.
 */
static int rsx_orphan_dup(struct rsx_sock *s, int fd)
{
	int k;

	k = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, rsx_fd_private_base());
	if (k < 0)
		k = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (k < 0)
		return -errno;
	rsx_fd_set_private(k, NULL);
	s->orphan_fd = k;
	return k;
}

/*
 * close() of a non-blocking socket whose FIN (or HELLO's answer) is still
 * out: the rest goes on in the background (linger.h), with a private
 * duplicate of fd and a reference of the lingerer's.  0 when it does.
 */
static int rsx_linger_start(struct rsx_sock *s, int fd)
{
	int k;

	if (s->orphan_fd >= 0)
		return -EBUSY;
	k = rsx_orphan_dup(s, fd);
	if (k < 0)
		return k;
	if (rsx_linger_add(s, rsx_linger_end())) {
		s->orphan_fd = -1;
		rsx_fd_take(k);
		rsx_libc.close(k);
		return -ENOSPC;
	}
	s->lingered = 1;
	atomic_fetch_add(&s->ref, 1);
	rsx_stat_inc(RSX_STAT_closes_lingered);
	rsx_dbg("fd %d: closed, its end goes on in the background (fd %d)",
		fd, k);
	return 0;
}

/*
 * The last descriptor of an upgraded socket is about to be closed: every
 * byte the application sent must reach the peer's ring before the TCP
 * connection (whose EOF the peer takes as the end) goes away.
 * A non-blocking socket leaves that to the background (linger.h).
 */
void rsx_sock_close_last(struct rsx_sock *s, int fd)
{
	rsx_sock_lock(s);
	if (s->lingered)
		;	/* the lingerer's end (linger.c): nothing left to wait */
	else if (rsx_hand_back(s))
		rsx_downgrade(s, fd, RSX_DOWN_CLOSE);	/* a child may hold it */
	else if (rsx_oob_forgo(s))
		;
	else if (!atomic_load(&s->nonblock) ||
		 (rsx_end_step(s, fd, 0) && rsx_linger_start(s, fd)))
		rsx_end_step(s, fd, rsx_linger_end());	/* waits here */
	/*
	 * After the peer's DOWNGRADE a socket settles back to TCP on the
	 * way out of a call that finds no other thread in one; two threads
	 * that keep meeting (a reader and a writer) may leave that to here.
	 */
	rsx_down_settle(s, fd);
	rsx_sock_unlock(s);
}

/*
 * The program closes a descriptor of s while another of its threads may be
 * in a call on it (s has more references than this descriptor's).  The
 * kernel would keep the socket for that call, which goes on (a blocked
 * send completes when the peer reads) while the number is free at once:
 * the call must not go on with a number that the program may reuse.  A
 * private duplicate takes over for it; the socket ends with the last
 * reference (rsx_sock_orphan_end()).  Without a descriptor to spare, the
 * call fails with EBADF at its next wakeup instead.
 */
void rsx_sock_orphan(struct rsx_sock *s, int fd)
{
	int k;

	rsx_sock_lock(s);
	if (!s->conn || s->orphan_fd >= 0)
		goto out;
	k = rsx_orphan_dup(s, fd);
	if (k < 0) {
		rsx_info("fd %d: closed under a call, no duplicate: %s", fd,
			 strerror(-k));
		goto out;
	}
	rsx_dbg("fd %d: closed under a call, which goes on with fd %d", fd,
		k);
	rsx_kick(s->conn);	/* to poll the duplicate */
out:
	rsx_sock_unlock(s);
}

/* The last reference of an orphaned socket: as its last close. */
void rsx_sock_orphan_end(struct rsx_sock *s)
{
	int k = s->orphan_fd;

	if (s->conn)
		rsx_sock_close_last(s, k);
	s->orphan_fd = -1;
	rsx_fd_take(k);
	rsx_libc.close(k);
}

/*
 * s->lock, unless another thread holds it (and may be inside a call on s,
 * at exit) until deadline: 0, or -EBUSY.
 */
int rsx_lock_until(struct rsx_sock *s, int64_t deadline)
{
	while (rsx_sock_trylock(s)) {
		if (rsx_now_ms() >= deadline)
			return -EBUSY;
		usleep(1000);
	}
	return 0;
}

/* At exit, under s->lock: what needs no waiting for the peer. */
static void rsx_exit_start(struct rsx_sock *s, int fd)
{
	if (rsx_hand_back(s))
		rsx_downgrade(s, fd, RSX_DOWN_CLOSE);	/* a child may outlive us */
	else if (!rsx_oob_forgo(s))
		rsx_end_step(s, fd, 0);		/* the FIN out, no wait */
}

/*
 * exit(), return from main, _exit(): flush every upgraded connection, all
 * of them within one RSOCKX_LINGER_MS: every FIN goes out first, then
 * their acknowledgements (and the answers to HELLOs still out) are
 * awaited together.
 */
void rsx_exit_flush(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	int64_t deadline = rsx_linger_end();
	struct rsx_sock *s;
	int pass, seen = 0;

	rsx_share_exit();
	for (pass = 0; pass < 2; pass++) {
		for (fd = 0; fd < hw; fd++) {
			s = rsx_fd_peek(fd);
			if (!s || s->kind != RSX_SOCK_TCP ||
			    (!s->conn && !rsx_state_counted(s->state)) ||
			    rsx_lock_until(s, deadline))
				continue;
			seen = 1;
			if (!pass)
				rsx_exit_start(s, fd);
			else
				rsx_end_step(s, fd, deadline);
			rsx_sock_unlock(s);
		}
	}
	rsx_linger_exit(deadline);
	if (unlikely(rsx_config.test_exit_gap_ms) && seen) {
		rsx_info("exit: flushed, %d ms to go (test)",
			 rsx_config.test_exit_gap_ms);
		usleep(rsx_config.test_exit_gap_ms * 1000);
	}
}
