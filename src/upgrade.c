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
 *
 * This file holds the socket's state machine and its data path; the parts
 * around it have files of their own (upgrade-int.h): waiting (wait.c), the
 * in-band HELLO and its answer (inband.c), the out-of-band switch
 * (midstream.c), shutdown, close and exit (close.c), fork and exec
 * (forkexec.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "crc.h"
#include "fdtab.h"
#include "guard.h"
#include "handoff.h"
#include "libc.h"
#include "log.h"
#include "oob.h"
#include "ready.h"
#include "share.h"
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
 * The sum (crc.h) of n bytes of iov from skip on: the proof an
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
		h = rsx_crc32c_update((uint32_t)h, p, k);
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

/*
 * s leaves its connection, if any (under s->lock); its state is the
 * caller's to set.  Until it is, the shim's lock-free look at s->mode
 * still sends the program's calls to us, where they wait for the lock.
 */
static void rsx_leave_conn(struct rsx_sock *s, enum rsx_stat reason)
{
	struct rsx_conn *c = s->conn;

	rsx_handoff_done(s, 0);	/* unless a downgrade said TCP before */
	if (unlikely(s->share_slot >= 0))
		rsx_share_taint(s);	/* its bytes are not counted now */
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
}

void rsx_to_tcp(struct rsx_sock *s, enum rsx_stat reason)
{
	rsx_leave_conn(s, reason);
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

/*
 * After the peer's DOWNGRADE (conn.h): our ring bytes that its application
 * had not read go again over TCP, from the staging mirror, before anything
 * new; then a shutdown(SHUT_WR) the ring carried as FIN becomes TCP's own.
 * Returns 0 once nothing is left, -EAGAIN while TCP takes no more, or the
 * -errno of the TCP send.
 */
int rsx_resend(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;
	uint32_t size = c->peer.ring_size, off;
	struct iovec v;
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
		/* TCP's bytes, counted as any: a new upgrade may follow */
		v.iov_base = c->stage + off;
		v.iov_len = n;
		c->tx_resend += n;
		c->tx_tcp += n;
		c->tx_sum = rsx_sum_iov(c->tx_sum, &v, 1, 0, n);
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
void rsx_progress(struct rsx_sock *s, int fd)
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
 * The peer took the connection back to TCP: its process let go of it for
 * a fork child, which may come back out of band, alone with it and every
 * byte counted (handoff.h, share.h); or it executes another program; or
 * it never cut over (rsx_cut_abandoned).  So this end counts on, from the
 * connection's counts (TCP's bytes each way since connect() or accept(),
 * those sent again after the DOWNGRADE included, rsx_resend; after an
 * in-band upgrade the HELLO and ACK are not among them, which both ends
 * took off the stream): a client asks again out of band at once, and a
 * server waits for a request for RSOCKX_OOB_WINDOW_MS.  Anything else, or
 * no answer, leaves it on TCP as before.  A connection broken by the ping
 * of a peer that never cut over lost nothing.
 */
int rsx_may_count_on(struct rsx_sock *s, const struct rsx_conn *c)
{
	int role = atomic_load(&s->role);

	if (!rsx_config.oob || s->shared || s->rd_shut ||
	    s->wr_shut || c->peer_fin || c->tcp_eof ||
	    (c->err && !c->cut_ping) || atomic_load(&s->evented))
		return 0;
	if (role == RSX_ROLE_CONNECTOR)
		return s->peer_port != 0;
	return role == RSX_ROLE_ACCEPTED && s->oob_ok;
}

/* Where c's stream stands on TCP (struct rsx_ho_counts). */
static void rsx_conn_counts(const struct rsx_conn *c, struct rsx_ho_counts *n)
{
	n->tx = c->tx_tcp;
	n->rx = c->rx_tcp;
	n->tx_sum = c->tx_sum;
	n->rx_sum = c->rx_sum;
}

/*
 * Under s->lock: s leaves its connection, if any, for TCP, and counts on
 * from n (NULL: from its own counts, a client whose request was out):
 * an accepted socket waits for a request for RSOCKX_OOB_WINDOW_MS, a
 * client asks again, at once or once it alone holds s (share.h).  A share
 * slot stays as it is (rsx_to_tcp would taint it: nobody's counts held).
 * why: a fallback counter, or RSX_STAT_COUNT.
 */
void rsx_count_on(struct rsx_sock *s, const struct rsx_ho_counts *n,
		  enum rsx_stat why)
{
	int slot = s->share_slot;
	struct rsx_ho_counts own = {
		.tx = s->tcp_tx, .rx = s->tcp_rx,
		.tx_sum = s->tx_sum, .rx_sum = s->rx_sum,
	};

	if (!n)
		n = &own;
	/*
	 * Never through RSX_ST_TCP on the way: the shim sends a call of a
	 * socket in that state straight to libc, without the lock, and a
	 * read of another thread that came then took bytes off TCP that
	 * nobody counted.  The peer's CUTOVER then named bytes already
	 * gone, and the reader waited for them for good (localready.test
	 * forkgap: a client woken by its stand-in's retirement, now and
	 * then on a loaded host).
	 */
	s->share_slot = -1;
	rsx_leave_conn(s, why);
	s->share_slot = slot;
	s->tcp_tx = n->tx;
	s->tcp_rx = n->rx;
	s->tx_sum = n->tx_sum;
	s->rx_sum = n->rx_sum;
	s->oob_until = rsx_now_ms() + rsx_config.oob_window_ms;
	if (atomic_load(&s->role) == RSX_ROLE_ACCEPTED) {
		rsx_sock_set_state(s, RSX_ST_SERVER_WAIT);
		return;
	}
	rsx_sock_set_state(s, RSX_ST_CLIENT_WAIT);
	rsx_oob_rescan();
}

/*
 * c broke while this end still waited for the peer's CUTOVER, broken by
 * a ping (the server's deadline, rsx_sock_cut_step, a second request of
 * the client's, rsx_oob_superseded, or the peer's TCP end,
 * rsx_peer_closed): the peer's QP is not there, it never cut over, and
 * TCP carried the whole stream both ways.  Such a client let its answer go
 * (it forked while its request was out, share.h) and may ask again: s
 * counts on where it can (rsx_may_count_on), and is plain TCP otherwise.
 * Returns 1 when s left c.
 */
int rsx_cut_abandoned(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;
	struct rsx_ho_counts n;

	if (!c || !c->err || !c->cut_ping || c->peer_cutover || c->tx_ring ||
	    c->peer_down)
		return 0;
	if (c->oob && rsx_may_count_on(s, c)) {
		rsx_info("QP %u: the peer never cut over and its QP is gone: "
			 "TCP, counted on", rsx_conn_id(c));
		rsx_conn_counts(c, &n);
		rsx_count_on(s, &n, RSX_STAT_COUNT);
	} else {
		rsx_info("QP %u: the peer never cut over and its QP is gone: "
			 "plain TCP", rsx_conn_id(c));
		rsx_to_tcp(s, RSX_STAT_fallback_no_cutover);
	}
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
			 "waiting on", rsx_conn_id(c));
		return 1;
	}
	if (!c->cut_ping && !rsx_conn_ping(c)) {
		c->cut_ping = 1;
		c->ping_wr = c->sq_posted;
		rsx_dbg("QP %u: no CUTOVER after %d ms: is the client's QP "
			"there?", rsx_conn_id(c), rsx_config.cut_wait_ms);
	}
	c->cut_by = now + 100;
	return 1;
}

