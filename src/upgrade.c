// SPDX-License-Identifier: MIT
/*
 * Negotiation, cut-over and the blocking data path (DESIGN.md 2.2, 3).
 *
 * Client (connector whose rules say rdma):
 *   before its first byte it sends HELLO, then application data over TCP,
 *   counting it, without waiting for the answer.  The answer is the first
 *   thing the server sends: ACK or NAK echoing our nonce, or application
 *   data (the server is not rsockx, or its application spoke first), which
 *   we leave in the stream: the connection then stays TCP.  On ACK the QP
 *   goes to RTS and CUTOVER(n) goes out as its first message; all later
 *   sends use the ring.
 * Server (accepted connection):
 *   if the first bytes in are a HELLO, it is taken out of the stream and
 *   answered with ACK (our QP already in RTS) or NAK.  The server keeps
 *   sending over TCP, counting, until the client's CUTOVER arrives (so it
 *   never writes to a QP that may not be in RTR yet), then sends its own
 *   CUTOVER(n) and moves to the ring.  If its application sends before any
 *   HELLO arrived, the connection stays TCP and a late HELLO is dropped.
 * Out of band (oob.h), for connections that started before the client knew
 *   the server runs rsockx: TCP in a counted state (every byte through
 *   rsx_counted_io), until a request over RDMA CM gets the QPs connected;
 *   then the same cut-over, n counted from the connection's start.
 * Both:
 *   a reader takes exactly n bytes from TCP after the handshake, n from the
 *   peer's CUTOVER, then reads the ring.  Once both directions use the ring
 *   the TCP connection only carries liveness: its EOF without a FIN message
 *   first means the peer died.
 *
 * Locking: s->lock protects the state and the connection.  It is never held
 * while sleeping: kernel calls under it are non-blocking, and waits drop it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "conn.h"
#include "dev.h"
#include "fdtab.h"
#include "guard.h"
#include "handoff.h"
#include "linger.h"
#include "libc.h"
#include "log.h"
#include "oob.h"
#include "probe.h"
#include "ready.h"
#include "share.h"
#include "sig.h"
#include "stats.h"
#include "upgrade.h"
#include "upgrade-int.h"

#define RSX_IOV_SLICE 64

static size_t rsx_iov_len(const struct iovec *iov, int iovcnt)
{
	size_t len = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* The part of iov after skip bytes, at most len long, as a new iovec. */
static int rsx_iov_slice(const struct iovec *iov, int iovcnt, size_t skip,
			 size_t len, struct iovec *out)
{
	int i, n = 0;

	for (i = 0; i < iovcnt && len && n < RSX_IOV_SLICE; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + skip;
		out[n].iov_len = iov[i].iov_len - skip;
		if (out[n].iov_len > len)
			out[n].iov_len = len;
		len -= out[n].iov_len;
		skip = 0;
		n++;
	}
	return n;
}

/*
 * FNV-1a (64 bits) of n bytes of iov from skip on: the proof an
 * out-of-band cut-over carries (conn.h), over the bytes that went by TCP.
 */
uint64_t rsx_sum_iov(uint64_t h, const struct iovec *iov, int iovcnt,
		     size_t skip, size_t n)
{
	const uint8_t *p;
	size_t k;
	int i;

	for (i = 0; i < iovcnt && n; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		p = (const uint8_t *)iov[i].iov_base + skip;
		k = iov[i].iov_len - skip;
		if (k > n)
			k = n;
		n -= k;
		skip = 0;
		while (k--)
			h = (h ^ *p++) * 0x100000001b3ull;
	}
	return h;
}

ssize_t rsx_tcp_io(int fd, const struct iovec *iov, int iovcnt, size_t skip,
		   size_t len, int flags, int send)
{
	struct iovec part[RSX_IOV_SLICE];
	struct msghdr mh = { 0 };
	ssize_t n;

	mh.msg_iov = part;
	mh.msg_iovlen = rsx_iov_slice(iov, iovcnt, skip, len, part);
	n = send ? rsx_libc.sendmsg(fd, &mh, flags) :
		   rsx_libc.recvmsg(fd, &mh, flags);
	return n < 0 ? -errno : n;
}

static void rsx_peer_closed(struct rsx_sock *s);

/*
 * SO_RCVTIMEO / SO_SNDTIMEO of the call in progress on this thread: read
 * from the socket only when the call is about to sleep (an extra syscall
 * then costs nothing), as an absolute deadline in ms (0: none).
 */
#define RSX_DEADLINE_UNKNOWN (-1)
static RSX_TLS int64_t rsx_deadline = RSX_DEADLINE_UNKNOWN;
static RSX_TLS int rsx_timeo_opt;

static void rsx_call_begin(int opt)
{
	rsx_deadline = RSX_DEADLINE_UNKNOWN;
	rsx_timeo_opt = opt;
}

/*
 * A wait of rsockx's own (close, exit, a downgrade) ends at until (ms),
 * whatever timeout the thread's last call had: never later (a peer that
 * takes no message would hold it for ever), and never at once for an
 * old SO_RCVTIMEO's deadline long past, which would make it spin.
 */
static void rsx_call_until(int64_t until)
{
	rsx_deadline = until > 0 ? until : 1;
	rsx_timeo_opt = 0;
}

static int64_t rsx_linger_end(void)
{
	return rsx_now_ms() + rsx_config.linger_ms;
}

/*
 * The descriptor of s's TCP socket for a call under way: the one it came
 * in with, or, once the program closed that while the call slept, the
 * private duplicate it goes on with (rsx_sock_orphan()).  Read under
 * s->lock, again each time a call takes the lock back.
 */
static inline int rsx_sfd(const struct rsx_sock *s, int fd)
{
	return unlikely(s->orphan_fd >= 0) ? s->orphan_fd : fd;
}

/*
 * Wakes the thread asleep in rsx_sleep()'s poll on c, if there is one, to
 * poll again: for events it does not watch, a completion another thread
 * took in, a descriptor that changed.  Under s->lock, which the sleeper
 * takes to set and clear c->polling.
 */
void rsx_kick(struct rsx_conn *c)
{
	uint64_t kick = 1;

	if (c->polling && rsx_libc.write(c->kick_fd, &kick, sizeof(kick)) < 0)
		rsx_dbg("kick: %s", strerror(errno));
}

/* ms left before the call must give up with EAGAIN; -1: no limit. */
static int rsx_timeout_left(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	int64_t left;

	if (rsx_deadline == RSX_DEADLINE_UNKNOWN) {
		rsx_deadline = 0;
		if (!rsx_libc.getsockopt(fd, SOL_SOCKET, rsx_timeo_opt, &tv,
					 &len) && (tv.tv_sec || tv.tv_usec))
			rsx_deadline = rsx_now_ms() + tv.tv_sec * 1000 +
				       (tv.tv_usec + 999) / 1000;
	}
	if (!rsx_deadline)
		return -1;
	left = rsx_deadline - rsx_now_ms();
	return left > 0 ? (int)left : 0;
}

/*
 * A handler ran since seen, in a spin or a sleep of a blocking call: the
 * call ends with EINTR, or goes on (0) where the kernel's own would have
 * been restarted: never with SO_RCVTIMEO/SO_SNDTIMEO set, else when the
 * handlers had SA_RESTART (rsx_sig_restart), or, for a handler rsockx did
 * not see run, by rsx_guard_restartable's guess.
 */
static int rsx_intr(int timeout, const sigset_t *mask,
		    const struct rsx_sig_seen *seen)
{
	if (timeout < 0 && (rsx_sig_ran(seen) ? rsx_sig_restart(seen) :
			    rsx_guard_restartable(mask))) {
		rsx_stat_inc(RSX_STAT_intr_restarts);
		return 0;
	}
	return -EINTR;
}

/*
 * Drops s->lock for a sleep.  Returns 1 when a handler that the lock held
 * back ran as it dropped (sig.h), or will have by the time this returns
 * (RSOCKX_WRAP_HANDLERS=0): the sleep would not end for it, so it does
 * not begin, and the call ends as if it had (rsx_intr).
 */
static int rsx_sleep_unlock(struct rsx_sock *s,
			    const struct rsx_sig_seen *seen)
{
	int held = unlikely(rsx_sig_hold.masked) && rsx_sig_held_pending();

	rsx_sock_unlock(s);
	return held || rsx_sig_ran(seen);
}

/*
 * Sleeps until fd has one of events, or the connection's completion channel
 * fires, with s->lock dropped.  Returns fd's revents (0 when another thread
 * did the polling, or after a signal the call goes on from: rsx_intr),
 * -EINTR, or -ERESTART when the socket left the connection meanwhile (an
 * exec's or a fork child's downgrade, rsx_to_tcp): the caller must not
 * touch the connection again, and goes on in the socket's new state.
 * See struct rsx_conn for why only one thread polls a connection.
 * The TCP end (POLLRDHUP) is noted here for all.  With mask (signals held
 * back after a spin, rsx_guard_signals) the sleep takes that mask.  seen:
 * the handlers counted before the spin, NULL without one.
 */
