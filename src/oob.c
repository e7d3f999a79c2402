// SPDX-License-Identifier: MIT
/*
 * The out-of-band upgrade's messages on the RDMA CM (oob.h): requests of
 * waiting clients, requests that a server finds (or holds until the
 * program accepts their connection), and the answers.  Every librdmacm
 * call is made on the CM thread (probe.c), which holds rsx_cm_busy; other
 * threads hand it answers through the outbox and ring its bell.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "local.h"
#include "log.h"
#include "oob.h"
#include "probe.h"
#include "stats.h"
#include "upgrade.h"
#include "verbs.h"

#define RSX_OOB_SLOTS 256
/* as the probe's (probe.c): the request's deadline is what ends it */
#define RSX_OOB_RESOLVE_MS rsx_config.oob_timeout_ms
/*
 * Nothing listened on the server's CM port: its rsockx may still be
 * loading the RDMA libraries after listen() (half a second in the test
 * VM).  The request goes again this often, this many times.
 */
#define RSX_OOB_RETRY_MS 300
#define RSX_OOB_RETRIES 2
#define RSX_IB_CM_REJ_INVALID_SID 8

/* A client's request on its way; only the CM thread touches these. */
struct rsx_oob_req {
	uint8_t busy;
	uint8_t tries;			/* sent again: nothing listened */
	struct rdma_cm_id *id;		/* NULL: waiting to try again */
	int64_t retry_at;
	struct rsx_sock *s;		/* no reference: checked by gen */
	uint32_t gen;
	int fd;
	uint64_t nonce;
	int64_t expires;
	uint32_t qpn;
	struct sockaddr_storage src;
	struct sockaddr_storage dst;
	uint8_t priv[RSX_OOB_REQ_LEN];
};

static struct rsx_oob_req rsx_oob_reqs[RSX_OOB_SLOTS];

/* The two lists below, from any thread. */
static pthread_mutex_t rsx_oob_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_oob_pend *rsx_oob_outbox;	/* answers to send */
static struct rsx_oob_pend *rsx_oob_unaccepted; /* requests before accept() */
static _Atomic int rsx_oob_nunaccepted;

/*
 * Does a TCP socket still listen on addr's port (a listener's fork
 * children may hold it after the listener's process closed its copy)?
 * Binding it says.
 */
int rsx_oob_port_listens(const struct sockaddr *addr)
{
	socklen_t len = addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
			sizeof(struct sockaddr_in6);
	int fd, one = 1, ret;

	fd = rsx_libc.socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;	/* cannot tell: keep answering */
	rsx_libc.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ret = rsx_libc.bind(fd, addr, len) && errno == EADDRINUSE;
	rsx_libc.close(fd);
	return ret;
}

int rsx_oob_addr(const void *sa, uint8_t addr[16], uint16_t *port)
{
	const struct sockaddr_in *s4 = sa;
	const struct sockaddr_in6 *s6 = sa;

	if (s4->sin_family == AF_INET) {
		memset(addr, 0, 10);
		addr[10] = addr[11] = 0xff;
		memcpy(addr + 12, &s4->sin_addr, 4);
		*port = s4->sin_port;
		return 0;
	}
	if (s6->sin6_family == AF_INET6) {
		memcpy(addr, &s6->sin6_addr, 16);
		*port = s6->sin6_port;
		return 0;
	}
	return -EAFNOSUPPORT;
}

struct rsx_oob_pend *rsx_oob_pend_new(void)
{
	struct rsx_oob_pend *p = calloc(1, sizeof(*p));

	if (p) {
		p->slot = -1;
		p->ufd = p->fds[0] = p->fds[1] = p->fds[2] = -1;
	}
	return p;
}

/* A request or answer no one took: its descriptors (local.h) go with it. */
void rsx_oob_pend_free(struct rsx_oob_pend *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < 3; i++)
		if (p->fds[i] >= 0)
			rsx_fd_private_close(p->fds[i]);
	if (p->ufd >= 0)
		rsx_fd_private_close(p->ufd);
	free(p);
}

