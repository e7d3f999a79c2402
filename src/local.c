// SPDX-License-Identifier: MIT
/*
 * Same-host connections (local.h): the listeners' Unix sockets, the
 * requests and answers on them.  The CM thread (probe.c) runs all of it
 * but the answers, which the socket's side sends (midstream.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "libc.h"
#include "local.h"
#include "log.h"
#include "probe.h"
#include "stats.h"
#include "upgrade.h"

#define RSX_LOCAL_LISTENERS	64
#define RSX_LOCAL_SLOTS		64

enum { RSX_LK_LISTENER = 1, RSX_LK_REQUEST, RSX_LK_ANSWER };

/*
 * A listener's Unix socket; s NULL: its TCP listener closed, kept until,
 * and on while the port at ss listens (a pre-forked worker's copy).
 */
struct rsx_local_l {
	int fd;
	struct rsx_sock *s;
	int64_t until;
	uint8_t addr[16];
	uint16_t port;
	struct sockaddr_storage ss;
};

/* A Unix connection under way: a request to read, or an answer to wait for. */
struct rsx_local_r {
	int ufd;		/* -1: free */
	int kind;
	int64_t expires;
	struct rsx_sock *s;	/* an answer's: the client socket that asked */
	uint32_t gen;
	int fd;
	uint64_t nonce;
};

static pthread_mutex_t rsx_local_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_local_l rsx_local_ls[RSX_LOCAL_LISTENERS];
static struct rsx_local_r rsx_local_rs[RSX_LOCAL_SLOTS];
static int rsx_local_ep = -1;

static void rsx_local_close(int *fd)
{
	if (*fd >= 0)
		rsx_fd_private_close(*fd);
	*fd = -1;
}

/*
 * Another address of this host (of this network namespace): the route to
 * it is a local one, whose source is the address itself.  A UDP connect()
 * asks the routing tables without sending anything.  A bind() test would
 * be fooled by ip_nonlocal_bind; this is not.  No cache: addresses come
 * and go, and the connect() this runs for costs far more.
 */
static int rsx_local_route(const struct sockaddr *sa, socklen_t salen)
{
	struct sockaddr_storage dst, src;
	socklen_t len = sizeof(src);
	uint8_t a[16], b[16];
	uint16_t port;
	int fd, ret = 0;

	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, sa, salen);
	/* a UDP connect() to port 0 is refused */
	if (dst.ss_family == AF_INET)
		((struct sockaddr_in *)&dst)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&dst)->sin6_port = htons(9);
	fd = rsx_libc.socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (!rsx_libc.connect(fd, (struct sockaddr *)&dst, salen) &&
	    !rsx_libc.getsockname(fd, (struct sockaddr *)&src, &len) &&
	    !rsx_oob_addr(&dst, a, &port) && !rsx_oob_addr(&src, b, &port))
		ret = !memcmp(a, b, 16);
	rsx_libc.close(fd);
	return ret;
}

/*
 * A destination on this host: loopback, or one of its own addresses.
 * sa and len are the program's, before the kernel has looked at them.
 */
int rsx_local_dst(const struct sockaddr *sa, socklen_t len)
{
	static const uint8_t one[16] = { [15] = 1 };
	static const uint8_t any[16];
	socklen_t need;
	uint8_t a[16];
	uint16_t port;

	if (len < sizeof(sa->sa_family))
		return 0;
	need = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
	       sizeof(struct sockaddr_in6);
	if (len < need || rsx_oob_addr(sa, a, &port))
		return 0;
	/* ::1, 127.0.0.0/8 (as ::ffff:127.0.0.0/104) */
	if (!memcmp(a, one, 16) ||
	    (a[10] == 0xff && a[11] == 0xff && !memcmp(a, one, 10) &&
	     a[12] == 127))
		return 1;
	/* 0.0.0.0 and :: connect to this host too, and have no route */
	if (!memcmp(a, any, 16) ||
	    (a[10] == 0xff && a[11] == 0xff && !memcmp(a, any, 10) &&
	     !memcmp(a + 12, any, 4)))
		return 1;
	return rsx_local_route(sa, need);
}