int rsx_sleep(struct rsx_sock *s, int fd, short events, const sigset_t *mask,
	      const struct rsx_sig_seen *seen)
{
	struct rsx_conn *c = s->conn;
	struct rsx_sig_seen now;
	struct pollfd pfd[4];
	uint64_t kick;
	uint32_t gen;
	int ret, rev;
	struct timespec until, ts;
	int timeout, nested;
	short want = 0;

	fd = rsx_sfd(s, fd);
	timeout = rsx_timeout_left(fd);

	if (timeout == 0)
		return -EAGAIN;		/* SO_RCVTIMEO/SO_SNDTIMEO ran out */
	if (!seen) {
		rsx_sig_snap(&now);
		seen = &now;
	} else if (rsx_sig_ran(seen) && rsx_intr(timeout, mask, seen)) {
		return -EINTR;	/* a handler ran during a spin (no mask) */
	}
	if (mask && (!c || c->polling)) {
		/*
		 * These sleeps cannot take a mask: let the signals in.  One
		 * held back during the spin has its handler run right here,
		 * and the sleep after it would not end for it: the call ends
		 * now, as the kernel's would have (or goes on: rsx_intr).
		 */
		ret = rsx_guard_signalled(mask);
		rsx_guard_signals_end(mask);
		if (ret && rsx_intr(timeout, mask, seen))
			return -EINTR;
		mask = NULL;
	}
	if (!c) {
		pfd[0].fd = fd;
		pfd[0].events = events;
		pfd[0].revents = 0;
		/* an out-of-band upgrade wakes us (never read: it comes once) */
		pfd[1].fd = rsx_wake_fd(s);
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		s->wake_users++;
		if (rsx_sleep_unlock(s, seen)) {
			ret = -1;
			errno = EINTR;
		} else {
			ret = rsx_libc.poll(pfd, pfd[1].fd >= 0 ? 2 : 1,
					    timeout);
		}
		rsx_sock_lock(s);
		s->wake_users--;
		rsx_wake_close(s);
		if (ret > 0 && pfd[1].revents && !pfd[0].revents)
			return 0;
		if (ret < 0)
			return errno == EINTR ? rsx_intr(timeout, NULL, seen) :
						0;
		if (pfd[0].revents & POLLNVAL)
			return s->orphan_fd >= 0 ? 0 : -EBADF;
		return pfd[0].revents;
	}
	/*
	 * A handler of the program that runs in this thread's own sleep and
	 * calls into s must not wait for the poller, itself: it polls, and
	 * gives the poll back to the sleep it interrupted.
	 */
	nested = c->polling && c->poller == &rsx_sig_hold;
	if (c->polling && !nested) {
		if ((c->want | events) != c->want) {
			c->want |= events;
			rsx_kick(c);
		}
		gen = c->wake_gen;
		if (timeout >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += timeout / 1000;
			until.tv_nsec += (long)(timeout % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
		}
		ret = 0;
		c->waiters++;
		while (c->polling && gen == c->wake_gen && s->conn == c) {
			rsx_stat_inc(RSX_STAT_naps);
			if (rsx_sleep_unlock(s, seen)) {
				ret = rsx_intr(timeout, NULL, seen);
				rsx_sock_lock(s);
				if (ret)
					break;
				rsx_sig_snap(&now);	/* restarted */
				seen = &now;
				continue;
			}
			ret = rsx_conn_nap(c, gen, timeout < 0 ? NULL : &until);
			rsx_sock_lock(s);
			if (ret == -ETIMEDOUT)
				ret = -EAGAIN;
			if (ret)
				break;
		}
		c->waiters--;
		if (s->conn != c) {
			/* dropped by rsx_to_tcp: the last one out frees it */
			if (!c->waiters && !c->polling)
				rsx_conn_destroy(c);
			return ret < 0 ? ret : -ERESTART;
		}
		return ret;
	}
	if (c->qp_ready && rsx_conn_arm(c) == 0 && rsx_conn_poll(c) != 0)
		return 0;	/* something came in meanwhile */
	if (nested)
		want = c->want;
	c->polling = 1;
	c->poller = &rsx_sig_hold;
	c->want = events;
	pfd[0].fd = fd;
	pfd[0].events = c->want;
	pfd[1].fd = c->kick_fd;
	pfd[1].events = POLLIN;
	pfd[2].fd = rsx_conn_chan_fd(c);
	pfd[2].events = POLLIN;
	/* the device's events: a port that goes down (rsx_dev_async_all) */
	pfd[3].fd = rsx_dev_async_fd(c->dev);
	pfd[3].events = POLLIN;
	pfd[0].revents = pfd[1].revents = pfd[2].revents = pfd[3].revents = 0;
	rsx_stat_inc(RSX_STAT_sleeps);
	if (mask) {
		/* all signals blocked: ppoll lets them in, atomically */
		rsx_sock_unlock_masked(s);
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (long)(timeout % 1000) * 1000000;
		ret = rsx_libc.ppoll(pfd, c->qp_ready ? 4 : 2,
				     timeout < 0 ? NULL : &ts, mask);
	} else if (rsx_sleep_unlock(s, seen)) {
		ret = -1;
		errno = EINTR;
	} else {
		ret = rsx_libc.poll(pfd, c->qp_ready ? 4 : 2, timeout);
	}
	if (pfd[3].revents)
		rsx_dev_async_all();
	rsx_sock_lock(s);
	if (ret < 0)
		ret = errno == EINTR ? rsx_intr(timeout, mask, seen) : 0;
	else if (ret == 0 && timeout >= 0)
		ret = -EAGAIN;
	if (pfd[1].revents)
		while (rsx_libc.read(c->kick_fd, &kick, sizeof(kick)) > 0)
			;
	if (pfd[2].revents)
		rsx_conn_event(c);
	rev = pfd[0].revents;
	/*
	 * The program closed the descriptor under this blocked call: it goes
	 * on with the duplicate (next time round), or fails where there was
	 * none to make.
	 */
	if (rev & POLLNVAL) {
		rev = 0;
		if (ret >= 0 && s->orphan_fd < 0)
			ret = -EBADF;
	}
	if (nested) {
		c->want = want;	/* the interrupted sleep's, which goes on */
	} else {
		c->polling = 0;
		c->want = 0;
	}
	rsx_conn_wake(c);
	if (s->conn != c) {
		/* dropped by rsx_to_tcp while we slept */
		if (!c->waiters && !nested)
			rsx_conn_destroy(c);
		return ret < 0 ? ret : -ERESTART;
	}
	if (!c->tcp_eof && (rev & (POLLRDHUP | POLLHUP | POLLERR)))
		rsx_peer_closed(s);
	return ret < 0 ? ret : rev;
}

/* Waits up to ms for fd to become readable, without s->lock. */
static void rsx_wait_in(struct rsx_sock *s, int fd, int ms)
{
	struct pollfd pfd = { .fd = rsx_sfd(s, fd), .events = POLLIN };

	if (ms <= 0)
		return;
	rsx_sock_unlock(s);
	rsx_libc.poll(&pfd, 1, ms);
	rsx_sock_lock(s);
}

/* Writes a whole negotiation message; only the first byte may say EAGAIN. */
static int rsx_tcp_send_msg(int fd, const uint8_t *buf, size_t len,
			    int nonblock)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int64_t deadline = rsx_now_ms() + 2000;
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = rsx_libc.send(fd, buf + off, len - off,
				  MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			off += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		if (!off && nonblock)
			return -EAGAIN;
		if (rsx_now_ms() > deadline)
			return -ETIMEDOUT;
		rsx_libc.poll(&pfd, 1, 100);
	}
	return 0;
}

void rsx_to_tcp(struct rsx_sock *s, enum rsx_stat reason)
{
	struct rsx_conn *c = s->conn;

	rsx_handoff_done(s, 0);	/* unless a downgrade said TCP before */
	rsx_ready_off(s, 1);
	s->conn = NULL;
	if (unlikely(s->oob)) {
		rsx_oob_drop(s->oob);
		s->oob = NULL;
	}
	if (c && (c->polling || c->waiters)) {
		/* another thread sleeps on it (a reader while a writer took
		 * the HELLO's answer): the last one out frees it (rsx_sleep) */
		rsx_kick(c);
		rsx_conn_wake(c);
	} else if (c) {
		rsx_conn_destroy(c);
	}
	if (reason != RSX_STAT_COUNT)
		rsx_stat_inc(reason);
	rsx_sock_set_state(s, RSX_ST_TCP);
	rsx_wake_close(s);
}

int rsx_local_addr(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	if (rsx_libc.getsockname(fd, (struct sockaddr *)ss, &len))
		return -errno;
	return 0;
}

/* CLIENT_NEW: resources, then HELLO as the first bytes of the stream. */
int rsx_client_start(struct rsx_sock *s, int fd, int nonblock)
{
	uint8_t buf[RSX_WIRE_LEN];
	struct sockaddr_storage ss;
	struct rsx_dev *dev;
	struct rsx_hello h;
	int ret;

	if (atomic_load(&s->evented)) {
		rsx_to_tcp(s, RSX_STAT_fallback_evented);
		return 0;
	}
	if (!s->conn) {
		if (rsx_local_addr(fd, &ss) || rsx_dev_find((void *)&ss, &dev)) {
			rsx_dbg("fd %d: no RDMA device for the local address",
				fd);
			rsx_to_tcp(s, RSX_STAT_fallback_nodev);
			return 0;
		}
		ret = rsx_conn_create(dev, rsx_config.ring_size, &s->conn);
		if (ret) {
			rsx_to_tcp(s, rsx_fallback_of(ret));
			return 0;
		}
	}
	rsx_conn_hello(s->conn, RSX_MSG_HELLO, &h);
	rsx_wire_encode(&h, buf);
	ret = rsx_tcp_send_msg(fd, buf, sizeof(buf), nonblock);
	if (ret == -EAGAIN)
		return ret;
	if (ret) {
		/* not connected (yet, or any more): the real call will say */
		rsx_to_tcp(s, RSX_STAT_COUNT);
		return 0;
	}
	rsx_stat_inc(RSX_STAT_hello_sent);
	s->conn->hello_at = rsx_now_ms();
	rsx_dbg("fd %d: HELLO sent, QP %u", fd, h.qpn);
	rsx_sock_set_state(s, RSX_ST_CLIENT_HELLO);
	/* the answer must not wake an epoll of the program: x stands in */
	if (s->nepreg && rsx_ready_on(s, fd) >= 0)
		rsx_ready_swap(s);
	return 0;
}