/*
 * The peer went back to TCP and nothing of the ring is left: our bytes it
 * had not read went again, and the application has read all the peer wrote
 * into our ring (after any TCP bytes before its cut-over).  The socket
 * becomes plain TCP, unless a thread still sleeps on the connection, or
 * counts on (rsx_may_count_on).  Returns 1 when it did.
 */
int rsx_down_settle(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;
	struct rsx_ho_counts n;

	if (s->state != RSX_ST_UPGRADED || !c->peer_down || c->polling ||
	    c->waiters || c->tx_resend != c->tx_head ||
	    (s->wr_shut && !c->down_shut) || rsx_conn_readable(c) ||
	    !(c->rx_ring || c->rx_tcp_limit < 0 || !c->rx_head))
		return 0;
	if (s->rd_shut)
		rsx_libc.shutdown(fd, SHUT_RD);
	rsx_dbg("fd %d: back to plain TCP after the peer's DOWNGRADE", fd);
	rsx_handoff_done(s, 1);
	if (!rsx_may_count_on(s, c)) {
		rsx_to_tcp(s, RSX_STAT_peer_downgrades);
		return 1;
	}
	rsx_conn_counts(c, &n);
	rsx_count_on(s, &n, RSX_STAT_peer_downgrades);
	rsx_dbg("fd %d: counting on after %llu bytes out, %llu in", fd,
		(unsigned long long)s->tcp_tx, (unsigned long long)s->tcp_rx);
	if (s->state == RSX_ST_CLIENT_WAIT)
		rsx_stat_inc(RSX_STAT_oob_again);
	return 1;
}