/* p's answer (in p->answer) for the CM thread to send. */
static void rsx_oob_queue(struct rsx_oob_pend *p)
{
	pthread_mutex_lock(&rsx_oob_lock);
	p->next = rsx_oob_outbox;
	rsx_oob_outbox = p;
	pthread_mutex_unlock(&rsx_oob_lock);
	rsx_cm_ring();
}

/*
 * Answers p's request (ACK or NAK): through our CM thread when the request
 * came to it, or through the board to the process it came to.
 */
void rsx_oob_send(struct rsx_oob_pend *p, const struct rsx_hello *h)
{
	if (p->ufd >= 0) {
		rsx_local_send(p, h, NULL, -1);
		return;
	}
	rsx_wire_encode(h, p->answer);
	rsx_stat_inc(h->type == RSX_MSG_ACK ? RSX_STAT_oob_answered :
		     RSX_STAT_oob_refused);
	if (p->id) {
		rsx_oob_queue(p);
		return;
	}
	if (p->slot >= 0)
		rsx_board_answer(p);
	free(p);
}

static void rsx_oob_nak(struct rsx_oob_pend *p, int reason)
{
	struct rsx_hello h = {
		.type = RSX_MSG_NAK, .nonce = p->h.nonce, .reason = reason,
	};

	rsx_dbg("out-of-band request refused: %s", rsx_nak_str(reason));
	rsx_oob_send(p, &h);
}

/* Is s the TCP connection of those addresses (as the server sees it)? */
int rsx_oob_names(const struct rsx_sock *s, const uint8_t peer_addr[16],
		  uint16_t peer_port, uint16_t local_port)
{
	return s->peer_port == peer_port && s->local_port == local_port &&
	       !memcmp(s->peer_addr, peer_addr, 16);
}

static int rsx_oob_match(const struct rsx_sock *s,
			 const struct rsx_oob_pend *p)
{
	return s->oob_ok && rsx_oob_names(s, p->peer_addr, p->peer_port,
					  p->local_port);
}

/* An accepted socket of this process that p names, with a reference. */
static struct rsx_sock *rsx_oob_find(const struct rsx_oob_pend *p, int *fdp)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP ||
		    atomic_load(&s->role) != RSX_ROLE_ACCEPTED ||
		    !rsx_oob_match(s, p) || !rsx_sock_tryget(s))
			continue;
		if (rsx_fd_peek(fd) == s && rsx_oob_match(s, p)) {
			*fdp = fd;
			return s;
		}
		rsx_sock_put(s);
	}
	return NULL;
}

/*
 * A connection request came to a port we answer probes on.  Returns 0 when
 * it is not an out-of-band request (a probe), 1 when the request's id is
 * ours now (answered later through the outbox).
 */
int rsx_oob_cm_request(void *idp, const void *priv, uint8_t len)
{
	struct rdma_cm_id *id = idp;
	struct rsx_oob_pend *p;
	uint8_t local[16];
	uint16_t port;
	int ret;

	if (!priv || len < RSX_OOB_REQ_LEN ||
	    memcmp(priv, rsx_oob_magic, RSX_OOB_MAGIC_LEN))
		return 0;
	rsx_stat_inc(RSX_STAT_oob_received);
	p = rsx_oob_pend_new();
	if (!p) {
		rsx_rdma.reject(id, NULL, 0);
		rsx_rdma.destroy_id(id);
		return 1;
	}
	p->id = id;
	p->type = RSX_MSG_HELLO;
	/* answered in time for the client, whose own wait is longer */
	p->expires = rsx_now_ms() + rsx_config.oob_timeout_ms * 2 / 3;
	ret = rsx_oob_req_decode(priv, len, &p->h, &port);
	if (ret) {
		rsx_oob_nak(p, ret == -EINVAL ? RSX_NAK_VERSION :
			    RSX_NAK_INTERNAL);
		return 1;
	}
	if (rsx_oob_addr(rdma_get_peer_addr(id), p->peer_addr,
			 &p->peer_port) ||
	    rsx_oob_addr(rdma_get_local_addr(id), local,
			 &p->local_port)) {
		rsx_oob_nak(p, RSX_NAK_INTERNAL);
		return 1;
	}
	p->peer_port = htons(port);
	rsx_oob_route(p);
	return 1;
}

