// SPDX-License-Identifier: MIT
/* The probe and its responder (probe.h). */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "guard.h"
#include "libc.h"
#include "fdtab.h"
#include "handoff.h"
#include "linger.h"
#include "local.h"
#include "log.h"
#include "oob.h"
#include "probe.h"
#include "stats.h"
#include "upgrade.h"
#include "verbs.h"

/*
 * The private data of a responder's reject: "rsockx", NUL, then 1, or 2
 * from a responder whose program closed the listener a moment ago (socat,
 * nc -l: one connection, then the listener goes) and that still serves
 * the connections it accepted (RSOCKX_OOB_WINDOW_MS): a yes for the
 * connection that asks now, not for the next ones (RSX_PROBE_BRIEF_MS).
 * A client that knows only 1 takes a 2 for no, as before there was one.
 */
static const uint8_t rsx_probe_mark[8] = { 'r', 's', 'o', 'c', 'k', 'x', 0,
					   1 };
#define RSX_PROBE_MARK_BRIEF	2
#define RSX_PROBE_BRIEF_MS	1000

#define RSX_PROBE_CACHE 256
/*
 * Connection requests the RDMA CM holds for the responder: out-of-band
 * requests come one per new connection, and a crowd of them (a client
 * opening hundreds at once) must not be dropped while the thread is busy.
 */
#define RSX_CM_BACKLOG 1024
#define RSX_IB_CM_REJ_CONSUMER 28
/*
 * The kernel's timeouts for resolving the address (the neighbour) and the
 * route: the probe's own deadline is what ends it (rsx_probe_expire).  A
 * fixed half second can run out in a guest that stalls (the test VM under
 * CI's load) before the neighbour answers, and the no is then kept for
 * the negative TTL.
 */
#define RSX_RESOLVE_MS rsx_config.probe_timeout_ms

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
/*
 * Responders whose listener the program closed.  A fork child may still
 * accept on it (a pre-forked server whose master closes its copy), and a
 * connection accepted just before (socat, nc -l: one connection, then the
 * listener goes) may still be asked for out of band: such a responder
 * answers the requests of young connections for RSOCKX_OOB_WINDOW_MS, and
 * probes as long as the port still has a listener.
 */
#define RSX_ORPHANS 64
static struct rsx_orphan {
	struct rdma_cm_id *id;
	int64_t until;		/* ms: requests of young connections */
} rsx_orphans[RSX_ORPHANS];
static struct rdma_cm_id *rsx_orphan_done;	/* to destroy after the event */
static struct rdma_event_channel *rsx_cm_chan;
static int rsx_cm_state;	/* 0 not tried, 1 running, -1 unavailable */
static int rsx_cm_bell = -1;	/* eventfd: work for the thread (oob.h) */

/* An IPv4 or IPv6 address, as long as its family says. */
static int rsx_probe_askable(const struct sockaddr *sa, socklen_t len)
{
	return (sa->sa_family == AF_INET &&
		len >= sizeof(struct sockaddr_in)) ||
	       (sa->sa_family == AF_INET6 &&
		len >= sizeof(struct sockaddr_in6));
}

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

/*
 * A request to a responder whose program closed the listener: 0 when it
 * is answered as usual (the port still listens, or it is an out-of-band
 * request within the window), RSX_PROBE_MARK_BRIEF for a probe within the
 * window, 1 when it is refused as by a port without rsockx; a responder
 * past its time goes after this event.  Under rsx_cm_busy.
 */
static int rsx_orphan_refuses(struct rdma_cm_event *ev)
{
	const uint8_t *d = ev->param.conn.private_data;
	struct rsx_orphan *o = NULL;
	int i;

	for (i = 0; i < RSX_ORPHANS && !o; i++)
		if (rsx_orphans[i].id == ev->listen_id)
			o = &rsx_orphans[i];
	if (!o || rsx_oob_port_listens(rdma_get_local_addr(ev->listen_id)))
		return 0;
	if (rsx_now_ms() < o->until)
		return !d || ev->param.conn.private_data_len < RSX_OOB_MAGIC_LEN ||
		       memcmp(d, rsx_oob_magic, RSX_OOB_MAGIC_LEN) ?
		       RSX_PROBE_MARK_BRIEF : 0;
	pthread_mutex_lock(&rsx_probe_lock);
	o->id = NULL;
	pthread_mutex_unlock(&rsx_probe_lock);
	rsx_orphan_done = ev->listen_id;
	return 1;
}