/*
 * Peeks at the first bytes the peer sent, for one negotiation message.
 * Returns 1 with a decoded message in h, 0 when they are not one of ours
 * (they stay in the stream), -EAGAIN when there is nothing yet, or only the
 * start of a message, and -EINVAL for a message of ours with bad contents.
 * A start of a message that is not completed within RSX_HELLO_WAIT_MS is
 * not one.
 */
static int rsx_peek_msg(struct rsx_sock *s, int fd, struct rsx_hello *h)
{
	uint8_t buf[RSX_WIRE_LEN];
	ssize_t n;
	int ret;

	n = rsx_libc.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == ENOTSOCK || errno == EBADF))
		return -ENOTSOCK;	/* the number was reused: not ours */
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : 0;
	if (n == 0)
		return 0;
	ret = rsx_wire_decode(buf, n, h);
	if (ret == -EAGAIN) {
		if (!s->partial_since)
			s->partial_since = rsx_now_ms();
		else if (rsx_now_ms() - s->partial_since >
			 rsx_config.hello_wait_ms)
			return 0;
		return -EAGAIN;
	}
	if (ret == -EPROTO)
		return 0;
	if (ret == -EINVAL)
		return -EINVAL;
	return 1;
}

static void rsx_consume_msg(int fd)
{
	uint8_t buf[RSX_WIRE_LEN];

	/* peeked complete before: this cannot block or come up short */
	rsx_libc.recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
}

/* CLIENT_HELLO: is the first thing from the server our answer? */
static int rsx_client_answer(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;
	struct rsx_hello h;
	int ret;

	ret = rsx_peek_msg(s, fd, &h);
	if (ret == -EAGAIN)
		return ret;
	if (ret == -EINVAL && h.nonce == c->nonce) {
		/*
		 * Our answer, its checksum right, a field not acceptable: the
		 * server's library sent it, not its application, whose bytes
		 * follow on TCP without it.
		 */
		rsx_consume_msg(fd);
		rsx_info("fd %d: the server's answer is not acceptable: stays "
			 "TCP", fd);
		rsx_to_tcp(s, RSX_STAT_fallback_peer);
		return 0;
	}
	if (ret <= 0 || h.nonce != c->nonce ||
	    (h.type != RSX_MSG_ACK && h.type != RSX_MSG_NAK)) {
		rsx_dbg("fd %d: server answered with data: stays TCP", fd);
		rsx_to_tcp(s, RSX_STAT_fallback_peer);
		return 0;
	}
	rsx_consume_msg(fd);
	if (h.type == RSX_MSG_NAK) {
		rsx_stat_inc(RSX_STAT_nak_received);
		rsx_info("fd %d: NAK: %s: stays TCP", fd,
			 rsx_nak_str(h.reason));
		rsx_to_tcp(s, RSX_STAT_fallback_nak);
		return 0;
	}
	rsx_stat_inc(RSX_STAT_ack_received);
	if (rsx_now_ms() - c->hello_at > rsx_config.cut_wait_ms / 3) {
		/* the server may stop waiting for our CUTOVER (conn.h) */
		rsx_info("fd %d: the ACK was read too late to cut over: stays "
			 "TCP", fd);
		rsx_to_tcp(s, RSX_STAT_fallback_no_cutover);
		return 0;
	}
	if (atomic_load(&s->evented)) {
		/* no CUTOVER: the server waits for it and stays TCP too */
		rsx_dbg("fd %d: in too many epoll sets: stays TCP", fd);
		rsx_to_tcp(s, RSX_STAT_fallback_evented);
		return 0;
	}
	if (s->nepreg && rsx_ready_on(s, fd) < 0) {
		rsx_to_tcp(s, RSX_STAT_fallback_resources);
		return 0;
	}
	if (s->wr_shut) {
		/* our TCP side is closed: no cut-over, the server stays TCP */
		rsx_to_tcp(s, RSX_STAT_fallback_qp);
		return 0;
	}
	ret = rsx_conn_connect(c, &h);
	if (ret || rsx_conn_cutover(c)) {
		/* nothing went over the QP: the server waits for a CUTOVER
		 * that never comes and both directions stay TCP */
		rsx_to_tcp(s, ret == -ENOSR ? RSX_STAT_fallback_pinned :
					     RSX_STAT_fallback_qp);
		return 0;
	}
	rsx_stat_inc(RSX_STAT_upgraded);
	rsx_info("fd %d: upgraded (client), QP %u", fd, c->qp->qp_num);
	rsx_sock_set_state(s, RSX_ST_UPGRADED);
	rsx_ready_upgraded(s);
	/*
	 * Another thread may sleep on c since before the QP was ready (a send
	 * waiting for TCP room while the answer was out): its poll has no
	 * completion channel in it, and a thread napping for it would wait
	 * on ring data for ever.  It polls anew, the channel included.
	 */
	rsx_kick(c);
	return 0;
}

static int rsx_server_nak(int fd, uint64_t nonce, int reason)
{
	uint8_t buf[RSX_WIRE_LEN];
	struct rsx_hello h = {
		.type = RSX_MSG_NAK, .nonce = nonce, .reason = reason,
	};

	rsx_wire_encode(&h, buf);
	rsx_stat_inc(RSX_STAT_nak_sent);
	rsx_info("fd %d: NAK (%s)", fd, rsx_nak_str(reason));
	return rsx_tcp_send_msg(fd, buf, sizeof(buf), 0);
}

/*
 * The server's half of an upgrade that a HELLO asks for, in band or out
 * (midstream.c): a HELLO proves the client runs rsockx, so only a tcp rule
 * says no; then a QP in RTS toward the client's.  Returns 0, or the NAK
 * reason with *stat the fallback counter to count.
 */
int rsx_server_conn(struct rsx_sock *s, int fd, const struct rsx_hello *hello,
		    enum rsx_stat *stat)
{
	struct sockaddr_storage ss;
	struct rsx_dev *dev;
	int ret;

	*stat = RSX_STAT_fallback_resources;
	if (rsx_local_addr(fd, &ss))
		return RSX_NAK_INTERNAL;
	if (atomic_load(&s->evented)) {
		*stat = RSX_STAT_fallback_evented;
		return RSX_NAK_EVENTED;
	}
	if (!rsx_config.valid ||
	    rsx_rules_match(&rsx_config.rules, RSX_DIR_ACCEPT,
			    (struct sockaddr *)&ss, sizeof(ss), RSX_ACT_PROBE,
			    NULL) == RSX_ACT_TCP) {
		*stat = RSX_STAT_fallback_rules;
		return RSX_NAK_RULES;
	}
	if (rsx_dev_find((struct sockaddr *)&ss, &dev)) {
		*stat = RSX_STAT_fallback_nodev;
		return RSX_NAK_NODEV;
	}
	ret = rsx_conn_create(dev, rsx_config.ring_size, &s->conn);
	if (ret) {
		*stat = rsx_fallback_of(ret);
		return RSX_NAK_RESOURCES;
	}
	s->conn->nonce = hello->nonce;
	ret = rsx_conn_connect(s->conn, hello);
	if (ret) {
		*stat = rsx_fallback_of(ret);
		return ret == -ENOSR ? RSX_NAK_RESOURCES : RSX_NAK_INTERNAL;
	}
	if (s->nepreg && rsx_ready_on(s, fd) < 0)
		return RSX_NAK_RESOURCES;
	/* no CUTOVER for good: the ring goes again (conn.h) */
	s->conn->cut_by = rsx_now_ms() + rsx_config.cut_wait_ms;
	if (rsx_linger_watch_cut(s, s->conn))
		rsx_info("fd %d: no deadline for the client's CUTOVER", fd);
	return 0;
}

/* A HELLO came in first: answer ACK with a QP in RTS, or NAK. */
static void rsx_server_answer(struct rsx_sock *s, int fd,
			      const struct rsx_hello *hello)
{
	uint8_t buf[RSX_WIRE_LEN];
	enum rsx_stat stat;
	struct rsx_hello h;
	int reason;

	reason = rsx_server_conn(s, fd, hello, &stat);
	if (reason) {
		rsx_to_tcp(s, stat);
		rsx_server_nak(fd, hello->nonce, reason);
		return;
	}
	rsx_conn_hello(s->conn, RSX_MSG_ACK, &h);
	rsx_wire_encode(&h, buf);
	if (rsx_tcp_send_msg(fd, buf, sizeof(buf), 0)) {
		rsx_to_tcp(s, RSX_STAT_COUNT);
		return;
	}
	rsx_stat_inc(RSX_STAT_ack_sent);
	rsx_stat_inc(RSX_STAT_upgraded);
	rsx_info("fd %d: upgraded (server), QP %u", fd, s->conn->qp->qp_num);
	rsx_sock_set_state(s, RSX_ST_UPGRADED);
	rsx_ready_upgraded(s);
	/* a reader asleep on TCP alone: the client's bytes may come by ring */
	rsx_wake_sleepers(s);
}

/*
 * No HELLO at the start of an accepted stream: plain TCP, unless the client
 * may still ask out of band (oob.h) while the connection is young.
 */
static void rsx_server_settle(struct rsx_sock *s)
{
	if (s->oob_ok && (!s->shared || s->share_slot >= 0) &&
	    rsx_now_ms() < s->oob_until)
		rsx_sock_set_state(s, RSX_ST_SERVER_WAIT);
	else
		rsx_to_tcp(s, RSX_STAT_COUNT);
}