/*
 * Request p, its addresses known, goes to the socket it names: now, or
 * once it is accepted, or (RDMA CM only: its descriptors cannot travel)
 * taken by the process of the family that holds it.
 */
void rsx_oob_route(struct rsx_oob_pend *p)
{
	struct rsx_sock *s;
	int ret, fd;

	if (!rsx_config.oob) {
		rsx_oob_nak(p, RSX_NAK_STATE);
		return;
	}
	p->again = 0;
	s = rsx_oob_find(p, &fd);
	if (s) {
		ret = rsx_sock_oob_request(s, fd, p);
		rsx_sock_put(s);
		if (!ret)
			return;
		p->again = ret == -EAGAIN;
	}
	/*
	 * Not accepted yet, or by another process of the family (board.h),
	 * or shared with one by fork() (share.h): answered once it is, or
	 * once one process alone holds it; refused when it expires
	 * (rsx_oob_tick).  A socket still settling its peer's DOWNGRADE is
	 * asked again at every tick.
	 */
	if (!p->again)
		rsx_board_post(p);
	pthread_mutex_lock(&rsx_oob_lock);
	p->next = rsx_oob_unaccepted;
	rsx_oob_unaccepted = p;
	atomic_fetch_add(&rsx_oob_nunaccepted, 1);
	pthread_mutex_unlock(&rsx_oob_lock);
	rsx_cm_nudge();
}

/*
 * accept() gave the program s (fd) from listener l.  Where this process
 * answers probes for l, a request for s may come while it is young: it is
 * remembered by its addresses, and one that came first is taken now.
 */
void rsx_oob_accepted(struct rsx_sock *s, int fd, struct rsx_sock *l)
{
	struct sockaddr_storage ss;
	struct rsx_oob_pend *p, **pp;
	socklen_t len = sizeof(ss);
	uint8_t local[16];

	if (!(l->probe_id || l->local_listen ||
	      (l->probed && rsx_board_have())) ||
	    !rsx_config.valid || !rsx_config.oob)
		return;
	if (rsx_libc.getpeername(fd, (struct sockaddr *)&ss, &len) ||
	    rsx_oob_addr(&ss, s->peer_addr, &s->peer_port))
		return;
	len = sizeof(ss);
	if (rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    rsx_oob_addr(&ss, local, &s->local_port))
		return;
	s->oob_until = rsx_now_ms() + rsx_config.oob_window_ms;
	s->oob_ok = 1;
	rsx_board_news(&s->board_seen);
	p = NULL;
	if (atomic_load(&rsx_oob_nunaccepted)) {
		pthread_mutex_lock(&rsx_oob_lock);
		for (pp = &rsx_oob_unaccepted; (p = *pp); pp = &p->next)
			if (rsx_oob_match(s, p) &&
			    (p->slot < 0 || !rsx_board_unpost(p))) {
				*pp = p->next;
				atomic_fetch_sub(&rsx_oob_nunaccepted, 1);
				break;
			}
		pthread_mutex_unlock(&rsx_oob_lock);
	}
	if (!p)
		p = rsx_board_take(s);
	if (p)
		rsx_sock_oob_request(s, fd, p);
}

/* An answer no socket will apply: a request held is refused. */
void rsx_oob_drop(struct rsx_oob_pend *p)
{
	if (p && (p->id || p->slot >= 0 || p->ufd >= 0))
		rsx_oob_nak(p, RSX_NAK_STATE);
	else
		rsx_oob_pend_free(p);
}

/* The socket goes: an answer it held is dropped, its wake-up closed. */
void rsx_oob_sock_free(struct rsx_sock *s)
{
	rsx_oob_drop(s->oob);
	s->oob = NULL;
	if (s->wake_fd >= 0) {
		rsx_fd_private_close(s->wake_fd);
		s->wake_fd = -1;
	}
}

static void rsx_oob_req_free(struct rsx_oob_req *r)
{
	r->busy = 0;
	r->id = NULL;
	r->s = NULL;
}

/*
 * The answer to slot r (p: ACK or NAK; NULL: none came) goes to its socket,
 * if that is still the one that asked.
 */