/*
 * Orphans past their window whose port listens no more: gone.  Returns the
 * CM thread's next wake-up for them (rsx_cm_round()).
 */
static int rsx_orphans_expire(void)
{
	int64_t now = rsx_now_ms();
	struct rdma_cm_id *id;
	int i, next = -1;

	for (i = 0; i < RSX_ORPHANS; i++) {
		id = rsx_orphans[i].id;
		if (!id)
			continue;
		if (now < rsx_orphans[i].until) {
			next = rsx_cm_sooner(next, rsx_orphans[i].until - now);
			continue;
		}
		if (rsx_oob_port_listens(rdma_get_local_addr(id))) {
			next = rsx_cm_sooner(next, RSX_CM_SLOW_MS);
			continue;
		}
		pthread_mutex_lock(&rsx_probe_lock);
		rsx_orphans[i].id = NULL;
		pthread_mutex_unlock(&rsx_probe_lock);
		rsx_rdma.destroy_id(id);
	}
	return next;
}

/* Handles one event; returns a CM id to destroy once it is acknowledged. */
static struct rdma_cm_id *rsx_cm_event(struct rdma_cm_event *ev)
{
	struct rsx_cm_ctx *ctx = ev->id->context;
	struct rdma_cm_id *done = NULL;
	struct rdma_conn_param cp;
	struct rsx_probe *p;
	const uint8_t *d;
	uint8_t mark[8];
	int ok, orphan;

	if (ctx && rsx_oob_owns(ctx))
		return rsx_oob_cm_event(ev);
	if (ctx == &rsx_listener_ctx) {
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			return NULL;
		orphan = rsx_orphan_refuses(ev);
		if (orphan == 1) {
			rsx_rdma.reject(ev->id, NULL, 0);	/* not rsockx */
			return ev->id;
		}
		if (rsx_oob_cm_request(ev->id, ev->param.conn.private_data,
				       ev->param.conn.private_data_len))
			return NULL;	/* answered later (oob.c) */
		/* the request has an id of its own: reject, then destroy */
		memcpy(mark, rsx_probe_mark, sizeof(mark));
		if (orphan == RSX_PROBE_MARK_BRIEF)
			mark[7] = RSX_PROBE_MARK_BRIEF;
		rsx_rdma.reject(ev->id, mark, sizeof(mark));
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
		if (rsx_rdma.resolve_route(ev->id, RSX_RESOLVE_MS))
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
		d = ev->param.conn.private_data;
		ok = ev->status == RSX_IB_CM_REJ_CONSUMER && d &&
		     ev->param.conn.private_data_len >= sizeof(rsx_probe_mark) &&
		     !memcmp(d, rsx_probe_mark, sizeof(rsx_probe_mark) - 1) &&
		     (d[7] == rsx_probe_mark[7] || d[7] == RSX_PROBE_MARK_BRIEF);
		rsx_dbg("probe answered: %s (status %d)", ok ? "rsockx" : "no",
			ev->status);
		done = rsx_probe_done(p, ok ? RSX_PROBE_YES : RSX_PROBE_NO);
		if (ok && d[7] == RSX_PROBE_MARK_BRIEF)
			p->expires = rsx_now_ms() + RSX_PROBE_BRIEF_MS;
		rsx_oob_rescan();	/* clients that waited for it */
		break;
	default:
		/* errors, and a server that accepted: not rsockx */
		done = rsx_probe_done(p, RSX_PROBE_NO);
	}
out:
	pthread_mutex_unlock(&rsx_probe_lock);
	return done;
}

/* Probes that never got an answer count as "no".  1: some still ask. */
static int rsx_probe_expire(void)
{
	int64_t now = rsx_now_ms();
	int i, asking = 0;

	pthread_mutex_lock(&rsx_probe_lock);
	for (i = 0; i < RSX_PROBE_CACHE; i++) {
		if (rsx_probes[i].id && rsx_probes[i].expires < now)
			rsx_probe_finish(&rsx_probes[i], RSX_PROBE_NO);
		asking |= !!rsx_probes[i].id;
	}
	pthread_mutex_unlock(&rsx_probe_lock);
	return asking;
}