/* SERVER_NEW / SERVER_STRIP: look for a HELLO at the start of the stream. */
static int rsx_server_detect(struct rsx_sock *s, int fd)
{
	struct rsx_hello h;
	int ret;

	ret = rsx_peek_msg(s, fd, &h);
	if (ret == -EAGAIN)
		return ret;
	if (ret == -EINVAL) {
		/* ours, but not a version we speak */
		rsx_consume_msg(fd);
		if (s->state == RSX_ST_SERVER_NEW)
			rsx_server_nak(fd, h.nonce, RSX_NAK_VERSION);
		rsx_to_tcp(s, RSX_STAT_COUNT);
		return 0;
	}
	if (ret == 0 || h.type != RSX_MSG_HELLO) {
		rsx_server_settle(s);
		return 0;
	}
	rsx_consume_msg(fd);
	rsx_stat_inc(RSX_STAT_hello_received);
	if (s->state == RSX_ST_SERVER_STRIP) {
		rsx_dbg("fd %d: late HELLO dropped (application spoke first)",
			fd);
		rsx_to_tcp(s, RSX_STAT_fallback_peer);
		return 0;
	}
	rsx_server_answer(s, fd, &h);
	return 0;
}

/*
 * After the peer's DOWNGRADE (conn.h): our ring bytes that its application
 * had not read go again over TCP, from the staging mirror, before anything
 * new; then a shutdown(SHUT_WR) the ring carried as FIN becomes TCP's own.
 * Returns 0 once nothing is left, -EAGAIN while TCP takes no more, or the
 * -errno of the TCP send.
 */
static int rsx_resend(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;
	uint32_t size = c->peer.ring_size, off;
	size_t len;
	ssize_t n;

	while (c->tx_resend < c->tx_head) {
		off = c->tx_resend & (size - 1);
		len = c->tx_head - c->tx_resend;
		if (len > size - off)
			len = size - off;
		n = rsx_libc.send(fd, c->stage + off, len,
				  MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		c->tx_resend += n;
		rsx_stat_add(RSX_STAT_down_resent_bytes, n);
		rsx_stat_add(RSX_STAT_tcp_tx_bytes, n);
	}
	if (s->wr_shut && !c->down_shut) {
		c->down_shut = 1;
		rsx_libc.shutdown(fd, SHUT_WR);
	}
	return 0;
}

/* The bytes of the peer's ring are all read: TCP is next. */
static int rsx_rx_from_tcp(const struct rsx_conn *c)
{
	return !c->rx_ring || (c->peer_down && !rsx_conn_readable(c));
}

/*
 * After an out-of-band upgrade, the peer's CUTOVER proves that it sent the
 * TCP bytes we read (conn.h).  1 once it did; a proof that fails breaks
 * the connection, never a stream that goes on with someone else's bytes.
 */
static int rsx_proved(struct rsx_conn *c)
{
	if (!c->oob || c->proved)
		return 1;
	if (!c->peer_cutover || c->rx_tcp != (uint64_t)c->rx_tcp_limit)
		return 0;
	if (c->rx_sum != c->peer_sum) {
		rsx_conn_fail(c, -ECONNRESET,
			      "CUTOVER does not prove the TCP bytes");
		return 0;
	}
	c->proved = 1;
	return 1;
}

/*
 * The queue pair broke (c->err) while this direction still went over TCP.
 * Bytes of either side may have been in flight on it (our ring writes, the
 * peer's after its CUTOVER, which itself may be lost), so the stream cannot
 * go on over TCP either: the call fails (ECONNRESET), and the peer gets a
 * reset, as from a kernel whose connection broke, never a FIN that would
 * read as the stream's end.  Once; calls after it fail with EPIPE or read
 * the end.
 */
static int rsx_broken(struct rsx_conn *c, int fd)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	if (c->tcp_reset)
		return 0;
	c->tcp_reset = 1;
	/* a TCP socket connected to AF_UNSPEC is disconnected: RST */
	if (rsx_libc.connect(fd, &sa, sizeof(sa)))
		rsx_libc.shutdown(fd, SHUT_RDWR);
	rsx_info("fd %d: queue pair broken before the cut-over: TCP reset",
		 fd);
	return c->err;
}

/* All the peer's TCP bytes are read: its ring is next. */
static void rsx_rx_switch(struct rsx_conn *c)
{
	rsx_proved(c);
	c->rx_ring = 1;
}

/*
 * Completions in, and the server's side of the cut-over: it moves its sends
 * to the ring once the client's CUTOVER proved the client QP ready.  After
 * the peer's DOWNGRADE, what it has to get again goes out as TCP takes it.
 */
static void rsx_progress(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (!c || !c->qp_ready)
		return;
	rsx_conn_poll(c);
	if (c->peer_down)
		rsx_resend(s, fd);
	else if (c->peer_cutover && !c->tx_ring && !s->wr_shut && !c->err &&
		 rsx_proved(c))
		rsx_conn_cutover(c);
}

/*
 * c broke while this server still waited for the client's CUTOVER, broken
 * by the deadline's ping (rsx_sock_cut_step): the client's QP is not
 * there, it never cut over, and TCP carries the whole stream both ways.
 * Returns 1 when s went back to plain TCP.
 */
static int rsx_cut_abandoned(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	if (!c || !c->err || !c->cut_ping || c->peer_cutover || c->tx_ring ||
	    c->peer_down)
		return 0;
	rsx_info("QP %u: the client never cut over and its QP is gone: plain "
		 "TCP", c->qp->qp_num);
	rsx_to_tcp(s, RSX_STAT_fallback_no_cutover);
	rsx_wake_sleepers(s);
	return 1;
}

int rsx_sock_cut_step(struct rsx_sock *s, struct rsx_conn *c, int64_t now)
{
	if (s->state != RSX_ST_UPGRADED || s->conn != c || c->peer_down ||
	    c->tx_ring)
		return 0;
	if (c->peer_cutover || (c->err && !c->cut_ping))
		return 0;	/* cut over, or broken: the data path's now */
	if (rsx_cut_abandoned(s))
		return 0;
	if (now < c->cut_by)
		return 1;
	rsx_conn_poll(c);
	if (c->peer_cutover || rsx_cut_abandoned(s) || c->err)
		return 0;
	if (c->cut_ping && c->sq_done >= c->ping_wr) {
		c->cut_ping = 0;
		c->cut_by = now + rsx_config.cut_wait_ms;
		rsx_info("QP %u: no CUTOVER yet, but the client's QP answers: "
			 "waiting on", c->qp->qp_num);
		return 1;
	}
	if (!c->cut_ping && !rsx_conn_ping(c)) {
		c->cut_ping = 1;
		c->ping_wr = c->sq_posted;
		rsx_dbg("QP %u: no CUTOVER after %d ms: is the client's QP "
			"there?", c->qp->qp_num, rsx_config.cut_wait_ms);
	}
	c->cut_by = now + 100;
	return 1;
}

/*
 * The peer went back to TCP and nothing of the ring is left: our bytes it
 * had not read went again, and the application has read all the peer wrote
 * into our ring (after any TCP bytes before its cut-over).  The socket
 * becomes plain TCP, unless a thread still sleeps on the connection.
 * Returns 1 when it did.
 */
static int rsx_down_settle(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (s->state != RSX_ST_UPGRADED || !c->peer_down || c->polling ||
	    c->waiters || c->tx_resend != c->tx_head ||
	    (s->wr_shut && !c->down_shut) || rsx_conn_readable(c) ||
	    !(c->rx_ring || c->rx_tcp_limit < 0 || !c->rx_head))
		return 0;
	if (s->rd_shut)
		rsx_libc.shutdown(fd, SHUT_RD);
	rsx_dbg("fd %d: back to plain TCP after the peer's DOWNGRADE", fd);
	rsx_handoff_done(s, 1);
	rsx_to_tcp(s, RSX_STAT_peer_downgrades);
	return 1;
}

/*
 * The peer closed its end of the TCP connection.  After its cut-over that
 * means its process closed the socket, or died: with a FIN message before,
 * an orderly end; without, the connection is broken.  Before its cut-over
 * its data came over TCP and the TCP end is the stream's end.
 */
static void rsx_peer_closed(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	c->tcp_eof = 1;
	rsx_conn_poll(c);
	if (!c->peer_fin && c->peer_cutover && !c->peer_down)
		rsx_conn_fail(c, -ECONNRESET, "peer closed without FIN");
	else if (!c->peer_cutover && !c->peer_down && c->qp_ready)
		rsx_conn_ping(c);
}

/* The peer is gone: nobody will read what we send. */
static int rsx_peer_gone(const struct rsx_conn *c)
{
	return c->err || (c->tcp_eof && (c->peer_fin || c->peer_cutover));
}

/*
 * Busy-polls the completion queue for up to RSOCKX_SPIN_US, or until a
 * signal comes: one held back (mask), or a handler that ran (seen).
 * Signals are looked at every RSX_SPIN_SIG_EVERY polls, the clock every
 * RSX_SPIN_CLOCK_EVERY, and first after that many (clock.h: most spins
 * end before).  Where the kernel has no usable TSC, clock_gettime is a
 * system call of 2 to 5 us on the emulated HPET of the test VM, and a
 * completion that comes during it waits for its end: read every 16 polls
 * it took a third of the spin, and the ping-pong round trip was 4% longer
 * (45.0 against 43.0 us median, six alternating rounds).  A spin may
 * last up to RSX_SPIN_CLOCK_EVERY polls past RSOCKX_SPIN_US.
 */
#define RSX_SPIN_SIG_EVERY	16
#define RSX_SPIN_CLOCK_EVERY	256