static void rsx_oob_deliver(struct rsx_oob_req *r, struct rsx_oob_pend *p,
			    int why)
{
	if (p)		/* an ACK or NAK of ours: the server runs rsockx */
		rsx_probe_learn((struct sockaddr *)&r->dst, sizeof(r->dst));
	rsx_oob_answered(r->fd, r->s, r->gen, r->nonce, p, why);
}

/*
 * The answer to the request that socket asker (fd, generation gen) made
 * goes to it, if fd is still that socket; a local answer too (local.c).
 */
void rsx_oob_answered(int fd, const struct rsx_sock *asker, uint32_t gen,
		      uint64_t nonce, struct rsx_oob_pend *p, int why)
{
	struct rsx_sock *s = rsx_fd_get(fd);

	rsx_stat_inc(p && p->type == RSX_MSG_ACK ? RSX_STAT_oob_acked :
		     RSX_STAT_oob_naked);
	if (s && s == asker && s->gen == gen)
		rsx_sock_oob_answer(s, fd, p, nonce, why);
	else
		rsx_oob_pend_free(p);
	if (s)
		rsx_sock_put(s);
}

/* A reject's private data: our answer, or anything else (a NAK then). */
static struct rsx_oob_pend *rsx_oob_parse(const struct rsx_oob_req *r,
					  const struct rdma_cm_event *ev)
{
	const uint8_t *d = ev->param.conn.private_data;
	struct rsx_oob_pend *p;

	if (ev->event != RDMA_CM_EVENT_REJECTED || !d ||
	    ev->param.conn.private_data_len < RSX_WIRE_LEN)
		return NULL;
	p = rsx_oob_pend_new();
	if (!p)
		return NULL;
	if (rsx_wire_decode(d, RSX_WIRE_LEN, &p->h) || p->h.nonce != r->nonce ||
	    (p->h.type != RSX_MSG_ACK && p->h.type != RSX_MSG_NAK)) {
		free(p);
		return NULL;
	}
	p->type = p->h.type;
	if (p->type == RSX_MSG_NAK)
		rsx_info("out-of-band upgrade: NAK: %s",
			 rsx_nak_str(p->h.reason));
	return p;
}

/* An event of one of our requests; returns its id once it is done. */
void *rsx_oob_cm_event(void *evp)
{
	struct rdma_cm_event *ev = evp;
	struct rsx_oob_req *r = ev->id->context;
	struct rdma_cm_id *id = ev->id;
	int why = RSX_STAT_fallback_oob;
	struct rdma_conn_param cp;
	struct rsx_oob_pend *p;

	if (r->id != id)
		return NULL;	/* a late event of a request given up */
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (!rsx_rdma.resolve_route(id, RSX_OOB_RESOLVE_MS))
			return NULL;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		memset(&cp, 0, sizeof(cp));
		cp.private_data = r->priv;
		cp.private_data_len = sizeof(r->priv);
		cp.qp_num = r->qpn;	/* rejected: the CM never uses it */
		cp.retry_count = 1;
		cp.rnr_retry_count = 1;
		if (!rsx_rdma.connect(id, &cp)) {
			rsx_stat_inc(RSX_STAT_oob_sent);
			return NULL;
		}
		break;
	default:
		break;
	}
	rsx_dbg("fd %d: out-of-band request: event %d, status %d", r->fd,
		ev->event, ev->status);
	p = rsx_oob_parse(r, ev);
	if (!p && ev->event == RDMA_CM_EVENT_REJECTED &&
	    ev->status == RSX_IB_CM_REJ_INVALID_SID) {
		if (r->tries < RSX_OOB_RETRIES) {
			r->tries++;
			r->retry_at = rsx_now_ms() + RSX_OOB_RETRY_MS;
			r->id = NULL;	/* the slot waits (rsx_oob_tick) */
			return id;
		}
		why = RSX_STAT_fallback_probe;	/* no rsockx there */
	}
	rsx_oob_deliver(r, p, why);
	rsx_oob_req_free(r);
	return id;
}