/*
 * The peer closed its end of the TCP connection.  After its cut-over that
 * means its process closed the socket, or died: with a FIN message before,
 * an orderly end; without, the connection is broken.  Before its cut-over
 * its data came over TCP and the TCP end is the stream's end.
 *
 * Before its cut-over, the ping asks whether its QP is still there.  One
 * that is not, with no CUTOVER of it and none of ours, is a peer that let
 * the upgrade go (a client whose request timed out went on over TCP and
 * destroyed its QP): TCP carries on, as after the deadline's ping
 * (rsx_cut_abandoned), instead of a reset.  The stress test under load
 * (tests/rdma/cutover.sh) reset 16 of 1,200 such connections.
 */
void rsx_peer_closed(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	c->tcp_eof = 1;
	rsx_conn_poll(c);
	if (!c->peer_fin && c->peer_cutover && !c->peer_down)
		rsx_conn_fail(c, -ECONNRESET, "peer closed without FIN");
	else if (!c->peer_cutover && !c->peer_down && c->qp_ready &&
		 !rsx_conn_ping(c) && !c->tx_ring && !c->cut_ping) {
		c->cut_ping = 1;
		c->ping_wr = c->sq_posted;
	}
}

/* The peer is gone: nobody will read what we send. */
int rsx_peer_gone(const struct rsx_conn *c)
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
int rsx_wait_conn(struct rsx_sock *s, int fd, int want_tcp)
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
					c->rx_sum = rsx_sum_iov(c->rx_sum, iov,
								iovcnt, got, n);
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
ssize_t rsx_tcp_send_now(struct rsx_sock *s, int fd,
			 const struct iovec *iov, int iovcnt,
			 size_t sent, size_t len, int flags)
{
	ssize_t n = rsx_tcp_io(fd, iov, iovcnt, sent, len - sent,
			       flags | MSG_DONTWAIT, 1);

	if (n > 0 && s->conn) {
		s->conn->tx_tcp += n;
		s->conn->tx_sum = rsx_sum_iov(s->conn->tx_sum, iov, iovcnt,
					      sent, n);
		rsx_stat_add(RSX_STAT_tcp_tx_bytes, n);
	}
	return n;
}

