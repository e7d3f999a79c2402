// SPDX-License-Identifier: MIT
/* The probe and its responder (probe.h). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "probe.h"
#include "stats.h"
#include "verbs.h"

/* The private data of a responder's reject: "rsockx", NUL, version. */
static const uint8_t rsx_probe_mark[8] = { 'r', 's', 'o', 'c', 'k', 'x', 0,
					   1 };

#define RSX_PROBE_CACHE 256
#define RSX_CM_TIMEOUT_MS 500
#define RSX_IB_CM_REJ_CONSUMER 28

struct rsx_probe {
	uint8_t addr[16];
	uint16_t port;
	uint8_t family;
	uint8_t answer;
	int64_t expires;		/* ms; for UNKNOWN: when to give up */
	struct rdma_cm_id *id;		/* while asking */
};

/* rdma_cm ids carry one of these as context, to tell events apart. */
struct rsx_cm_ctx {
	int listener;
	struct rsx_probe *probe;
};

static pthread_mutex_t rsx_probe_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Held by the responder thread while it handles CM events (librdmacm
 * allocates and frees there) and by fork() around the real fork, so that
 * the child never inherits an allocator lock that thread held.  glibc's
 * malloc takes its own locks across fork(); ASan's allocator in this
 * compiler's runtime does not (it has no fork interceptor): a pre-forked
 * worker would wait for such a lock at its first allocation, for good.
 */
static pthread_mutex_t rsx_cm_busy = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_probe rsx_probes[RSX_PROBE_CACHE];
static struct rsx_cm_ctx rsx_probe_ctx[RSX_PROBE_CACHE];
static struct rsx_cm_ctx rsx_listener_ctx = { .listener = 1 };
static struct rdma_event_channel *rsx_cm_chan;
static int rsx_cm_state;	/* 0 not tried, 1 running, -1 unavailable */

static void rsx_key(const struct sockaddr *sa, uint8_t addr[16],
		    uint16_t *port, uint8_t *family)
{
	const struct sockaddr_in *s4 = (const void *)sa;
	const struct sockaddr_in6 *s6 = (const void *)sa;

	memset(addr, 0, 16);
	*family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		memcpy(addr, &s4->sin_addr, 4);
		*port = s4->sin_port;
	} else {
		memcpy(addr, &s6->sin6_addr, 16);
		*port = s6->sin6_port;
	}
}

/*
 * Called with the lock held, once a probe has its answer.  Returns its CM
 * id for the caller to destroy: inside an event handler that must wait
 * until the event is acknowledged (rdma_destroy_id() waits for that).
 */
static struct rdma_cm_id *rsx_probe_done(struct rsx_probe *p, int answer)
{
	struct rdma_cm_id *id = p->id;

	p->answer = answer;
	p->expires = rsx_now_ms() + 1000 * (answer == RSX_PROBE_YES ?
					rsx_config.probe_ttl_s :
					rsx_config.probe_neg_ttl_s);
	p->id = NULL;
	rsx_stat_inc(answer == RSX_PROBE_YES ? RSX_STAT_probe_yes :
		     RSX_STAT_probe_no);
	return id;
}

static void rsx_probe_finish(struct rsx_probe *p, int answer)
{
	struct rdma_cm_id *id = rsx_probe_done(p, answer);

	if (id)
		rsx_rdma.destroy_id(id);
}

/* Handles one event; returns a CM id to destroy once it is acknowledged. */
static struct rdma_cm_id *rsx_cm_event(struct rdma_cm_event *ev)
{
	struct rsx_cm_ctx *ctx = ev->id->context;
	struct rdma_cm_id *done = NULL;
	struct rdma_conn_param cp;
	struct rsx_probe *p;
	int ok;