int rsx_oob_owns(const void *ctx)
{
	return (const char *)ctx >= (const char *)rsx_oob_reqs &&
	       (const char *)ctx < (const char *)(rsx_oob_reqs + RSX_OOB_SLOTS);
}

static struct rsx_oob_req *rsx_oob_slot(void)
{
	int i;

	for (i = 0; i < RSX_OOB_SLOTS; i++)
		if (!rsx_oob_reqs[i].busy)
			return &rsx_oob_reqs[i];
	return NULL;
}

/* Slot r's request, on its way: from the address resolution on. */
static void rsx_oob_resolve(struct rsx_oob_req *r)
{
	if (rsx_rdma.create_id(rsx_cm_channel(), &r->id, r, RDMA_PS_TCP)) {
		r->id = NULL;
		goto fail;
	}
	if (!rsx_rdma.resolve_addr(r->id, (struct sockaddr *)&r->src,
				   (struct sockaddr *)&r->dst,
				   RSX_OOB_RESOLVE_MS))
		return;
	rsx_dbg("fd %d: out-of-band request: no route: %s", r->fd,
		strerror(errno));
	rsx_rdma.destroy_id(r->id);
fail:
	rsx_oob_deliver(r, NULL, RSX_STAT_fallback_oob);
	rsx_oob_req_free(r);
}

/*
 * A waiting client: its request goes out (yes: the probe said rsockx).
 * Returns 1 when it made one (a queue pair).
 */
static int rsx_oob_ask(struct rsx_sock *s, int fd, int yes)
{
	struct rsx_oob_req *r = rsx_oob_slot();
	struct sockaddr_storage src;
	struct rsx_hello h;
	uint16_t port;

	if (!r)
		return 0;	/* all out: next round */
	if (rsx_sock_oob_start(s, fd, yes, &h, &src, &r->dst, &port))
		return 0;
	rsx_oob_req_encode(&h, port, r->priv);
	r->busy = 1;
	r->tries = 0;
	r->s = s;
	r->gen = s->gen;
	r->fd = fd;
	r->nonce = h.nonce;
	r->qpn = h.qpn;
	r->src = src;
	r->expires = rsx_now_ms() + rsx_config.oob_timeout_ms;
	rsx_oob_resolve(r);
	return 1;
}

/*
 * Waiting clients get their requests a few at a time (making a queue pair
 * and registering its ring takes milliseconds under Soft-RoCE), so that
 * the CM events of those already asked are not held up behind a crowd of
 * new connections; the next round goes on where this one stopped.
 */
#define RSX_OOB_ASK_BATCH 8

static _Atomic int rsx_oob_scan;	/* look at the waiting clients now */

/* A client began to wait, or a probe answered: the CM thread looks. */
void rsx_oob_rescan(void)
{
	atomic_store(&rsx_oob_scan, 1);
	rsx_cm_ring();
}

/* Returns 1 when waiting clients are left for the next round. */
static int rsx_oob_waiting(void)
{
	static unsigned int next;
	unsigned int fd, hw = rsx_fdtab_hiwater(), n, asked = 0;
	struct sockaddr_storage dst;
	struct rsx_sock *s;
	int answer;

	for (n = 0; n < hw && atomic_load(&rsx_client_waits); n++) {
		if (asked == RSX_OOB_ASK_BATCH)
			return 1;
		fd = next++ % hw;
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP ||
		    s->state != RSX_ST_CLIENT_WAIT || !rsx_sock_tryget(s))
			continue;
		/*
		 * The request goes without waiting for the probe, which it
		 * answers for this connection too (a server that closed its
		 * listener after accept() answers requests, not probes);
		 * where the rules say rdma, a yes first puts a HELLO at the
		 * head of a stream that is still empty.
		 */
		if (rsx_fd_peek(fd) == s && s->local) {
			asked += rsx_local_ask(s, fd);
		} else if (rsx_fd_peek(fd) == s &&
			   !rsx_sock_oob_dst(s, &dst)) {
			answer = rsx_probe_lookup((struct sockaddr *)&dst,
						  sizeof(dst));
			if (!s->inband_try || answer != RSX_PROBE_UNKNOWN)
				asked += rsx_oob_ask(s, fd,
						     answer == RSX_PROBE_YES);
		}
		rsx_sock_put(s);
	}
	return 0;
}