/* sent: bytes of this call that already went out (rsx_hello_send) */
ssize_t rsx_up_send(struct rsx_sock *s, int fd, const struct iovec *iov,
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
		ret = rsx_forked_use(s, 1);
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
	if (unlikely(s->rdy)) {
		if (ret == -EAGAIN && !send)
			rsx_ready_recheck(s);
		rsx_sock_ready_sync(s);
	}
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

/*
 * Is s's connection to be armed now?  When it is not and a thread sleeps
 * (rsx_ready_arm_now).  One armed on the stand-in has been taken back
 * (rsx_conn_disarm_x) and is armed anew where the program's wish now says
 * (rsx_ready_direct).
 */
static int rsx_sock_arm_wanted(struct rsx_sock *s)
{
	return !s->conn->armed && rsx_ready_arm_now();
}

void rsx_sock_ready_sync(struct rsx_sock *s)
{
	static const struct rsx_ready_state waiting = { .out = 1 };
	struct rsx_conn *c = s->conn;
	struct rsx_ready_state st;
	int pass, x;

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
	for (pass = 0;; pass++) {
		rsx_progress(s, s->rdy->tcp);
		/* an arm on x back first, then anew (rsx_conn_disarm_x) */
		x = rsx_conn_disarm_x(c);
		if (c->qp_ready && !c->err && (x || rsx_sock_arm_wanted(s)) &&
		    !rsx_conn_arm_to(c, rsx_ready_direct(s)))
			x = 1;
		if (x)
			rsx_progress(s, s->rdy->tcp);
		if (c->peer_down) {
			if (rsx_down_settle(s, s->rdy->tcp))
				return;
			/* the watcher hears of TCP room from now on */
			rsx_ready_watch_out(s);
		}
		rsx_ready_woken(s);
		rsx_ready_state(s, &st);
		rsx_ready_show_sync(s, &st);
		/*
		 * x has just gone unwritable while the peer wakes it itself:
		 * the credits that make it writable again must reach the
		 * watcher, so the connection is armed anew (the next pass
		 * does that), and looked at once more for what came before.
		 * Once: a broken connection is never armed again (a loop
		 * until it was spun redis-server's watcher at 100 % CPU once
		 * its client had gone), and nothing comes to it.
		 */
		if (likely(!c->armed_x) || pass || !c->armed || c->err ||
		    !c->qp_ready || !s->rdy || rsx_ready_direct(s))
			return;
	}
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
	    (tcp_ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		rsx_peer_closed(s);
		if (rsx_conn_gone_look(c))
			rsx_ready_backstop_soon();	/* pings again */
	}
	rsx_sock_ready_sync(s);
	rsx_ready_kick(s);
}

/*
 * The watcher's backstop (ready.c): arm s's CQ if it is not, unless a
 * program thread looked at s lately (recent).  1: left unarmed for that,
 * or a peer that may have died is pinged again next round (conn.h).
 */
int rsx_sock_ready_arm(struct rsx_sock *s, int recent)
{
	struct rsx_conn *c = s->conn;

	if (!s->rdy || s->state != RSX_ST_UPGRADED)
		return 0;
	if (unlikely(rsx_conn_gone_look(c))) {
		rsx_conn_ping(c);
		rsx_sock_ready_sync(s);
		if (rsx_conn_gone_look(c))
			return 1;
	}
	if (!c->qp_ready || c->armed || c->err)
		return 0;
	if (recent)
		return 1;
	if (rsx_conn_arm_to(c, rsx_ready_direct(s)))
		return 0;
	rsx_stat_inc(RSX_STAT_ready_backstops);
	rsx_sock_ready_sync(s);		/* what came before the arm */
	return 0;
}

/*
 * A thread spinning before its poll, select or epoll sleeps (ready.c)
 * polls s's completion queue; what came in shows on the stand-in at once,
 * without the watcher, or is told to that epoll wait (again, when the
 * program has not read what was told before).  Under s->lock.  Returns 1
 * when anything came.
 */
int rsx_sock_ready_spin(struct rsx_sock *s)
{
	struct rsx_conn *c = s->conn;

	rsx_ready_seen(s);
	if (!s->rdy || s->state != RSX_ST_UPGRADED || !c->qp_ready ||
	    (!rsx_conn_poll(c) && !s->rdy->told))
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

/* Is fd a pipe?  splice() needs one at one end. */
static int rsx_is_pipe(int fd)
{
	struct stat st;

	return !rsx_libc.fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

/* Waits for events on a pipe (no end).  0, or -errno. */
static int rsx_pipe_wait(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	return rsx_libc.poll(&pfd, 1, -1) < 0 ? -errno : 0;
}

/* Socket to pipe: no more than the pipe has room for now. */
static ssize_t rsx_splice_from(int in, int out, size_t len, int nonblock)
{
	ssize_t got, n, done = 0;
	struct iovec iov;
	int size, used, ret;
	char *buf;

	for (;;) {
		size = rsx_libc.fcntl(out, F_GETPIPE_SZ);
		if (size < 0 || rsx_libc.ioctl(out, FIONREAD, &used) < 0)
			return -errno;
		if (size > used)
			break;
		if (nonblock)
			return -EAGAIN;
		ret = rsx_pipe_wait(out, POLLOUT);
		if (ret)
			return ret;
	}
	if (len > (size_t)(size - used))
		len = size - used;
	if (len > 65536)
		len = 65536;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	iov.iov_base = buf;
	iov.iov_len = len;
	got = rsx_sock_recv(in, &iov, 1, nonblock ? MSG_DONTWAIT : 0);
	/* room was there: the write takes it all, unless another writer */
	while (got > 0 && done < got) {
		n = rsx_libc.write(out, buf + done, got - done);
		if (n > 0)
			done += n;
		else if (n < 0 && errno == EAGAIN)
			rsx_pipe_wait(out, POLLOUT);
		else
			break;	/* the reader closed: bytes lost, as TCP's */
	}
	free(buf);
	return got;
}

/*
 * Pipe to socket: the socket takes what it takes of a copy of the pipe's
 * bytes (tee), and only that much leaves the pipe.
 */
static ssize_t rsx_splice_to(int in, int out, size_t len, int nonblock)
{
	int avail, tp[2], ret;
	ssize_t k, sent;
	struct iovec iov;
	char *buf;

	for (;;) {
		if (rsx_libc.ioctl(in, FIONREAD, &avail) < 0)
			return -errno;
		if (avail > 0)
			break;
		if (nonblock || (rsx_libc.fcntl(in, F_GETFL) & O_NONBLOCK))
			return -EAGAIN;
		ret = rsx_pipe_wait(in, POLLIN);
		if (ret)
			return ret;
		if (rsx_libc.ioctl(in, FIONREAD, &avail) < 0 || !avail)
			return 0;	/* no writer left */
	}
	if (len > (size_t)avail)
		len = avail;
	if (len > 65536)
		len = 65536;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	if (pipe2(tp, O_CLOEXEC | O_NONBLOCK)) {
		free(buf);
		return -errno;
	}
	k = tee(in, tp[1], len, SPLICE_F_NONBLOCK);
	if (k > 0)
		k = rsx_libc.read(tp[0], buf, k);
	rsx_libc.close(tp[0]);
	rsx_libc.close(tp[1]);
	if (k <= 0) {
		free(buf);
		return k < 0 ? -errno : 0;
	}
	iov.iov_base = buf;
	iov.iov_len = k;
	sent = rsx_sock_send(out, &iov, 1, nonblock ? MSG_DONTWAIT : 0);
	if (sent > 0 && rsx_libc.read(in, buf, sent) != sent)
		rsx_warn("splice: the pipe changed under us");
	free(buf);
	return sent;
}

/*
 * splice() with a socket of the engine's at one end: ring bytes cannot
 * pass through the kernel's pipe buffers, so they are copied through a
 * buffer, one piece per call (splice() may always move less than asked).
 * The other end must be a pipe, as for splice() itself.
 */
ssize_t rsx_sock_splice(int in, loff_t *off_in, int out, loff_t *off_out,
			size_t len, unsigned int flags)
{
	int nonblock = !!(flags & SPLICE_F_NONBLOCK);

	if (rsx_fd_peek(in)) {
		if (off_in || !rsx_is_pipe(out))
			return off_in ? -ESPIPE : -EINVAL;
		return rsx_splice_from(in, out, len, nonblock);
	}
	if (off_out || !rsx_is_pipe(in))
		return off_out ? -ESPIPE : -EINVAL;
	return rsx_splice_to(in, out, len, nonblock);
}