/*
 * Every event the channel holds (up to a bound) is handled before the
 * timers run: one event a round, behind the queue pairs a round makes for
 * waiting clients, let answers that had come wait in the channel until
 * their requests expired (800 connections under Soft-RoCE in a loaded VM:
 * 7 answered, then given up).
 */
#define RSX_CM_DRAIN 256

static void rsx_cm_drain(struct pollfd *chan)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *done;
	int n;

	for (n = 0; n < RSX_CM_DRAIN; n++) {
		if (n) {
			chan->revents = 0;
			if (rsx_libc.poll(chan, 1, 0) <= 0 ||
			    !(chan->revents & POLLIN))
				break;
		}
		if (rsx_rdma.get_cm_event(rsx_cm_chan, &ev))
			break;
		done = rsx_cm_event(ev);
		rsx_rdma.ack_cm_event(ev);
		if (done)
			rsx_rdma.destroy_id(done);
		if (rsx_orphan_done)
			rsx_rdma.destroy_id(rsx_orphan_done);
		rsx_orphan_done = NULL;
	}
}

/*
 * The CM thread sleeps without a timeout when nothing of anyone's has a
 * deadline: an idle server or client wakes only for an event, not ten
 * times a second for good (issue 20, item 7).  rsx_cm_idle says that it
 * is about to; a thread that makes work with a deadline afterwards (a
 * lingering close, a probe, a closed listener's window) rings it through
 * rsx_cm_nudge().  The CM thread sets the flag, then looks for work; the
 * other thread makes its work seen, then looks at the flag: one of the
 * two sees the other's store.
 */
static _Atomic int rsx_cm_idle;

void rsx_cm_nudge(void)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&rsx_cm_idle) && atomic_exchange(&rsx_cm_idle, 0))
		rsx_cm_ring();
}

int rsx_cm_sooner(int a, int64_t b)
{
	if (b < 0)
		return a;
	if (b > INT_MAX)
		b = INT_MAX;
	return a < 0 || b < a ? (int)b : a;
}

/*
 * One round of the timers; returns the poll timeout for the next: 0 when
 * work is left right now, RSX_CM_ROUND_MS while something waits on a
 * deadline, the time to the next slow one, or -1 (none: sleep).
 */
static int rsx_cm_round(void)
{
	int next, busy, more;

	next = rsx_local_tick(rsx_now_ms());
	busy = rsx_probe_expire();
	next = rsx_cm_sooner(next, rsx_orphans_expire());
	more = rsx_oob_tick();
	more |= rsx_fork_serve();
	more |= rsx_vfork_serve();
	busy |= rsx_linger_tick();
	if (more)
		return 0;
	busy |= rsx_oob_pending();
	return busy ? rsx_cm_sooner(next, RSX_CM_ROUND_MS) : next;
}

static void *rsx_cm_thread(void *arg)
{
	struct pollfd pfd[3] = {
		{ .fd = rsx_cm_chan ? rsx_cm_chan->fd : -1, .events = POLLIN },
		{ .fd = rsx_cm_bell, .events = POLLIN },
		{ .fd = rsx_local_epfd(), .events = POLLIN },
	};
	int timeout = 0;
	uint64_t v;

	(void)arg;
	rsx_guard_enter();	/* all its calls go straight to libc */
	for (;;) {
		pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
		rsx_libc.poll(pfd, 3, timeout);
		atomic_store(&rsx_cm_idle, 0);
		if (pfd[1].revents)
			while (rsx_libc.read(rsx_cm_bell, &v, sizeof(v)) > 0)
				;
		pthread_mutex_lock(&rsx_cm_busy);
		if (pfd[0].revents)
			rsx_cm_drain(&pfd[0]);
		if (pfd[2].revents)
			rsx_local_serve();
		timeout = rsx_cm_round();
		if (timeout < 0) {
			/* see rsx_cm_idle: the flag, then a last look */
			atomic_store(&rsx_cm_idle, 1);
			timeout = rsx_cm_round();
			if (timeout >= 0)
				atomic_store(&rsx_cm_idle, 0);
		}
		pthread_mutex_unlock(&rsx_cm_busy);
	}
	return NULL;
}

/* The CM thread's bell, the thread started if need be; -1 without one. */
int rsx_cm_bell_fd(void)
{
	int bell;

	pthread_mutex_lock(&rsx_probe_lock);
	rsx_cm_start();
	bell = rsx_cm_state > 0 ? rsx_cm_bell : -1;
	pthread_mutex_unlock(&rsx_probe_lock);
	return bell;
}