/*
 * The CM thread's round: requests not accepted in time are refused,
 * requests of ours not answered in time given up, waiting clients looked
 * at (when one began to wait, a probe answered, or every 100 ms), and the
 * answers sent.  Returns 1 when work is left for a round right after.
 */
int rsx_oob_tick(void)
{
	static int64_t next_scan;
	struct rsx_oob_pend *p, **pp, *out;
	int64_t now = rsx_now_ms();
	struct rsx_oob_req *r;
	int i, ret, more = 0;

	if (atomic_load(&rsx_oob_nunaccepted)) {
		pthread_mutex_lock(&rsx_oob_lock);
		out = NULL;
		for (pp = &rsx_oob_unaccepted; (p = *pp);) {
			ret = p->slot >= 0 ? rsx_board_collect(p, now) :
			      p->expires <= now ? -1 : p->again ? 2 : 0;
			if (!ret) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			p->next = out;
			p->type = ret;	/* 1: answered by the family, 2: ask again */
			out = p;
			atomic_fetch_sub(&rsx_oob_nunaccepted, 1);
		}
		pthread_mutex_unlock(&rsx_oob_lock);
		while ((p = out)) {
			out = p->next;
			if (p->type == 2) {
				p->type = RSX_MSG_HELLO;
				rsx_oob_route(p);
			} else if (p->type == 1 && p->ufd >= 0)
				rsx_local_relay(p);
			else if (p->type == 1)
				rsx_oob_queue(p);
			else
				rsx_oob_nak(p, RSX_NAK_NOTFOUND);
		}
	}
	for (i = 0; i < RSX_OOB_SLOTS; i++) {
		r = &rsx_oob_reqs[i];
		if (!r->busy)
			continue;
		if (r->expires <= now) {
			rsx_dbg("fd %d: out-of-band request: no answer", r->fd);
			if (r->id)
				rsx_rdma.destroy_id(r->id);
			rsx_oob_deliver(r, NULL, RSX_STAT_fallback_oob);
			rsx_oob_req_free(r);
		} else if (!r->id && r->retry_at <= now) {
			rsx_oob_resolve(r);
		}
	}
	if (atomic_load(&rsx_client_waits) &&
	    (atomic_exchange(&rsx_oob_scan, 0) || now >= next_scan)) {
		more = rsx_oob_waiting();
		if (more)
			atomic_store(&rsx_oob_scan, 1);
		next_scan = now + 100;
	}

	pthread_mutex_lock(&rsx_oob_lock);
	out = rsx_oob_outbox;
	rsx_oob_outbox = NULL;
	pthread_mutex_unlock(&rsx_oob_lock);
	while ((p = out)) {
		out = p->next;
		rsx_rdma.reject(p->id, p->answer, sizeof(p->answer));
		rsx_rdma.destroy_id(p->id);
		free(p);
	}
	return more;
}

/*
 * Does anything of out-of-band wait on a deadline (the CM thread's
 * rounds go on)?  Requests in and out, clients that wait.  Answers to
 * send ring the CM thread themselves.
 */
int rsx_oob_pending(void)
{
	int i;

	if (atomic_load(&rsx_client_waits) ||
	    atomic_load(&rsx_oob_nunaccepted))
		return 1;
	for (i = 0; i < RSX_OOB_SLOTS; i++)
		if (rsx_oob_reqs[i].busy)
			return 1;
	return 0;
}

/* The requests and their ids are the parent's; the child forgets them. */
void rsx_oob_fork_child(void)
{
	struct rsx_oob_pend *p;

	pthread_mutex_init(&rsx_oob_lock, NULL);
	memset(rsx_oob_reqs, 0, sizeof(rsx_oob_reqs));
	while ((p = rsx_oob_outbox)) {
		rsx_oob_outbox = p->next;
		free(p);
	}
	while ((p = rsx_oob_unaccepted)) {
		rsx_oob_unaccepted = p->next;
		rsx_oob_pend_free(p);
	}
	atomic_store(&rsx_oob_nunaccepted, 0);
}