static int rsx_spin(struct rsx_conn *c, const sigset_t *mask,
		    const struct rsx_sig_seen *seen)
{
	struct rsx_spin_end end;
	unsigned int i;

	rsx_spin_end_init(&end, rsx_config.spin_us, 0);
	for (i = 1;; i++) {
		if (rsx_conn_poll(c))
			return 1;
		if (i % RSX_SPIN_SIG_EVERY)
			continue;
		if (mask ? rsx_guard_signalled(mask) :
			   rsx_sig_ran(seen) || rsx_sig_waiting())
			return 0;
		if (!(i % RSX_SPIN_CLOCK_EVERY) && rsx_spin_end_passed(&end))
			return 0;
	}
}

/*
 * Waits for progress on an upgraded socket: a completion, TCP data when
 * want_tcp (before the peer's cut-over), and always the TCP end, which
 * POLLRDHUP reports even while unread TCP bytes are queued.  It spins
 * first, watching the program's handlers run (sig.h), or, where rsockx
 * cannot see them, with signals held back (rsx_guard_signals).  Held back
 * from the end of the spin on, a signal ends the sleep after it (which
 * takes the program's mask atomically) at once.
 */
static int rsx_wait_conn(struct rsx_sock *s, int fd, int want_tcp)
{
	struct rsx_conn *c = s->conn;
	sigset_t old, *mask = NULL;
	struct rsx_sig_seen seen;
	short events = 0;
	int ret;

	if (rsx_config.spin_us && c->qp_ready) {
		mask = &old;
		rsx_sig_snap(&seen);
		if (rsx_sig_wrapped()) {
			if (rsx_spin(c, NULL, &seen))
				return 0;
			rsx_guard_signals(mask);
		} else {
			rsx_guard_signals(mask);
			if (rsx_spin(c, mask, &seen)) {
				rsx_guard_signals_end(mask);
				return 0;
			}
		}
	}
	if (want_tcp)
		events |= POLLIN;
	if (!c->tcp_eof)
		events |= POLLRDHUP;
	if (c->peer_down && c->tx_resend < c->tx_head)
		events |= POLLOUT;
	ret = rsx_sleep(s, fd, events, mask, mask ? &seen : NULL);
	if (mask)
		rsx_guard_signals_end(mask);
	return ret < 0 ? ret : 0;
}

/*
 * SO_RCVLOWAT (read from the kernel once, then kept up to date by
 * setsockopt), at most the ring: a peer can fill the ring without a
 * credit, never more.
 */
static size_t rsx_lowat(struct rsx_sock *s, int fd)
{
	socklen_t len = sizeof(int);
	int v = 1;

	if (!s->rcvlowat) {
		if (rsx_libc.getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v,
					&len) || v < 1)
			v = 1;
		s->rcvlowat = v;
	}
	if (s->conn && (size_t)s->rcvlowat > s->conn->ring_size)
		return s->conn->ring_size;
	return s->rcvlowat;
}

void rsx_sock_rcvlowat(int fd, int val)
{
	struct rsx_sock *s = rsx_fd_get(fd);

	if (!s)
		return;
	rsx_sock_lock(s);
	s->rcvlowat = val < 1 ? 1 : val;
	rsx_sock_ready_sync(s);
	rsx_sock_unlock(s);
	rsx_sock_put(s);
}

/*
 * Like TCP, a blocking recv returns once it has the smaller of len and
 * SO_RCVLOWAT (all of len with MSG_WAITALL), or at the end, an error, a
 * signal or SO_RCVTIMEO; a non-blocking one returns what there is.
 */
static ssize_t rsx_up_recv(struct rsx_sock *s, int fd, const struct iovec *iov,
			   int iovcnt, size_t len, int flags, int nonblock)
{
	int peek = flags & MSG_PEEK;
	int waitall = (flags & MSG_WAITALL) && !peek;
	struct rsx_conn *c = s->conn;
	size_t got = 0, want, target;
	ssize_t n;
	int ret;

	target = waitall ? len : peek ? 1 : rsx_lowat(s, fd);
	if (target > len)
		target = len;
	for (;;) {
		fd = rsx_sfd(s, fd);
		rsx_progress(s, fd);
		if (s->rd_shut)
			return got;
		if (rsx_rx_from_tcp(c)) {
			if (!c->rx_ring && c->rx_tcp_limit >= 0 &&
			    c->rx_tcp == (uint64_t)c->rx_tcp_limit) {
				rsx_rx_switch(c);
				continue;
			}
			want = len - got;
			if (!c->rx_ring && c->rx_tcp_limit >= 0 &&
			    want > c->rx_tcp_limit - c->rx_tcp)
				want = c->rx_tcp_limit - c->rx_tcp;
			n = rsx_tcp_io(fd, iov, iovcnt, got, want,
				       (peek ? MSG_PEEK : 0) | MSG_DONTWAIT, 0);
			if (n > 0) {
				if (!peek) {
					c->rx_tcp += n;
					if (c->oob)
						c->rx_sum = rsx_sum_iov(
							c->rx_sum, iov, iovcnt,
							got, n);
					rsx_stat_add(RSX_STAT_tcp_rx_bytes, n);
				}
				got += n;
				if (got >= target)
					return got;
				continue;
			}
			if (n == 0) {
				/* the CUTOVER may be in the CQ before the EOF */
				rsx_conn_poll(c);
				if (!c->rx_ring && c->rx_tcp_limit >= 0 &&
				    c->rx_tcp == (uint64_t)c->rx_tcp_limit) {
					rsx_rx_switch(c);
					c->tcp_eof = 1;
					continue;
				}
				return got;
			}
			if (n != -EAGAIN)
				return got ? (ssize_t)got : n;
			/* no spin on a broken QP, no stream with a hole */
			if (c->err && !got && rsx_cut_abandoned(s))
				return -ERESTART;
			if (c->err)
				return got ? (ssize_t)got : rsx_broken(c, fd);
		} else {
			n = rsx_conn_read(c, iov, iovcnt, got, len - got, peek);
			got += n;
			if (n && got >= target)
				return got;
			if (!rsx_conn_readable(c)) {
				if (c->peer_fin)
					return got;
				if (c->err)
					return got ? (ssize_t)got : c->err;
			}
		}
		if (got >= target && got)
			return got;
		if (nonblock)
			return got ? (ssize_t)got : -EAGAIN;
		ret = rsx_wait_conn(s, fd, rsx_rx_from_tcp(c));
		if (ret)
			return got ? (ssize_t)got : ret;
	}
}

static ssize_t rsx_epipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	return -EPIPE;
}

/*
 * Gives TCP what it takes now of a send's rest (iov from sent on).  Before
 * the cut-over (s->conn set) the bytes are counted: the peer drains
 * exactly that many from TCP before it reads the ring.  Returns the bytes
 * taken, -EAGAIN or another -errno.
 */
static ssize_t rsx_tcp_send_now(struct rsx_sock *s, int fd,
				const struct iovec *iov, int iovcnt,
				size_t sent, size_t len, int flags)
{
	ssize_t n = rsx_tcp_io(fd, iov, iovcnt, sent, len - sent,
			       flags | MSG_DONTWAIT, 1);

	if (n > 0 && s->conn) {
		s->conn->tx_tcp += n;
		if (s->conn->oob)
			s->conn->tx_sum = rsx_sum_iov(s->conn->tx_sum, iov,
						      iovcnt, sent, n);
		rsx_stat_add(RSX_STAT_tcp_tx_bytes, n);
	}
	return n;
}

/* sent: bytes of this call that already went out (rsx_hello_send) */
static ssize_t rsx_up_send(struct rsx_sock *s, int fd, const struct iovec *iov,
			   int iovcnt, size_t len, int flags, int nonblock,
			   size_t sent)
{
	struct rsx_conn *c = s->conn;
	ssize_t n;
	int ret;

	/*
	 * With room in the peer's ring for all of it, a send needs nothing
	 * from the CQ: what the poll would find (credits, the peer's data, an
	 * error) waits for the next call, as a TCP send to a peer that has
	 * gone succeeds too.  One poll of the CQ less per send.
	 */
	if (c->tx_ring && !c->peer_down && !c->err && !s->wr_shut &&
	    rsx_conn_tx_room(c) >= len - sent) {
		n = rsx_conn_write(c, iov, iovcnt, sent, len - sent);
		if (n > 0)
			sent += n;
		if (sent == len)
			return sent;
	}
	for (;;) {
		fd = rsx_sfd(s, fd);
		rsx_progress(s, fd);
		if (s->wr_shut)
			return sent ? (ssize_t)sent : rsx_epipe(flags);
		if (!c->tx_ring && c->err && !c->peer_down) {
			if (sent)
				return sent;
			if (rsx_cut_abandoned(s))
				return -ERESTART;
			return c->tcp_reset ? rsx_epipe(flags) :
					      rsx_broken(c, fd);
		}
		if (!c->tx_ring) {
			n = c->peer_down ? rsx_resend(s, fd) : 0;
			if (n == -EPIPE)
				return sent ? (ssize_t)sent : rsx_epipe(flags);
			if (!n)
				n = rsx_tcp_send_now(s, fd, iov, iovcnt, sent,
						     len, flags);
			if (n > 0) {
				sent += n;
				if (sent == len)
					return sent;
				continue;
			}
			if (n != -EAGAIN)
				return sent ? (ssize_t)sent : n;
			if (nonblock)
				return sent ? (ssize_t)sent : -EAGAIN;
			ret = rsx_sleep(s, fd, POLLOUT, NULL, NULL);
			if (ret < 0)
				return sent ? (ssize_t)sent : ret;
			continue;
		}
		if (c->err) {
			if (sent)
				return sent;
			if (!c->err_reported) {
				c->err_reported = 1;
				return c->err;
			}
			return rsx_epipe(flags);
		}
		n = rsx_conn_write(c, iov, iovcnt, sent, len - sent);
		if (n < 0)
			continue;	/* c->err is set */
		sent += n;
		if (sent == len)
			return sent;
		if (nonblock)
			return sent ? (ssize_t)sent : -EAGAIN;
		if (rsx_peer_gone(c) && !c->err)
			rsx_conn_fail(c, -ECONNRESET, "peer closed");
		ret = rsx_wait_conn(s, fd, 0);
		if (ret)
			return sent ? (ssize_t)sent : ret;
	}
}