	if (ctx == &rsx_listener_ctx) {
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			return NULL;
		/* the request has an id of its own: reject, then destroy */
		rsx_rdma.reject(ev->id, rsx_probe_mark,
				sizeof(rsx_probe_mark));
		rsx_stat_inc(RSX_STAT_probes_answered);
		return ev->id;
	}
	if (!ctx || !ctx->probe)
		return NULL;
	p = ctx->probe;
	pthread_mutex_lock(&rsx_probe_lock);
	if (p->id != ev->id)
		goto out;	/* a late event of an expired probe */
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rsx_rdma.resolve_route(ev->id, RSX_CM_TIMEOUT_MS))
			done = rsx_probe_done(p, RSX_PROBE_NO);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 1;	/* rejected anyway: no QP needed */
		cp.retry_count = 1;
		cp.rnr_retry_count = 1;
		if (rsx_rdma.connect(ev->id, &cp))
			done = rsx_probe_done(p, RSX_PROBE_NO);
		break;
	case RDMA_CM_EVENT_REJECTED:
		ok = ev->status == RSX_IB_CM_REJ_CONSUMER &&
		     ev->param.conn.private_data &&
		     ev->param.conn.private_data_len >= sizeof(rsx_probe_mark) &&
		     !memcmp(ev->param.conn.private_data, rsx_probe_mark,
			     sizeof(rsx_probe_mark));
		rsx_dbg("probe answered: %s (status %d)", ok ? "rsockx" : "no",
			ev->status);
		done = rsx_probe_done(p, ok ? RSX_PROBE_YES : RSX_PROBE_NO);
		break;
	default:
		/* errors, and a server that accepted: not rsockx */
		done = rsx_probe_done(p, RSX_PROBE_NO);
	}
out:
	pthread_mutex_unlock(&rsx_probe_lock);
	return done;
}

/* Probes that never got an answer count as "no". */
static void rsx_probe_expire(void)
{
	int64_t now = rsx_now_ms();
	int i;

	pthread_mutex_lock(&rsx_probe_lock);
	for (i = 0; i < RSX_PROBE_CACHE; i++)
		if (rsx_probes[i].id && rsx_probes[i].expires < now)
			rsx_probe_finish(&rsx_probes[i], RSX_PROBE_NO);
	pthread_mutex_unlock(&rsx_probe_lock);
}

static void *rsx_cm_thread(void *arg)
{
	struct pollfd pfd = { .fd = rsx_cm_chan->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *done;

	(void)arg;
	rsx_guard_enter();	/* all its calls go straight to libc */
	for (;;) {
		pfd.revents = 0;
		rsx_libc.poll(&pfd, 1, 100);
		pthread_mutex_lock(&rsx_cm_busy);
		if (pfd.revents && !rsx_rdma.get_cm_event(rsx_cm_chan, &ev)) {
			done = rsx_cm_event(ev);
			rsx_rdma.ack_cm_event(ev);
			if (done)
				rsx_rdma.destroy_id(done);
		}
		rsx_probe_expire();
		pthread_mutex_unlock(&rsx_cm_busy);
	}
	return NULL;
}

/*
 * The CM event channel and its thread, once per process; only where an RDMA
 * CM device exists, so a host without RDMA loads nothing.
 */
static int rsx_cm_start(void)
{
	int ret;

	if (rsx_cm_state)
		return rsx_cm_state > 0 ? 0 : -ENODEV;
	rsx_cm_state = -1;
	if (access("/dev/infiniband/rdma_cm", R_OK | W_OK))
		return -ENODEV;
	if (rsx_verbs_load())
		return -ENODEV;
	rsx_guard_enter();
	rsx_cm_chan = rsx_rdma.create_event_channel();
	rsx_guard_leave();
	if (!rsx_cm_chan)
		return -ENODEV;
	ret = rsx_guard_thread(rsx_cm_thread);
	if (ret) {
		rsx_rdma.destroy_event_channel(rsx_cm_chan);
		rsx_cm_chan = NULL;
		return ret;
	}
	rsx_cm_state = 1;
	return 0;
}

static struct rsx_probe *rsx_probe_slot(const uint8_t *addr, uint16_t port,
					uint8_t family, int64_t now)
{
	struct rsx_probe *p, *victim = NULL;
	int i;

	for (i = 0; i < RSX_PROBE_CACHE; i++) {
		p = &rsx_probes[i];
		if (p->family == family && p->port == port &&
		    !memcmp(p->addr, addr, 16))
			return p;
		if (p->id)
			continue;	/* asking: keep */
		if (!victim || !p->family || p->expires < victim->expires)
			victim = p;
	}
	if (victim) {
		memset(victim, 0, sizeof(*victim));
		memcpy(victim->addr, addr, 16);
		victim->port = port;
		victim->family = family;
		victim->expires = now;	/* expired: ask */
	}
	return victim;
}

/*
 * The cached answer for a destination; when there is none (or it expired),
 * a probe is started and the answer is UNKNOWN for this connection.
 */
int rsx_probe_lookup(const struct sockaddr *sa, socklen_t len)
{
	int64_t now = rsx_now_ms();
	struct rsx_probe *p;
	uint8_t addr[16], family;
	uint16_t port;
	int answer, i;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    len < (sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
		   sizeof(struct sockaddr_in6)))
		return RSX_PROBE_NO;
	rsx_key(sa, addr, &port, &family);
	pthread_mutex_lock(&rsx_probe_lock);
	p = rsx_probe_slot(addr, port, family, now);
	if (!p) {
		answer = RSX_PROBE_UNKNOWN;
		goto out;
	}
	if (p->id || p->expires > now) {
		answer = p->answer;
		goto out;
	}
	/* ask */
	p->answer = RSX_PROBE_UNKNOWN;
	if (rsx_cm_start()) {
		rsx_probe_finish(p, RSX_PROBE_NO);
		answer = RSX_PROBE_NO;
		goto out;
	}
	i = p - rsx_probes;
	rsx_probe_ctx[i].probe = p;
	rsx_guard_enter();
	if (rsx_rdma.create_id(rsx_cm_chan, &p->id, &rsx_probe_ctx[i],
			       RDMA_PS_TCP)) {
		p->id = NULL;
		rsx_probe_finish(p, RSX_PROBE_NO);
	} else if (rsx_rdma.resolve_addr(p->id, NULL, (struct sockaddr *)sa,
					 RSX_CM_TIMEOUT_MS)) {
		/* no RDMA device routes there: known at once */
		rsx_probe_finish(p, RSX_PROBE_NO);
	} else {
		p->expires = now + rsx_config.probe_timeout_ms;
		rsx_stat_inc(RSX_STAT_probes_sent);
	}
	rsx_guard_leave();
	answer = p->answer;
out:
	pthread_mutex_unlock(&rsx_probe_lock);
	return answer;
}