/* The rendezvous of addr and port (network byte order). */
static socklen_t rsx_local_name(struct sockaddr_un *un, const uint8_t addr[16],
				uint16_t port)
{
	char *p = un->sun_path + 1;
	int i, n;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(p, sizeof(un->sun_path) - 1, "rsockx-tcp:%u:",
		     ntohs(port));
	for (i = 0; i < 16; i++)
		n += snprintf(p + n, 3, "%02x", addr[i]);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

int rsx_local_start(void)
{
	int i;

	if (rsx_local_ep >= 0)
		return 0;
	for (i = 0; i < RSX_LOCAL_LISTENERS; i++)
		rsx_local_ls[i].fd = -1;
	for (i = 0; i < RSX_LOCAL_SLOTS; i++)
		rsx_local_rs[i].ufd = -1;
	rsx_local_ep = rsx_fd_hide(rsx_libc.epoll_create1(EPOLL_CLOEXEC));
	return rsx_local_ep < 0 ? -EMFILE : 0;
}

int rsx_local_epfd(void)
{
	return rsx_local_ep;
}

static int rsx_local_watch(int fd, int kind, int i)
{
	struct epoll_event ev = {
		.events = EPOLLIN,
		.data.u64 = (uint64_t)kind << 32 | (uint32_t)i,
	};

	return rsx_libc.epoll_ctl(rsx_local_ep, EPOLL_CTL_ADD, fd, &ev);
}

/* A tracked socket listens: its Unix socket too, or the one it left. */
void rsx_local_listen(struct rsx_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss), nlen;
	struct sockaddr_un un;
	struct rsx_local_l *l = NULL;
	uint8_t addr[16];
	uint16_t port;
	int i, ufd;

	if (!rsx_config.local || s->local_listen ||
	    rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    rsx_oob_addr(&ss, addr, &port) || !rsx_cm_running())
		return;
	pthread_mutex_lock(&rsx_local_lock);
	for (i = 0; i < RSX_LOCAL_LISTENERS; i++) {
		l = &rsx_local_ls[i];
		if (l->fd >= 0 && !l->s && l->port == port &&
		    !memcmp(l->addr, addr, 16))
			goto take;	/* a listener of ours closed lately */
	}
	for (i = 0; i < RSX_LOCAL_LISTENERS && rsx_local_ls[i].fd >= 0; i++)
		;
	if (i == RSX_LOCAL_LISTENERS)
		goto out;
	l = &rsx_local_ls[i];
	ufd = rsx_fd_hide(rsx_libc.socket(AF_UNIX, SOCK_SEQPACKET |
					     SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (ufd < 0)
		goto out;
	nlen = rsx_local_name(&un, addr, port);
	if (rsx_libc.bind(ufd, (struct sockaddr *)&un, nlen) ||
	    rsx_libc.listen(ufd, 128) ||
	    rsx_local_watch(ufd, RSX_LK_LISTENER, i)) {
		/* another process of this port has it: its clients ask there */
		rsx_dbg("fd %d: no same-host rendezvous: %s", fd,
			strerror(errno));
		rsx_local_close(&ufd);
		goto out;
	}
	l->fd = ufd;
	memcpy(l->addr, addr, 16);
	l->port = port;
	l->ss = ss;
take:
	l->s = s;
	l->until = 0;
	s->local_listen = 1;
	s->probe_pid = getpid();	/* see rsx_probe_adopt() */
	s->probe_sid = getsid(0);
	rsx_dbg("fd %d: same-host requests on %s", fd, un.sun_path + 1);
out:
	pthread_mutex_unlock(&rsx_local_lock);
	/* for the requests of connections a forked worker accepts */
	if (s->local_listen && rsx_board_create(rsx_cm_bell_fd()))
		rsx_dbg("fd %d: no board for the family", fd);
}

/*
 * The TCP listener is gone.  Its Unix socket stays RSOCKX_OOB_WINDOW_MS
 * for the connections it accepted lately (socat and nc close their
 * listener right after their one accept(), often before the client asks),
 * and as long as the port listens: a pre-forked server's master may close
 * its copy while its workers accept.
 */
void rsx_local_unlisten(struct rsx_sock *s)
{
	int i;

	if (!s->local_listen)
		return;
	s->local_listen = 0;
	pthread_mutex_lock(&rsx_local_lock);
	for (i = 0; i < RSX_LOCAL_LISTENERS; i++) {
		if (rsx_local_ls[i].fd < 0 || rsx_local_ls[i].s != s)
			continue;
		rsx_local_ls[i].s = NULL;
		rsx_local_ls[i].until = rsx_now_ms() + rsx_config.oob_window_ms;
	}
	pthread_mutex_unlock(&rsx_local_lock);
	rsx_cm_nudge();
}

static struct rsx_local_r *rsx_local_slot(void)
{
	int i;

	for (i = 0; i < RSX_LOCAL_SLOTS; i++)
		if (rsx_local_rs[i].ufd < 0)
			return &rsx_local_rs[i];
	return NULL;
}

static void rsx_local_free(struct rsx_local_r *r)
{
	rsx_local_close(&r->ufd);
	r->s = NULL;
}

/* Both ends of one TCP connection: a's addresses are b's, crossed. */
static int rsx_local_mirror(int a, int b)
{
	struct sockaddr_storage x, y;
	uint8_t xa[16], ya[16];
	uint16_t xp, yp;
	socklen_t len;
	int i;

	for (i = 0; i < 2; i++) {
		len = sizeof(x);
		if ((i ? rsx_libc.getpeername(a, (struct sockaddr *)&x, &len) :
			 rsx_libc.getsockname(a, (struct sockaddr *)&x, &len)))
			return 0;
		len = sizeof(y);
		if ((i ? rsx_libc.getsockname(b, (struct sockaddr *)&y, &len) :
			 rsx_libc.getpeername(b, (struct sockaddr *)&y, &len)))
			return 0;
		if (rsx_oob_addr(&x, xa, &xp) || rsx_oob_addr(&y, ya, &yp) ||
		    xp != yp || memcmp(xa, ya, 16))
			return 0;
	}
	return 1;
}

/* A TCP socket, and whose: the descriptor a peer gave us. */
static int rsx_local_tcp(int fd)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	return !rsx_libc.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto,
				    &len) && proto == IPPROTO_TCP;
}