/* Wakes the CM thread for work other threads left it (oob.c). */
void rsx_cm_ring(void)
{
	uint64_t v = 1;

	if (rsx_cm_bell >= 0 && rsx_libc.write(rsx_cm_bell, &v, sizeof(v)) < 0)
		rsx_dbg("CM bell: %s", strerror(errno));
}

struct rdma_event_channel *rsx_cm_channel(void)
{
	return rsx_cm_chan;
}

/*
 * The CM event channel and its thread, once per process.  The channel
 * only where an RDMA CM device exists, so a host without RDMA loads
 * nothing; the thread there too where same-host connections may move to
 * shared memory (local.h).  Returns 0 when the CM channel is there.
 */
int rsx_cm_start(void)
{
	int ret, fd;

	if (rsx_cm_state)
		return rsx_cm_state > 0 && rsx_cm_chan ? 0 : -ENODEV;
	rsx_cm_state = -1;
	if (!access("/dev/infiniband/rdma_cm", R_OK | W_OK) &&
	    !rsx_verbs_load()) {
		rsx_guard_enter();
		rsx_cm_chan = rsx_rdma.create_event_channel();
		rsx_guard_leave();
	}
	if (rsx_config.local && rsx_local_start())
		rsx_config.local = 0;
	if (!rsx_cm_chan && !rsx_config.local)
		return -ENODEV;
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd >= 0) {
		rsx_cm_bell = rsx_fd_move_high(fd);
		rsx_fd_set_private(rsx_cm_bell, NULL);
	}
	ret = fd < 0 ? -errno : rsx_guard_thread(rsx_cm_thread, "rsockx-cm");
	if (ret) {
		if (rsx_cm_bell >= 0) {
			rsx_fd_take(rsx_cm_bell);
			rsx_libc.close(rsx_cm_bell);
			rsx_cm_bell = -1;
		}
		if (rsx_cm_chan)
			rsx_rdma.destroy_event_channel(rsx_cm_chan);
		rsx_cm_chan = NULL;
		return ret;
	}
	rsx_cm_state = 1;
	return rsx_cm_chan ? 0 : -ENODEV;
}

/* The CM thread runs (for the CM, or for same-host requests alone). */
int rsx_cm_running(void)
{
	int on;

	pthread_mutex_lock(&rsx_probe_lock);
	rsx_cm_start();
	on = rsx_cm_state > 0;
	pthread_mutex_unlock(&rsx_probe_lock);
	return on;
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

	if (!rsx_probe_askable(sa, len))
		return RSX_PROBE_NO;
	if (unlikely(rsx_config.test_probe_yes))
		return RSX_PROBE_YES;
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
					 RSX_RESOLVE_MS)) {
		/* no RDMA device routes there: known at once */
		rsx_probe_finish(p, RSX_PROBE_NO);
	} else {
		/* from now: loading the libraries may have taken a while */
		p->expires = rsx_now_ms() + rsx_config.probe_timeout_ms;
		rsx_stat_inc(RSX_STAT_probes_sent);
		rsx_cm_nudge();
	}
	rsx_guard_leave();
	answer = p->answer;
out:
	pthread_mutex_unlock(&rsx_probe_lock);
	return answer;
}

/*
 * An out-of-band request to sa was answered by rsockx (oob.c): that is a
 * probe's yes too, for the connections that come next (a probe of its own
 * may have timed out on a slow fabric, or found the listener closed).
 */
void rsx_probe_learn(const struct sockaddr *sa, socklen_t len)
{
	int64_t now = rsx_now_ms();
	struct rsx_probe *p;
	uint8_t addr[16], family;
	uint16_t port;

	if (!rsx_probe_askable(sa, len))
		return;
	rsx_key(sa, addr, &port, &family);
	pthread_mutex_lock(&rsx_probe_lock);
	p = rsx_probe_slot(addr, port, family, now);
	if (p && !p->id) {
		p->answer = RSX_PROBE_YES;
		p->expires = now + 1000 * rsx_config.probe_ttl_s;
	}
	pthread_mutex_unlock(&rsx_probe_lock);
}