static int rsx_negotiate(struct rsx_sock *s, int fd, int reading,
			 int nonblock);
static int rsx_downgrade(struct rsx_sock *s, int fd, int exec);
static int rsx_forked_use(struct rsx_sock *s);

/*
 * CLIENT_HELLO: the answer is out, and the application's bytes go on TCP,
 * counted.  Never as one blocking kernel call: that would hold s->lock,
 * and with it a thread of the program that waits to read, until the peer
 * read (a peer that writes before it reads would never), and the whole
 * call would go on TCP even when the answer came early in it.  TCP takes
 * what fits; then the call sleeps until TCP has room or the answer is in,
 * and after an ACK the rest goes to the ring.
 */
static ssize_t rsx_hello_send(struct rsx_sock *s, int fd,
			      const struct iovec *iov, int iovcnt, size_t len,
			      int flags, int nonblock)
{
	size_t sent = 0;
	ssize_t n;
	int ret;

	for (;;) {
		fd = rsx_sfd(s, fd);
		if (s->state == RSX_ST_UPGRADED)
			return rsx_up_send(s, fd, iov, iovcnt, len, flags,
					   nonblock, sent);
		n = rsx_tcp_send_now(s, fd, iov, iovcnt, sent, len, flags);
		if (n > 0) {
			sent += n;
			if (sent == len)
				return sent;
			continue;
		}
		if (n != -EAGAIN || nonblock)
			return sent ? (ssize_t)sent : n;
		ret = rsx_sleep(s, fd, s->state == RSX_ST_CLIENT_HELLO ?
				POLLOUT | POLLIN : POLLOUT, NULL, NULL);
		if (ret < 0)
			return sent ? (ssize_t)sent : ret;
		if (s->state == RSX_ST_CLIENT_HELLO) {
			/* the answer, if it is in: ring or plain TCP next */
			ret = rsx_negotiate(s, fd, 0, 0);
			if (ret && ret != -EAGAIN)
				return sent ? (ssize_t)sent : ret;
			if (s->partial_since)
				usleep(1000);	/* its rest is due */
		}
	}
}

/*
 * Runs the negotiation as far as it goes without blocking.  Returns 0 when
 * the state is final for this call (TCP or UPGRADED), -EAGAIN when it needs
 * more input, or another -errno.
 */
static int rsx_negotiate(struct rsx_sock *s, int fd, int reading,
			 int nonblock)
{
	int ret, grace_used = 0;

	for (;;) {
		fd = rsx_sfd(s, fd);
		switch (s->state) {
		case RSX_ST_CLIENT_NEW:
			ret = rsx_client_start(s, fd, nonblock);
			if (ret)
				return ret;
			continue;
		case RSX_ST_CLIENT_HELLO:
			ret = rsx_client_answer(s, fd);
			/* a writer goes on over TCP while the answer is out */
			if (ret == -EAGAIN && !reading)
				return 0;
			if (ret)
				return ret;
			continue;
		case RSX_ST_SERVER_NEW:
		case RSX_ST_SERVER_STRIP:
			ret = rsx_server_detect(s, fd);
			if (ret == -EAGAIN && !reading && !grace_used &&
			    s->state == RSX_ST_SERVER_NEW) {
				/*
				 * The application wants to speak first.  A
				 * client's HELLO leaves right after its
				 * connect() returned: give it a moment.
				 */
				grace_used = 1;
				rsx_wait_in(s, fd, rsx_config.hello_grace_ms);
				continue;
			}
			if (ret == -EAGAIN && !reading) {
				/* the application speaks first: no upgrade */
				if (s->state == RSX_ST_SERVER_NEW)
					rsx_sock_set_state(s,
						RSX_ST_SERVER_STRIP);
				return 0;
			}
			if (ret)
				return ret;
			continue;
		default:
			return 0;
		}
	}
}

static int rsx_is_nonblock(struct rsx_sock *s, int flags)
{
	return atomic_load(&s->nonblock) || (flags & MSG_DONTWAIT);
}

/*
 * A descriptor number that we still took for a socket turned out to be
 * something else: the socket was closed behind our back (fclose() of an
 * fdopen()ed socket) and the number reused.  Forget it; -ENOTSOCK tells
 * the shim to make the real call.
 */
static ssize_t rsx_stale(struct rsx_sock *s, int fd)
{
	if (rsx_fd_peek(fd) == s) {
		rsx_fd_clear(fd);
		rsx_stat_inc(RSX_STAT_stale_cleared);
	}
	return -ENOTSOCK;
}

/*
 * recv and send of a socket in the engine's hands: negotiate as far as
 * possible (a blocking call waits for the peer's first bytes, or for a
 * connect() in progress), then do the I/O the state calls for.
 */
static ssize_t rsx_sock_io(int fd, const struct iovec *iov, int iovcnt,
			   int flags, int send)
{
	struct rsx_sock *s = rsx_fd_get(fd);
	size_t len = rsx_iov_len(iov, iovcnt), done = 0;
	int nonblock;
	ssize_t ret;

	if (!s)
		return -ENOTSOCK;
	rsx_call_begin(send ? SO_SNDTIMEO : SO_RCVTIMEO);
	nonblock = rsx_is_nonblock(s, flags);
	rsx_sock_lock(s);
	if (unlikely(s->oob_ok) && rsx_counts(s))
		rsx_board_check(s, fd);
	if (unlikely(s->oob) && !atomic_load(&s->pollers))
		rsx_oob_apply(s, fd);
again:
	/* an upgraded socket has nothing left to negotiate */
	ret = 0;
	while (s->state != RSX_ST_UPGRADED) {
		ret = rsx_negotiate(s, fd, !send, nonblock);
		if (ret != -EAGAIN || nonblock)
			break;
		if (!send && s->partial_since)
			usleep(1000);	/* a message's start is in: its rest is due */
		else if ((ret = rsx_sleep(s, fd, send ? POLLOUT : POLLIN,
					  NULL, NULL)) < 0 && ret != -ERESTART)
			break;
		ret = 0;
	}
	if (ret == -ENOTSOCK)
		ret = rsx_stale(s, fd);
	if (ret)
		goto out;
	if (done && !send && s->state != RSX_ST_UPGRADED) {
		ret = done;	/* the data path changed under a recv */
		goto out;
	}
	switch (s->state) {
	case RSX_ST_UPGRADED:
		if (done && !send) {
			ret = done;
			break;
		}
		ret = send ? rsx_up_send(s, fd, iov, iovcnt, len, flags,
					 nonblock, done) :
			     rsx_up_recv(s, fd, iov, iovcnt, len, flags, nonblock);
		if (ret == -ERESTART)
			goto again;	/* now in the socket's new state */
		break;
	case RSX_ST_FORKED:
		ret = rsx_forked_use(s);
		if (!ret)
			goto again;
		break;
	case RSX_ST_CLIENT_HELLO:
		if (send) {
			ret = rsx_hello_send(s, fd, iov, iovcnt, len, flags,
					     nonblock);
			if (ret == -ERESTART)
				goto again;
			break;
		}
		/* fall through */
	default:
		if (rsx_counts(s)) {
			ret = rsx_counted_io(s, fd, iov, iovcnt, len, flags,
					     nonblock, send, &done);
			if (ret == -ERESTART)
				goto again;
			break;
		}
		rsx_sock_unlock(s);
		ret = done ? (ssize_t)done : rsx_tcp_io(fd, iov, iovcnt, 0, len,
							 flags, send);
		if (ret == -ENOTSOCK || ret == -EBADF)
			ret = rsx_stale(s, fd);
		rsx_sock_put(s);
		return ret;
	}
out:
	fd = rsx_sfd(s, fd);
	if (s->state == RSX_ST_UPGRADED && s->conn->peer_down)
		rsx_down_settle(s, fd);
	if (unlikely(s->rdy))
		rsx_sock_ready_sync(s);
	rsx_sock_unlock(s);
	rsx_sock_put(s);
	return ret;
}

ssize_t rsx_sock_recv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return rsx_sock_io(fd, iov, iovcnt, flags, 0);
}

ssize_t rsx_sock_send(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return rsx_sock_io(fd, iov, iovcnt, flags, 1);
}

/*
 * What waiters on an upgraded socket should see (ready.h).  Like TCP:
 * readable with bytes to read, at the end of the stream, and after an
 * error; writable with room in the peer's ring (room comes back a quarter
 * of the ring at a time), and when a write would fail at once.
 */