static int rsx_local_pid(int ufd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (rsx_libc.getsockopt(ufd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return 0;
	return cr.pid;
}

/*
 * One message of up to len bytes and up to nfd descriptors (moved high
 * and private at once, so that the program's close_range() misses them).
 * Returns its length, -EAGAIN, or another -errno; *got: descriptors.
 */
static ssize_t rsx_local_recv(int ufd, void *buf, size_t len, int *fds,
			      int nfd, int *got)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.b, .msg_controllen = sizeof(u.b),
	};
	struct cmsghdr *cm;
	int i, n, *in;
	ssize_t ret;

	*got = 0;
	ret = rsx_libc.recvmsg(ufd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (ret < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		in = (int *)CMSG_DATA(cm);
		for (i = 0; i < n; i++) {
			if (*got < nfd)
				fds[(*got)++] = rsx_fd_hide(in[i]);
			else
				rsx_libc.close(in[i]);
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EPROTO;
	return ret;
}

static int rsx_local_sendfds(int ufd, const void *buf, size_t len,
			     const int *fds, int nfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (nfd) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfd * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfd * sizeof(int));
	}
	return rsx_libc.sendmsg(ufd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) ==
	       (ssize_t)len ? 0 : -errno;
}

/*
 * The answer to request p (ACK with c's memory, or NAK); p goes.  An ACK
 * that could not go fails: the client never learns of the memory.
 */
int rsx_local_send(struct rsx_oob_pend *p, const struct rsx_hello *h,
		    struct rsx_conn *c, int tcp_fd)
{
	uint8_t buf[RSX_WIRE_LEN];
	int fds[4], n = 0, ret;

	rsx_wire_encode(h, buf);
	if (c) {
		fds[n++] = tcp_fd;
		fds[n++] = c->shm_memfd;
		fds[n++] = c->shm_evfd;
		fds[n++] = c->shm_peer_evfd;
		c->shm_peer_pid = p->pid;
	}
	ret = rsx_local_sendfds(p->ufd, buf, sizeof(buf), fds, n);
	if (ret)
		rsx_info("same-host answer not sent: %s", strerror(-ret));
	if (c)		/* mapped here, and the client's now */
		rsx_local_close(&c->shm_memfd);
	if (!ret)
		rsx_stat_inc(h->type == RSX_MSG_ACK ? RSX_STAT_oob_answered :
			     RSX_STAT_oob_refused);
	rsx_oob_pend_free(p);
	return ret;
}

/* An ACK's descriptors go into the client's connection. */
int rsx_local_give(struct rsx_conn *c, struct rsx_oob_pend *p)
{
	if (!c->shm || p->fds[0] < 0)
		return -EPROTO;
	c->shm_memfd = p->fds[0];
	c->shm_peer_evfd = p->fds[1];
	c->shm_evfd = p->fds[2];
	c->shm_peer_pid = p->pid;
	p->fds[0] = p->fds[1] = p->fds[2] = -1;
	return 0;
}

static void rsx_local_nak(struct rsx_oob_pend *p, int reason)
{
	struct rsx_hello h = {
		.type = RSX_MSG_NAK, .nonce = p->h.nonce, .reason = reason,
	};

	rsx_local_send(p, &h, NULL, -1);
}

static uint64_t rsx_local_ino(int fd)
{
	struct stat st;

	return fd < 0 || rsx_libc.fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}

/*
 * A process of the family that took p off the board (board.h) answers
 * with c: the listener's CM thread takes c's descriptors out of this
 * process (rsx_local_relay), so c keeps its memfd until it goes.  The
 * answer's qpn, which means nothing for shared memory, names this process,
 * whose exit the client must see, not the listener's.
 */
void rsx_local_board_answer(struct rsx_oob_pend *p, struct rsx_hello *h,
			    struct rsx_conn *c, int tcp_fd)
{
	c->shm_peer_pid = p->pid;
	p->tpid = getpid();
	p->tfds[0] = tcp_fd;
	p->tfds[1] = c->shm_memfd;
	p->tfds[2] = c->shm_evfd;
	p->tfds[3] = c->shm_peer_evfd;
	p->tino = rsx_local_ino(c->shm_memfd);
	h->qpn = p->tpid;
}

/*
 * The listener's CM thread: p's answer came from another process of the
 * family, whose descriptors it names.  They are taken from that process
 * (pidfd_getfd: it is our descendant) and go to the client with it; when
 * they cannot, the client is refused and stays TCP (the worker's
 * connection then misses its CUTOVER and goes back to TCP itself).
 *
 * The numbers may have been closed and taken again meanwhile, by another
 * connection: the memfd, whose inode was posted, is taken last.  A
 * connection closes its memfd before its eventfds (shm.c), so a memfd that
 * is still the posted one vouches for the eventfds taken before it; the
 * TCP socket the client checks itself (the mirror of its own).
 */
void rsx_local_relay(struct rsx_oob_pend *p)
{
	static const int order[4] = { 0, 2, 3, 1 };
	int fds[4] = { -1, -1, -1, -1 }, pidfd = -1, i, k, n = 0;
	struct rsx_hello h;

	if (rsx_wire_decode(p->answer, sizeof(p->answer), &h))
		goto nak;
	if (h.type == RSX_MSG_ACK) {
		pidfd = rsx_fd_hide(syscall(SYS_pidfd_open, p->tpid, 0));
		for (i = 0; pidfd >= 0 && i < 4; i++) {
			k = order[i];
			fds[k] = rsx_fd_hide(syscall(SYS_pidfd_getfd, pidfd,
							 p->tfds[k], 0));
			if (fds[k] < 0)
				break;
		}
		rsx_local_close(&pidfd);
		if (i < 4 || !p->tino || rsx_local_ino(fds[1]) != p->tino) {
			rsx_info("same-host answer of process %d not relayed: %s",
				 p->tpid, i < 4 ? "its descriptors out of reach" :
				 "its connection went");
			goto nak;
		}
		n = 4;
	}
	if (rsx_local_sendfds(p->ufd, p->answer, sizeof(p->answer), fds, n))
		rsx_info("same-host answer not sent: %s", strerror(errno));
	for (i = 0; i < 4; i++)
		rsx_local_close(&fds[i]);
	rsx_oob_pend_free(p);
	return;
nak:
	for (i = 0; i < 4; i++)
		rsx_local_close(&fds[i]);
	rsx_local_nak(p, RSX_NAK_STATE);
}

/* Server: a request came on r. */
static void rsx_local_request(struct rsx_local_r *r)
{
	struct sockaddr_storage ss;
	uint8_t buf[RSX_OOB_REQ_LEN + 1], local[16];
	struct rsx_oob_pend *p;
	socklen_t len;
	uint16_t port;
	int tfd = -1, got, ok;
	ssize_t n;

	n = rsx_local_recv(r->ufd, buf, sizeof(buf), &tfd, 1, &got);
	if (n == -EAGAIN)
		return;
	rsx_stat_inc(RSX_STAT_oob_received);
	p = rsx_oob_pend_new();
	if (!p || n <= 0 || !got) {
		rsx_local_close(&tfd);
		free(p);
		rsx_local_free(r);
		return;
	}
	p->ufd = r->ufd;
	r->ufd = -1;
	rsx_local_free(r);
	p->type = RSX_MSG_HELLO;
	p->expires = rsx_now_ms() + rsx_config.oob_timeout_ms * 2 / 3;
	p->pid = rsx_local_pid(p->ufd);
	p->shm = 1;
	if (rsx_oob_req_decode(buf, n, &p->h, &port)) {
		rsx_local_close(&tfd);
		rsx_local_nak(p, RSX_NAK_VERSION);
		return;
	}
	/* the connection is the one whose socket came, whatever port it said */
	len = sizeof(ss);
	ok = rsx_local_tcp(tfd) &&
	     !rsx_libc.getsockname(tfd, (struct sockaddr *)&ss, &len) &&
	     !rsx_oob_addr(&ss, p->peer_addr, &p->peer_port);
	len = sizeof(ss);
	ok = ok && !rsx_libc.getpeername(tfd, (struct sockaddr *)&ss, &len) &&
	     !rsx_oob_addr(&ss, local, &p->local_port);
	rsx_local_close(&tfd);
	if (!ok) {
		rsx_local_nak(p, RSX_NAK_NOTFOUND);
		return;
	}
	rsx_oob_route(p);
}

/* Client: r's answer goes to the socket that asked, if it still is. */
static void rsx_local_deliver(struct rsx_local_r *r, struct rsx_oob_pend *p,
			      int why)
{
	rsx_oob_answered(r->fd, r->s, r->gen, r->nonce, p, why);
	rsx_local_free(r);
}

/* Client: the answer came on r. */
static void rsx_local_answer(struct rsx_local_r *r)
{
	uint8_t buf[RSX_WIRE_LEN + 1];
	int fds[4] = { -1, -1, -1, -1 }, got, i;
	struct rsx_oob_pend *p;
	ssize_t n;

	n = rsx_local_recv(r->ufd, buf, sizeof(buf), fds, 4, &got);
	if (n == -EAGAIN)
		return;
	p = rsx_oob_pend_new();
	if (!p || n != RSX_WIRE_LEN || rsx_wire_decode(buf, n, &p->h) ||
	    p->h.nonce != r->nonce ||
	    (p->h.type != RSX_MSG_ACK && p->h.type != RSX_MSG_NAK) ||
	    (p->h.type == RSX_MSG_ACK &&
	     (got != 4 || !rsx_local_tcp(fds[0]) ||
	      !rsx_local_mirror(fds[0], r->fd)))) {
		if (n >= 0)
			rsx_info("same-host upgrade: a wrong answer");
		for (i = 0; i < got; i++)
			rsx_local_close(&fds[i]);
		free(p);
		rsx_local_deliver(r, NULL, RSX_STAT_fallback_oob);
		return;
	}
	p->type = p->h.type;
	if (p->type == RSX_MSG_NAK)
		rsx_info("same-host upgrade: NAK: %s", rsx_nak_str(p->h.reason));
	for (i = 0; i < got; i++) {
		if (i && p->type == RSX_MSG_ACK)
			p->fds[i - 1] = fds[i];
		else
			rsx_local_close(&fds[i]);	/* seen, or a NAK's */
	}
	/* a worker's answer that its listener relayed names the worker */
	p->pid = p->type == RSX_MSG_ACK && p->h.qpn > 1 ? (int)p->h.qpn :
		 rsx_local_pid(r->ufd);
	rsx_local_deliver(r, p, 0);
}

static struct rsx_local_r *rsx_local_take_slot(void)
{
	struct rsx_local_r *r;

	pthread_mutex_lock(&rsx_local_lock);
	r = rsx_local_slot();
	if (r)
		r->ufd = -2;	/* taken */
	pthread_mutex_unlock(&rsx_local_lock);
	return r;
}

/*
 * Request h for s (fd, our TCP port), to dst's listener, on slot r: its
 * answer comes to rsx_local_answer.
 */
static void rsx_local_send_req(struct rsx_local_r *r, struct rsx_sock *s,
			       int fd, const struct rsx_hello *h,
			       uint16_t port, const struct sockaddr_storage *dst)
{
	static const uint8_t v4any[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6any[16];
	uint8_t req[RSX_OOB_REQ_LEN], addr[16];
	const uint8_t *names[3];
	struct sockaddr_un un;
	uint16_t dport;
	int i, ret = -1;

	r->s = s;
	r->gen = s->gen;
	r->fd = fd;
	r->nonce = h->nonce;
	r->kind = RSX_LK_ANSWER;
	r->expires = rsx_now_ms() + rsx_config.oob_timeout_ms;
	rsx_oob_req_encode(h, port, req);
	r->ufd = rsx_fd_hide(rsx_libc.socket(AF_UNIX, SOCK_SEQPACKET |
						SOCK_NONBLOCK | SOCK_CLOEXEC,
						0));
	if (r->ufd < 0 || rsx_oob_addr(dst, addr, &dport)) {
		rsx_local_deliver(r, NULL, RSX_STAT_fallback_oob);
		return;
	}
	/* the listener's own address first, then the wildcards */
	names[0] = addr;
	names[1] = addr[10] == 0xff ? v4any : v6any;
	names[2] = v6any;
	for (i = 0; i < 3 && ret; i++)
		ret = rsx_libc.connect(r->ufd, (struct sockaddr *)&un,
				       rsx_local_name(&un, names[i], dport));
	if (ret) {
		/* nothing of rsockx listens there */
		rsx_dbg("fd %d: no same-host rendezvous: %s", fd,
			strerror(errno));
		rsx_local_deliver(r, NULL, RSX_STAT_fallback_probe);
		return;
	}
	if (rsx_local_sendfds(r->ufd, req, sizeof(req), &fd, 1) ||
	    rsx_local_watch(r->ufd, RSX_LK_ANSWER, r - rsx_local_rs)) {
		rsx_local_deliver(r, NULL, RSX_STAT_fallback_oob);
		return;
	}
	rsx_stat_inc(RSX_STAT_oob_sent);
}

/*
 * A waiting client whose server is on this host: its connection (no
 * memory yet) and its request.  Returns 1 when one went out.
 */
int rsx_local_ask(struct rsx_sock *s, int fd)
{
	struct sockaddr_storage src, dst;
	struct rsx_local_r *r;
	struct rsx_hello h;
	uint16_t port;

	r = rsx_local_take_slot();
	if (!r)
		return 0;	/* all out: next round */
	if (rsx_sock_oob_start(s, fd, 0, &h, &src, &dst, &port)) {
		r->ufd = -1;
		return 0;
	}
	rsx_local_send_req(r, s, fd, &h, port, &dst);
	return 1;
}

/*
 * Test hook (RSOCKX_TEST_OOB_AGAIN): s, connected to its server's memory
 * and its CUTOVER not yet posted, sends its request once more, as a
 * stale copy would come.  The server must find the first connection
 * alive and refuse this one (rsx_oob_superseded); its NAK finds s past
 * waiting and is dropped.  h: the request, made under s->lock, which the
 * caller does not hold now (a request that fails is answered at once).
 */
void rsx_local_ask_again(struct rsx_sock *s, int fd, const struct rsx_hello *h)
{
	struct sockaddr_storage src, dst;
	socklen_t len = sizeof(src);
	struct rsx_local_r *r;
	uint8_t addr[16];
	uint16_t port;

	if (rsx_sock_oob_dst(s, &dst) ||
	    rsx_libc.getsockname(fd, (struct sockaddr *)&src, &len) ||
	    rsx_oob_addr(&src, addr, &port) || !(r = rsx_local_take_slot()))
		return;
	rsx_info("fd %d: test: the request again, before the CUTOVER", fd);
	rsx_local_send_req(r, s, fd, h, ntohs(port), &dst);
}

static void rsx_local_accept(struct rsx_local_l *l)
{
	struct rsx_local_r *r;
	int ufd;

	while ((ufd = rsx_libc.accept4(l->fd, NULL, NULL, SOCK_NONBLOCK |
				       SOCK_CLOEXEC)) >= 0) {
		ufd = rsx_fd_hide(ufd);
		pthread_mutex_lock(&rsx_local_lock);
		r = rsx_local_slot();
		if (r)
			r->ufd = ufd;
		pthread_mutex_unlock(&rsx_local_lock);
		if (!r) {
			rsx_local_close(&ufd);	/* the client stays TCP */
			continue;
		}
		r->kind = RSX_LK_REQUEST;
		r->s = NULL;
		r->expires = rsx_now_ms() + rsx_config.oob_timeout_ms;
		if (rsx_local_watch(ufd, RSX_LK_REQUEST, r - rsx_local_rs))
			rsx_local_free(r);
	}
}

/* The CM thread: whatever came on our Unix sockets. */
void rsx_local_serve(void)
{
	struct epoll_event ev[16];
	int n, i, kind, k;

	if (rsx_local_ep < 0)
		return;
	n = rsx_libc.epoll_wait(rsx_local_ep, ev, 16, 0);
	for (i = 0; i < n; i++) {
		kind = ev[i].data.u64 >> 32;
		k = (int)(uint32_t)ev[i].data.u64;
		if (kind == RSX_LK_LISTENER && k < RSX_LOCAL_LISTENERS &&
		    rsx_local_ls[k].fd >= 0)
			rsx_local_accept(&rsx_local_ls[k]);
		else if (k < RSX_LOCAL_SLOTS && rsx_local_rs[k].ufd >= 0 &&
			 rsx_local_rs[k].kind == kind)
			(kind == RSX_LK_REQUEST ? rsx_local_request :
						  rsx_local_answer)(
				&rsx_local_rs[k]);
	}
}

/*
 * The CM thread's round: what has waited too long goes.  Returns the time
 * to the next deadline, -1 for none (rsx_cm_sooner()).
 */
int rsx_local_tick(int64_t now)
{
	struct rsx_local_r *r;
	struct rsx_local_l *l;
	int i, next = -1;

	if (rsx_local_ep < 0)
		return -1;
	for (i = 0; i < RSX_LOCAL_SLOTS; i++) {
		r = &rsx_local_rs[i];
		if (r->ufd < 0)
			continue;
		if (r->expires > now) {
			next = rsx_cm_sooner(next, r->expires - now);
			continue;
		}
		if (r->kind == RSX_LK_ANSWER)
			rsx_local_deliver(r, NULL, RSX_STAT_fallback_oob);
		else
			rsx_local_free(r);
	}
	pthread_mutex_lock(&rsx_local_lock);
	for (i = 0; i < RSX_LOCAL_LISTENERS; i++) {
		l = &rsx_local_ls[i];
		if (l->fd < 0 || l->s)
			continue;
		if (l->until <= now) {
			if (!rsx_oob_port_listens((struct sockaddr *)&l->ss)) {
				rsx_local_close(&l->fd);
				continue;
			}
			l->until = now + rsx_config.oob_window_ms;
		}
		next = rsx_cm_sooner(next, l->until - now);
	}
	pthread_mutex_unlock(&rsx_local_lock);
	return next;
}

/*
 * The thread and its sockets stayed with the parent; the child closes its
 * copies, so that a listener's name goes with the last process that
 * listens (and a child's own listen() binds it anew).
 */
void rsx_local_fork_child(void)
{
	int i;

	pthread_mutex_init(&rsx_local_lock, NULL);
	for (i = 0; i < RSX_LOCAL_LISTENERS && rsx_local_ep >= 0; i++)
		rsx_local_close(&rsx_local_ls[i].fd);
	for (i = 0; i < RSX_LOCAL_SLOTS && rsx_local_ep >= 0; i++)
		rsx_local_free(&rsx_local_rs[i]);
	rsx_local_close(&rsx_local_ep);
}