/*
 * The first send of a client whose rules say rdma: the probe's answer is
 * waited for (at most its timeout), so that a server known to run rsockx
 * gets the HELLO from the first byte and one that does not never gets it.
 */
int rsx_probe_wait(const struct sockaddr *sa, socklen_t len)
{
	int64_t until = rsx_now_ms() + rsx_config.probe_timeout_ms;
	int answer;

	while ((answer = rsx_probe_lookup(sa, len)) == RSX_PROBE_UNKNOWN &&
	       rsx_cm_state > 0 && rsx_now_ms() < until)
		usleep(1000);
	return answer;
}

/* A new listener on an orphan's address: the orphan gives way. */
static void rsx_orphans_reclaim(const struct sockaddr_storage *ss)
{
	uint8_t a[16], b[16];
	uint16_t pa, pb;
	int i;

	if (rsx_oob_addr(ss, a, &pa))
		return;
	pthread_mutex_lock(&rsx_cm_busy);
	for (i = 0; i < RSX_ORPHANS; i++) {
		if (!rsx_orphans[i].id ||
		    rsx_oob_addr(rdma_get_local_addr(rsx_orphans[i].id), b,
				 &pb) || pa != pb || memcmp(a, b, 16))
			continue;
		rsx_guard_enter();
		rsx_rdma.destroy_id(rsx_orphans[i].id);
		rsx_guard_leave();
		pthread_mutex_lock(&rsx_probe_lock);
		rsx_orphans[i].id = NULL;
		pthread_mutex_unlock(&rsx_probe_lock);
	}
	pthread_mutex_unlock(&rsx_cm_busy);
}

/* A tracked socket listens: answer probes on its address and port. */
void rsx_probe_listen(struct rsx_sock *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rdma_cm_id *id;

	if (rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	rsx_orphans_reclaim(&ss);
	pthread_mutex_lock(&rsx_probe_lock);
	if (s->probe_id || rsx_cm_start())
		goto out;
	rsx_guard_enter();
	if (rsx_rdma.create_id(rsx_cm_chan, &id, &rsx_listener_ctx,
			       RDMA_PS_TCP))
		goto out_guard;
	if (rsx_rdma.bind_addr(id, (struct sockaddr *)&ss) ||
	    rsx_rdma.listen(id, RSX_CM_BACKLOG)) {
		/* e.g. another process of the same port answers already */
		rsx_dbg("fd %d: probe responder not started: %s", fd,
			strerror(errno));
		rsx_rdma.destroy_id(id);
		goto out_guard;
	}
	s->probe_id = id;
	s->probe_pid = getpid();
	s->probe_sid = getsid(0);
	s->probed = 1;
	/* for the requests of connections a forked worker accepts */
	if (rsx_board_create(rsx_cm_bell))
		rsx_dbg("fd %d: no board for the family", fd);
	rsx_dbg("fd %d: answering probes", fd);
out_guard:
	rsx_guard_leave();
out:
	pthread_mutex_unlock(&rsx_probe_lock);
}

/*
 * Responders across fork().  A responder is a CM id of the process that
 * made it: the kernel drops it when that process's CM channel closes, and
 * a fork child cannot use it (other credentials: EACCES); the same-host
 * rendezvous (local.h) is a Unix socket the child closes.  A listener the
 * child inherits with its parent's responder or rendezvous makes the child
 * an heir: once the process that answers is gone (a daemon's parent exits
 * right after fork(); nginx's too), the first descendant that looks
 * answers for the port itself, with a board of its own (the one it
 * inherited rings the bell of the process that is gone, under a number
 * that means nothing in workers it did not fork).  An heir looks where it waits for connections (accept(),
 * epoll_ctl(), poll() and select() of the listener) and after daemon();
 * where that process is still there, a thread of ours waits for it to go
 * (a pidfd): a daemon is often in accept() before its parent has finished
 * exiting, and a probe that comes before anyone answers is told no.  A
 * worker of a pre-forked server keeps that thread asleep for as long as
 * its master lives.  A daemon's master (an heir in another session than
 * the process it inherited from: it called setsid()) also looks before
 * fork() and gives its parent a moment to go, so that the workers it
 * forks share its responder and board rather than race for the port.
 */
static _Atomic int rsx_probe_heirs;	/* one of our listeners may be one */
static _Atomic pid_t rsx_heir_watched;	/* the watcher's process, or 0 */
static int rsx_heir_pidfd = -1;
#define RSX_HEIR_LOOK_MS	200	/* between looks at the process */
#define RSX_HEIR_FORK_MS	200	/* a daemon's parent, before fork() */

/*
 * A pidfd of process pid; -ESRCH when it is gone: EINVAL says that its
 * number names a session or a group still, no process (a daemon's
 * parent that called setsid()).  Without pidfds, kill() tells.
 */
static int rsx_pidfd(pid_t pid)
{
	int fd = syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0)
		return fd;
	if (errno == ESRCH || errno == EINVAL ||
	    (errno == ENOSYS && kill(pid, 0) && errno == ESRCH))
		return -ESRCH;
	return -errno;
}