static void rsx_ready_state(struct rsx_sock *s, struct rsx_ready_state *st)
{
	struct rsx_conn *c = s->conn;
	struct pollfd pfd = { .fd = s->rdy->tcp, .events = POLLOUT };
	uint64_t avail;
	int tcp = 0;

	st->hup = c->err != 0;
	st->rdhup = st->hup || c->peer_fin || s->rd_shut ||
		    (c->tcp_eof && (!c->peer_cutover || c->peer_down));
	if (!rsx_rx_from_tcp(c) ||
	    (!c->rx_ring && c->rx_tcp_limit >= 0 &&
	     c->rx_tcp == (uint64_t)c->rx_tcp_limit)) {
		st->in = rsx_conn_readable(c) >= rsx_lowat(s, s->rdy->tcp);
	} else if (!rsx_libc.ioctl(s->rdy->tcp, FIONREAD, &tcp) && tcp > 0) {
		avail = tcp;
		/* the peer's last TCP bytes are in: its ring's count too */
		if (c->rx_tcp_limit >= 0 && !c->peer_down &&
		    avail >= (uint64_t)c->rx_tcp_limit - c->rx_tcp)
			avail = c->rx_tcp_limit - c->rx_tcp +
				rsx_conn_readable(c);
		st->in = avail >= rsx_lowat(s, s->rdy->tcp);
	} else {
		st->in = 0;
	}
	st->in |= st->rdhup;
	if (c->peer_down)	/* our sends are TCP's again */
		st->out = st->hup || s->wr_shut ||
			  (c->tx_resend == c->tx_head &&
			   rsx_libc.poll(&pfd, 1, 0) == 1);
	else
		st->out = st->hup || s->wr_shut || !c->tx_ring ||
			  rsx_conn_tx_room(c) > 0 || rsx_peer_gone(c);
}

/*
 * Under s->lock: take in what has arrived, arm the CQ for the watcher
 * when a thread sleeps (rsx_ready_arm_now; an arm only reports completions
 * after it: poll once more), and show the result on the stand-in.
 */
int rsx_sock_ready_wanted(const struct rsx_sock *s)
{
	return s->conn && (s->state == RSX_ST_UPGRADED ||
			   s->state == RSX_ST_CLIENT_HELLO);
}

void rsx_sock_ready_sync(struct rsx_sock *s)
{
	static const struct rsx_ready_state waiting = { .out = 1 };
	struct rsx_conn *c = s->conn;
	struct rsx_ready_state st;

	if (likely(!s->rdy) || !rsx_sock_ready_wanted(s))
		return;
	rsx_ready_seen(s);
	if (s->state == RSX_ST_CLIENT_HELLO) {
		/*
		 * The answer may be in: take it, unseen by the program.  An
		 * upgrade syncs x on its own; TCP takes x away.  Until then
		 * nothing is readable (no byte of the server comes before
		 * its answer) and writes go to TCP.
		 */
		rsx_client_answer(s, s->rdy->tcp);
		if (s->rdy && s->state == RSX_ST_CLIENT_HELLO)
			rsx_ready_show(s, &waiting);
		return;
	}
	rsx_progress(s, s->rdy->tcp);
	if (c->qp_ready && !c->armed && !c->err && rsx_ready_arm_now() &&
	    !rsx_conn_arm(c))
		rsx_progress(s, s->rdy->tcp);
	if (c->peer_down) {
		if (rsx_down_settle(s, s->rdy->tcp))
			return;
		/* the watcher hears of TCP room from now on */
		rsx_ready_watch_out(s);
	}
	rsx_ready_state(s, &st);
	rsx_ready_show(s, &st);
}

/* A thread asleep in rsx_sleep() may have lost its completions to us. */
static void rsx_ready_kick(struct rsx_sock *s)
{
	if (s->conn)
		rsx_kick(s->conn);
}

/* The watcher saw the completion channel (chan) or the TCP end fire. */
void rsx_sock_ready_event(struct rsx_sock *s, int chan, uint32_t tcp_ev)
{
	struct rsx_conn *c = s->conn;

	if (!s->rdy || !rsx_sock_ready_wanted(s))
		return;
	rsx_stat_inc(RSX_STAT_ready_events);
	if (chan)
		rsx_conn_event(c);
	if (s->state == RSX_ST_UPGRADED && !c->tcp_eof &&
	    (tcp_ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		rsx_peer_closed(s);
	rsx_sock_ready_sync(s);
	rsx_ready_kick(s);
}

/*
 * The watcher's backstop (ready.c): arm s's CQ if it is not, unless a
 * program thread looked at s lately (recent).  1: left unarmed for that.
 */
int rsx_sock_ready_arm(struct rsx_sock *s, int recent)
{
	struct rsx_conn *c = s->conn;

	if (!s->rdy || s->state != RSX_ST_UPGRADED || !c->qp_ready ||
	    c->armed || c->err)
		return 0;
	if (recent)
		return 1;
	if (rsx_conn_arm(c))
		return 0;
	rsx_stat_inc(RSX_STAT_ready_backstops);
	rsx_sock_ready_sync(s);		/* what came before the arm */
	return 0;
}

/*
 * A thread spinning before its poll, select or epoll sleeps (ready.c)
 * polls s's completion queue; what came in shows on the stand-in at once,
 * without the watcher.  Under s->lock.  Returns 1 when anything came.
 */
int rsx_sock_ready_spin(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	rsx_ready_seen(s);
	if (!s->rdy || s->state != RSX_ST_UPGRADED || !c->qp_ready ||
	    !rsx_conn_poll(c))
		return 0;
	rsx_sock_ready_sync(s);
	rsx_ready_kick(s);
	return 1;
}

/* Just upgraded: epoll registrations move to the stand-in. */
void rsx_ready_upgraded(struct rsx_sock *s)
{
	if (!s->rdy)
		return;
	rsx_ready_swap(s);
	rsx_sock_ready_sync(s);
}

/*
 * Sends our FIN once credits allow, and waits until it has landed: requests
 * complete in order, so every byte sent before it is then in the peer's
 * memory.  A peer that has closed its TCP connection reads no more, so
 * there is nothing to wait for (TCP would answer such data with a reset).
 * Returns 1 when deadline came first (0: no wait at all), 0 when it is
 * done, or nothing is left to do.
 */
static int rsx_finish(struct rsx_sock *s, int fd, int64_t deadline)
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
static int rsx_client_hello_settle(struct rsx_sock *s, int fd,
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

	if (!rsx_handoff_live(s))
		return 0;
	return !(s->state == RSX_ST_UPGRADED && c &&
		 (rsx_peer_gone(c) || (s->wr_shut && c->peer_fin)));
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
		rsx_downgrade(s, fd, 0);	/* a fork child may hold it */
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
		rsx_downgrade(s, fd, 0);	/* a child may outlive us */
	else
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
	int pass;

	rsx_share_exit();
	for (pass = 0; pass < 2; pass++) {
		for (fd = 0; fd < hw; fd++) {
			s = rsx_fd_peek(fd);
			if (!s || s->kind != RSX_SOCK_TCP || !s->conn ||
			    rsx_lock_until(s, deadline))
				continue;
			if (!pass)
				rsx_exit_start(s, fd);
			else
				rsx_end_step(s, fd, deadline);
			rsx_sock_unlock(s);
		}
	}
	rsx_linger_exit(deadline);
}

/*
 * Before our DOWNGRADE: every ring byte the peer wrote is ours to lose, so
 * none may be left when the peer went back to TCP first (it will not send
 * them again).  Our own bytes it had not read go now.
 */
static int rsx_exec_peer_down(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (rsx_conn_readable(c))
		return -EPIPE;
	rsx_finish(s, fd, rsx_linger_end());
	if (!s->conn || s->conn->tx_resend != s->conn->tx_head)
		return -ETIMEDOUT;
	return 0;
}

/*
 * Under s->lock: our last message on the QP (DOWNGRADE, conn.h) hands the
 * data path back to TCP: the peer reads its ring up to our last byte and
 * TCP after it, and sends again over TCP whatever of its ring bytes our
 * application had not read.  When this cannot be done, the connection is
 * shut down: both ends see it end, never a stream with a hole.  exec: the
 * process is about to execute another program (see below).  Returns 0
 * (TCP now) or -errno (shut down).
 */
static int rsx_downgrade(struct rsx_sock *s, int fd, int exec)
{
	int64_t deadline = rsx_linger_end();
	struct rsx_conn *c;
	int ret = 0;

	rsx_call_until(deadline);
	if (s->state == RSX_ST_CLIENT_HELLO && s->conn) {
		ret = rsx_client_hello_settle(s, fd, rsx_linger_end());
		goto out;
	}
	c = s->conn;
	if (s->state != RSX_ST_UPGRADED || !c->qp_ready) {
		ret = s->state == RSX_ST_UPGRADED ? -EIO : 0;
		goto out;
	}
	rsx_conn_poll(c);
	if (c->peer_down) {
		ret = rsx_exec_peer_down(s, fd);
		goto out;
	}
	while ((ret = rsx_conn_downgrade(c)) == -EAGAIN &&
	       rsx_now_ms() < deadline) {
		/* a message credit; or another thread took it to TCP */
		if (rsx_wait_conn(s, fd, 0) == -ERESTART) {
			ret = 0;
			goto out;
		}
	}
	if (!ret)
		ret = rsx_conn_wait_sent(c, c->down_wr, rsx_config.linger_ms);
	/* the peer may have gone back to TCP at the same moment */
	if (!ret && rsx_conn_poll(c) >= 0 && c->peer_down)
		ret = rsx_exec_peer_down(s, fd);
	if (!ret && s->wr_shut)
		rsx_libc.shutdown(fd, SHUT_WR);	/* our FIN, as TCP's */
	if (!ret)
		rsx_stat_inc(exec ? RSX_STAT_exec_downgraded :
			     RSX_STAT_fork_downgraded);
out:
	c = s->conn;
	if (ret && c) {
		rsx_warn("fd %d: could not take the connection back to TCP "
			 "for %s (%s): shut down", fd,
			 exec ? "exec" : "a fork child", strerror(-ret));
		rsx_libc.shutdown(fd, SHUT_RDWR);
		rsx_stat_inc(exec ? RSX_STAT_exec_lost : RSX_STAT_fork_lost);
	}
	rsx_handoff_done(s, !ret);
	/* a thread asleep on it frees it, and goes on over TCP (rsx_sleep) */
	if (c)
		rsx_to_tcp(s, RSX_STAT_COUNT);
	return ret;
}

/*
 * The process is about to execve() another program, which inherits fd: it
 * cannot use our RDMA resources, but it can use TCP (rsx_downgrade).
 * Should the exec fail, this process goes on with plain TCP just the same.
 */
int rsx_sock_exec_downgrade(struct rsx_sock *s, int fd)
{
	int ret, tries;

	for (tries = 0; rsx_sock_trylock(s); tries++) {
		if (tries == 100) {
			/* held by a thread the exec is about to end */
			rsx_warn("fd %d: busy at exec: shut down", fd);
			rsx_libc.shutdown(fd, SHUT_RDWR);
			rsx_stat_inc(RSX_STAT_exec_lost);
			return -EBUSY;
		}
		usleep(1000);
	}
	ret = rsx_downgrade(s, fd, 1);
	rsx_sock_unlock(s);
	return ret;
}

/*
 * fork() (handoff.h).  Right before it: the upgraded sockets, which the
 * child will hold too, get a slot where it can ask for them.
 */
void rsx_fork_share_sockets(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;
	int bell = -1;

	/* an upgraded socket is in the engine's hands: none, nothing to do */
	if (!atomic_load_explicit(&rsx_engine_socks, memory_order_relaxed))
		return;
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP || !rsx_sock_tryget(s))
			continue;
		if (!s->conn) {
			rsx_sock_lock(s);
			if (rsx_share_may(s) && rsx_share_fork(s))
				rsx_dbg("fd %d: no share slot: it stays TCP "
					"in parent and child", fd);
			rsx_sock_unlock(s);
			rsx_sock_put(s);
			continue;
		}
		if (bell < 0)
			bell = rsx_cm_bell_fd();
		rsx_sock_lock(s);
		if (bell >= 0 && s->state == RSX_ST_UPGRADED && s->conn &&
		    rsx_handoff_share(s, fd, bell))
			rsx_info("fd %d: no hand-off slot: a fork child that "
				 "uses it gets EIO", fd);
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
}

/*
 * Under s->lock, for the CM thread: s goes back to TCP for a fork child
 * that asked.  One that is still cutting over, or whose peer downgraded
 * first and whose ring is not read yet, waits for the next round.
 */
static void rsx_fork_serve_one(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (!rsx_handoff_live(s) || fd < 0)
		return;
	if (s->state == RSX_ST_UPGRADED && c->peer_down) {
		rsx_progress(s, fd);	/* settles once read */
		rsx_down_settle(s, fd);
		return;
	}
	if (s->state != RSX_ST_UPGRADED || c->qp_ready)
		rsx_downgrade(s, fd, 0);
}

/*
 * The CM thread: the sockets that a fork child asked for.  Returns 1 when
 * one was busy (its lock held): soon again.
 */
int rsx_fork_serve(void)
{
	int slot = 0, fd = -1, busy = 0;
	struct rsx_sock *s;

	while ((s = rsx_handoff_next(&slot, &fd))) {
		if (rsx_sock_trylock(s)) {
			busy = 1;
		} else {
			rsx_fork_serve_one(s, fd);
			rsx_sock_unlock(s);
		}
		rsx_sock_put(s);
	}
	return busy;
}

/*
 * A fork child uses s, which its parent holds on a QP: the parent takes it
 * back to TCP first.  Under s->lock.  0: plain TCP now; -EIO: not usable.
 */
static int rsx_forked_use(struct rsx_sock *s)
{
	int ret = rsx_handoff_ask(s, rsx_config.linger_ms + 1000);

	if (ret)
		return ret;
	rsx_sock_set_state(s, RSX_ST_TCP);
	rsx_stat_inc(RSX_STAT_fork_handoffs);
	return 0;
}

/* poll, select, epoll_ctl and shutdown of a fork child. */
void rsx_sock_forked_use(struct rsx_sock *s)
{
	if (s->state == RSX_ST_FORKED)
		rsx_forked_use(s);
}

/*
 * In a fork child the parent's RDMA resources cannot be used.  An upgraded
 * (or half-negotiated) connection stays the parent's; the child gets EIO on
 * it rather than a stream with holes.  Locks held by other parent threads
 * at fork time are re-initialised.
 */
void rsx_fork_child_sockets(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	rsx_probe_fork_child();
	rsx_share_fork_child();
	rsx_handoff_fork_child();	/* after: the parent's bell stays */
	rsx_linger_fork_child();
	rsx_ready_fork_child();
	rsx_conn_fork_child();
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP)
			continue;
		pthread_mutex_init(&s->lock, NULL);
		s->spinners = 0;	/* threads of the parent's */
		s->pollers = 0;
		s->wake_users = 0;
		s->probe_id = NULL;	/* the parent's responder */
		/*
		 * Two processes have it: counting in one proves nothing,
		 * unless the other lets go of it first (share.h).
		 */
		s->shared = 1;
		free(s->oob);		/* a request of the parent's CM id */
		s->oob = NULL;
		if (rsx_state_counted(s->state) && !rsx_share_keeps(s)) {
			s->conn = NULL;	/* the parent's, left alone */
			rsx_sock_set_state(s, RSX_ST_TCP);
		}
		/* the parent's stand-in (the watcher table is reset) */
		rsx_ready_off(s, 0);
		if (!s->conn)
			continue;
		s->conn = NULL;	/* the child's copy is left alone */
		rsx_sock_set_state(s, RSX_ST_FORKED);
		rsx_stat_inc(RSX_STAT_fallback_fork);
	}
}