/* A tracked socket listens: answer probes on its address and port. */
void rsx_probe_listen(struct rsx_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rdma_cm_id *id;

	if (rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	pthread_mutex_lock(&rsx_probe_lock);
	if (s->probe_id || rsx_cm_start())
		goto out;
	rsx_guard_enter();
	if (rsx_rdma.create_id(rsx_cm_chan, &id, &rsx_listener_ctx,
			       RDMA_PS_TCP))
		goto out_guard;
	if (rsx_rdma.bind_addr(id, (struct sockaddr *)&ss) ||
	    rsx_rdma.listen(id, 64)) {
		/* e.g. another process of the same port answers already */
		rsx_dbg("fd %d: probe responder not started: %s", fd,
			strerror(errno));
		rsx_rdma.destroy_id(id);
		goto out_guard;
	}
	s->probe_id = id;
	rsx_dbg("fd %d: answering probes", fd);
out_guard:
	rsx_guard_leave();
out:
	pthread_mutex_unlock(&rsx_probe_lock);
}

/* The listener is gone: its port must stop saying "rsockx here". */
void rsx_probe_unlisten(struct rsx_sock *s)
{
	if (!s->probe_id)
		return;
	rsx_guard_enter();
	rsx_rdma.destroy_id((struct rdma_cm_id *)s->probe_id);
	rsx_guard_leave();
	s->probe_id = NULL;
}

/* Right before fork(): the responder thread is between events. */
void rsx_probe_fork_prepare(void)
{
	pthread_mutex_lock(&rsx_cm_busy);
}

void rsx_probe_fork_parent(void)
{
	pthread_mutex_unlock(&rsx_cm_busy);
}

/* The thread and the channel stayed with the parent. */
void rsx_probe_fork_child(void)
{
	int i;

	pthread_mutex_init(&rsx_cm_busy, NULL);
	pthread_mutex_init(&rsx_probe_lock, NULL);
	rsx_cm_state = 0;
	rsx_cm_chan = NULL;
	for (i = 0; i < RSX_PROBE_CACHE; i++) {
		if (rsx_probes[i].id) {
			rsx_probes[i].id = NULL;
			rsx_probes[i].answer = RSX_PROBE_UNKNOWN;
			rsx_probes[i].expires = 0;
		}
	}
}