/* Has process pid exited (a zombie too)?  Waits at most wait_ms. */
static int rsx_pid_gone(pid_t pid, int wait_ms)
{
	struct pollfd p = { .events = POLLIN };
	int gone;

	p.fd = rsx_pidfd(pid);
	if (p.fd < 0)
		return p.fd == -ESRCH;
	gone = rsx_libc.poll(&p, 1, wait_ms) > 0;
	rsx_libc.close(p.fd);
	return gone;
}

static void *rsx_heir_thread(void *arg)
{
	struct pollfd p = { .fd = rsx_heir_pidfd, .events = POLLIN };

	(void)arg;
	rsx_guard_enter();
	while (rsx_libc.poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	rsx_fd_private_close(rsx_heir_pidfd);
	rsx_heir_pidfd = -1;
	atomic_store(&rsx_heir_watched, 0);
	rsx_probe_adopt_all(RSX_ADOPT_NOW | RSX_ADOPT_WATCH);
	return NULL;
}

/*
 * A thread of ours waits for pid to exit (one at a time).  -ESRCH: it is
 * gone already.
 */
static int rsx_heir_watch(pid_t pid)
{
	pid_t none = 0;
	int fd;

	if (!atomic_compare_exchange_strong(&rsx_heir_watched, &none, pid))
		return 0;
	fd = rsx_pidfd(pid);
	if (fd >= 0) {
		rsx_heir_pidfd = rsx_fd_hide(fd);
		if (!rsx_guard_thread(rsx_heir_thread, "rsockx-heir"))
			return 0;
		rsx_fd_private_close(rsx_heir_pidfd);
		rsx_heir_pidfd = -1;
	}
	/* no pidfd here (an old kernel): the next look will tell */
	atomic_store(&rsx_heir_watched, 0);
	return fd == -ESRCH ? fd : 0;
}

/*
 * fd's listener, if its responder's process is gone: ours from now on.
 * how: RSX_ADOPT_WATCH where the program waits for connections,
 * RSX_ADOPT_FORK before fork(), RSX_ADOPT_NOW when that process just
 * exited.  Unlocked: two threads may both look; rsx_probe_listen() and
 * rsx_local_listen() start one responder and one rendezvous.
 */
void rsx_probe_adopt(struct rsx_sock *s, int fd, int how)
{
	int64_t now = rsx_now_ms();
	int err = errno, wait_ms = 0;

	if (!s->probe_heir || atomic_load(&s->role) != RSX_ROLE_LISTENER ||
	    (now < s->probe_adopt_at && !(how & RSX_ADOPT_NOW)))
		return;
	s->probe_adopt_at = now + RSX_HEIR_LOOK_MS;
	/* a daemon's master about to fork its workers: see above */
	if ((how & RSX_ADOPT_FORK) && s->probe_pid == getppid() &&
	    getsid(0) != s->probe_sid) {
		wait_ms = RSX_HEIR_FORK_MS;
		how |= RSX_ADOPT_WATCH;
	}
	if (!s->probe_pid || rsx_pid_gone(s->probe_pid, wait_ms) ||
	    ((how & RSX_ADOPT_WATCH) && rsx_heir_watch(s->probe_pid))) {
		s->probe_heir = 0;
		rsx_board_drop();
		rsx_probe_listen(s, fd);
		if (s->local_listen || !s->probe_pid) {
			s->local_listen = 0;	/* the parent's */
			rsx_local_listen(s, fd);
		}
		if (s->probe_id || s->local_listen) {
			rsx_stat_inc(RSX_STAT_probe_adopted);
			rsx_dbg("fd %d: answering for process %d, gone", fd,
				s->probe_pid);
		}
	}
	errno = err;
}

/*
 * Every heir listener has its look (rsx_probe_adopt()); for a wait that
 * does not name the listener (select()), a scan per RSX_HEIR_LOOK_MS.
 */
void rsx_probe_adopt_all(int how)
{
	static _Atomic int64_t next;
	unsigned int fd, hw = rsx_fdtab_hiwater();
	int64_t now = rsx_now_ms();
	struct rsx_sock *s;
	int left = 0;

	if (how == RSX_ADOPT_WATCH) {
		if (now < atomic_load(&next))
			return;
		atomic_store(&next, now + RSX_HEIR_LOOK_MS);
	}
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP || !s->probe_heir ||
		    !rsx_sock_tryget(s))
			continue;
		rsx_probe_adopt(s, fd, how);
		left |= s->probe_heir;
		rsx_sock_put(s);
	}
	if (!left)
		atomic_store(&rsx_probe_heirs, 0);
}

