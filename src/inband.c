// SPDX-License-Identifier: MIT
/*
 * The in-band negotiation (DESIGN.md 2.2; upgrade.c says how it fits): a
 * client's HELLO as the first bytes of its stream and the server's answer
 * (ACK or NAK) as the first of its own, the server's detection of a HELLO
 * and the client's of the answer.
 */
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "linger.h"
#include "libc.h"
#include "log.h"
#include "rdma.h"
#include "ready.h"
#include "shm.h"
#include "upgrade-int.h"

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
		ret = rsx_rdma_create(dev, rsx_config.ring_size,
				      atomic_load(&s->nonblock), &s->conn);
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
int rsx_peek_msg(struct rsx_sock *s, int fd, struct rsx_hello *h)
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

void rsx_consume_msg(int fd)
{
	uint8_t buf[RSX_WIRE_LEN];

	/* peeked complete before: this cannot block or come up short */
	rsx_libc.recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
}

/* CLIENT_HELLO: is the first thing from the server our answer? */
int rsx_client_answer(struct rsx_sock *s, int fd)
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
	rsx_info("fd %d: upgraded (client), QP %u", fd, rsx_conn_id(c));
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
		    int shm, enum rsx_stat *stat)
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
	if (shm) {
		/* same host (local.h): shared memory instead of a QP */
		ret = rsx_shm_create(rsx_config.ring_size, &s->conn);
	} else if (rsx_dev_find((struct sockaddr *)&ss, &dev)) {
		*stat = RSX_STAT_fallback_nodev;
		return RSX_NAK_NODEV;
	} else {
		ret = rsx_rdma_create(dev, rsx_config.ring_size,
				      atomic_load(&s->nonblock), &s->conn);
	}
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

	reason = rsx_server_conn(s, fd, hello, 0, &stat);
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
	rsx_info("fd %d: upgraded (server), QP %u", fd, rsx_conn_id(s->conn));
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
 * CLIENT_HELLO: the answer is out, and the application's bytes go on TCP,
 * counted.  Never as one blocking kernel call: that would hold s->lock,
 * and with it a thread of the program that waits to read, until the peer
 * read (a peer that writes before it reads would never), and the whole
 * call would go on TCP even when the answer came early in it.  TCP takes
 * what fits; then the call sleeps until TCP has room or the answer is in,
 * and after an ACK the rest goes to the ring.
 */
ssize_t rsx_hello_send(struct rsx_sock *s, int fd,
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
int rsx_negotiate(struct rsx_sock *s, int fd, int reading,
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