/*
 * The parent of a fork: its sockets are the child's too, so bytes counted
 * here no longer tell where a stream stands; those that waited for an
 * out-of-band upgrade stay TCP, but for accepted ones with a share slot,
 * which count on until one process alone holds them (share.h).  The CM
 * thread is held (fork prepare).
 */
void rsx_fork_parent_sockets(int failed)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP || !rsx_sock_tryget(s))
			continue;
		rsx_sock_lock(s);
		if (failed && s->share_slot >= 0) {
			rsx_share_unfork(s);
			rsx_sock_unlock(s);
			rsx_sock_put(s);
			continue;
		}
		s->shared = 1;
		if (rsx_state_counted(s->state) && !rsx_share_keeps(s))
			rsx_to_tcp(s, RSX_STAT_fallback_fork);
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
}

/*
 * connect() succeeded (or is under way): a client whose rules say rdma
 * sends its HELLO at once when connected, so that it is in the server's
 * socket before the server's application can speak first; otherwise before
 * its first byte.
 */
void rsx_sock_connected(struct rsx_sock *s, int fd, int action,
			int connected)
{
	rsx_sock_lock(s);
	if (s->state == RSX_ST_TCP && action == RSX_ACT_RDMA)
		rsx_sock_set_state(s, RSX_ST_CLIENT_NEW);
	if (s->state == RSX_ST_TCP && action == RSX_ACT_OOB) {
		/* counted from here on; the CM thread asks once it can */
		rsx_sock_set_state(s, RSX_ST_CLIENT_WAIT);
		rsx_oob_rescan();
	}
	/* also when a non-blocking connect() turns out done (SO_ERROR) */
	if (s->state == RSX_ST_CLIENT_NEW && connected)
		rsx_client_start(s, fd, 1);
	rsx_sock_unlock(s);
}

void rsx_sock_accepted(struct rsx_sock *s)
{
	rsx_sock_set_state(s, RSX_ST_SERVER_NEW);
}

/* FIONREAD and SIOCOUTQ see the ring; 1 means "ask the kernel". */
int rsx_sock_ioctl(int fd, unsigned long req, void *arg)
{
	struct rsx_sock *s;
	struct rsx_conn *c;
	int ret = 1;

	if (req != FIONREAD && req != SIOCOUTQ)
		return 1;
	s = rsx_fd_get(fd);
	if (!s)
		return 1;
	rsx_sock_lock(s);
	c = s->conn;
	if (s->state == RSX_ST_UPGRADED) {
		rsx_progress(s, fd);
		if (req == FIONREAD && !rsx_rx_from_tcp(c)) {
			*(int *)arg = rsx_conn_readable(c);
			ret = 0;
		} else if (req == SIOCOUTQ && c->tx_ring) {
			*(int *)arg = c->tx_head - c->tx_acked;
			ret = 0;
		}
	}
	rsx_sock_unlock(s);
	rsx_sock_put(s);
	return ret;
}

/*
 * sendfile() to an upgraded socket: the file's bytes have to pass through
 * the ring, so they are read and sent, one chunk per call (sendfile() may
 * always return less than asked).  Unsent bytes are given back to the file
 * position.
 */
ssize_t rsx_sock_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	static const size_t chunk = 64 * 1024;
	struct iovec iov;
	ssize_t n, sent;
	char *buf;

	if (count > chunk)
		count = chunk;
	buf = malloc(count ? count : 1);
	if (!buf)
		return -ENOMEM;
	n = offset ? pread(in_fd, buf, count, *offset) :
		     rsx_libc.read(in_fd, buf, count);
	if (n <= 0) {
		sent = n < 0 ? -errno : 0;
		goto out;
	}
	iov.iov_base = buf;
	iov.iov_len = n;
	sent = rsx_sock_send(out_fd, &iov, 1, 0);
	if (offset && sent > 0)
		*offset += sent;
	if (!offset && sent < n)
		lseek(in_fd, -(n - (sent > 0 ? sent : 0)), SEEK_CUR);
out:
	free(buf);
	return sent;
}