int rsx_probe_heirs_open(void)
{
	return atomic_load_explicit(&rsx_probe_heirs, memory_order_relaxed);
}

/*
 * A listener this program inherited across exec (track.c): the old
 * program's CM channel and Unix socket closed with the exec, so nobody
 * answers for its port.  The first look answers for it, as an heir whose
 * owner is gone (probe_pid 0).
 */
void rsx_probe_inherit(struct rsx_sock *s)
{
	s->probe_heir = 1;
	s->probe_pid = 0;
	s->probe_adopt_at = 0;
	atomic_store(&rsx_probe_heirs, 1);
}

/* In a fork child: s listens, with its parent's responder or none. */
void rsx_probe_fork_sock(struct rsx_sock *s)
{
	if (s->probe_id || s->local_listen)
		s->probe_heir = 1;	/* s->probe_pid: the parent */
	s->probe_id = NULL;
	s->probe_adopt_at = 0;		/* the child's first look: now */
	if (s->probe_heir)
		atomic_store(&rsx_probe_heirs, 1);
}

/*
 * The listener is gone: its port must stop saying "rsockx here" once
 * nothing listens there any more (rsx_orphans).
 */
void rsx_probe_unlisten(struct rsx_sock *s)
{
	int i;

	if (!s->probe_id)
		return;
	/* its fork children, its young connections: see rsx_orphans */
	pthread_mutex_lock(&rsx_probe_lock);
	for (i = 0; i < RSX_ORPHANS && rsx_orphans[i].id; i++)
		;
	if (i < RSX_ORPHANS) {
		rsx_orphans[i].id = s->probe_id;
		rsx_orphans[i].until = rsx_now_ms() + rsx_config.oob_window_ms;
		s->probe_id = NULL;
	}
	pthread_mutex_unlock(&rsx_probe_lock);
	rsx_cm_nudge();
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
	atomic_store(&rsx_cm_idle, 0);	/* the parent's thread's */
	/*
	 * Our copy of the parent's channel would keep its responders alive
	 * after it exits, mute (their requests queued, never read) and
	 * holding their ports against an heir.  The program has not run
	 * since fork(): the number is still the channel's.
	 */
	if (rsx_cm_chan)
		rsx_libc.close(rsx_cm_chan->fd);
	rsx_cm_chan = NULL;
	/* the heirs' watcher is the parent's (the child looks for itself) */
	if (rsx_heir_pidfd >= 0)
		rsx_fd_private_close(rsx_heir_pidfd);
	rsx_heir_pidfd = -1;
	atomic_store(&rsx_heir_watched, 0);
	memset(rsx_orphans, 0, sizeof(rsx_orphans));	/* the parent's */
	/* the parent's bell stays open where the board or a fork hand-off
	 * rings it */
	if (rsx_cm_bell >= 0 && !rsx_board_have() && !rsx_handoff_have()) {
		rsx_fd_take(rsx_cm_bell);
		rsx_libc.close(rsx_cm_bell);
	}
	rsx_cm_bell = -1;
	rsx_oob_fork_child();
	rsx_local_fork_child();
	for (i = 0; i < RSX_PROBE_CACHE; i++) {
		if (rsx_probes[i].id) {
			rsx_probes[i].id = NULL;
			rsx_probes[i].answer = RSX_PROBE_UNKNOWN;
			rsx_probes[i].expires = 0;
		}
	}
}
