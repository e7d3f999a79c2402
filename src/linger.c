// SPDX-License-Identifier: MIT
/* Sockets the CM thread steps in the background (linger.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "fdtab.h"
#include "libc.h"
#include "linger.h"
#include "log.h"
#include "probe.h"
#include "upgrade.h"

static pthread_mutex_t rsx_linger_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_linger {
	struct rsx_sock *s;	/* a reference for a close; none for a cut */
	struct rsx_conn *cut;	/* a server waiting for its CUTOVER, or NULL */
	int64_t until;		/* ms: a close given up then */
} *rsx_lingers;
static int rsx_linger_cap;
static _Atomic int rsx_nlingers;	/* written under the lock */

/* One more entry, under the lock: 0, or -ENOMEM. */
static int rsx_linger_push(struct rsx_sock *s, struct rsx_conn *cut,
			   int64_t until)
{
	struct rsx_linger *l;
	int cap;

	if (rsx_nlingers == rsx_linger_cap) {
		cap = rsx_linger_cap ? 2 * rsx_linger_cap : 64;
		l = realloc(rsx_lingers, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		rsx_lingers = l;
		rsx_linger_cap = cap;
	}
	rsx_lingers[rsx_nlingers] = (struct rsx_linger){ s, cut, until };
	atomic_fetch_add(&rsx_nlingers, 1);
	rsx_cm_nudge();
	return 0;
}

/* s (under its lock, its reference taken by the caller) lingers. */
int rsx_linger_add(struct rsx_sock *s, int64_t until)
{
	int ret;

	/* the CM thread does the rest: none, no background */
	if (rsx_cm_bell_fd() < 0)
		return -ENODEV;
	pthread_mutex_lock(&rsx_linger_lock);
	ret = rsx_linger_push(s, NULL, until);
	pthread_mutex_unlock(&rsx_linger_lock);
	return ret;
}

/*
 * s (under its lock), a server, waits for c's CUTOVER (conn.h).  No
 * reference: one would make a close think another thread is in a call on
 * s; the socket's last put takes it off the list instead.
 */
int rsx_linger_watch_cut(struct rsx_sock *s, struct rsx_conn *c)
{
	int ret;

	if (rsx_cm_bell_fd() < 0)
		return -ENODEV;
	pthread_mutex_lock(&rsx_linger_lock);
	ret = rsx_linger_push(s, c, 0);
	pthread_mutex_unlock(&rsx_linger_lock);
	if (!ret)
		s->cut_watched = 1;
	return ret;
}

/* s is going (its last reference, s->cut_watched): off the list. */
void rsx_linger_forget(struct rsx_sock *s)
{
	int i;

	pthread_mutex_lock(&rsx_linger_lock);
	for (i = 0; i < rsx_nlingers; i++)
		if (rsx_lingers[i].s == s && rsx_lingers[i].cut) {
			rsx_lingers[i--] = rsx_lingers[rsx_nlingers - 1];
			atomic_fetch_sub(&rsx_nlingers, 1);
		}
	s->cut_watched = 0;
	pthread_mutex_unlock(&rsx_linger_lock);
}

/* A step of l, under its socket's lock: 1 while it goes on. */
static int rsx_linger_step(struct rsx_linger *l, int64_t now)
{
	if (l->cut) {
		if (rsx_sock_cut_step(l->s, l->cut, now))
			return 1;
		l->s->cut_watched = 0;
		return 0;
	}
	return rsx_sock_linger_step(l->s, 0) && now < l->until;
}

/*
 * The CM thread, about every 100 ms: a step of each entry that no other
 * thread is in; those done, or past their time, go.  1: some are left.
 */
int rsx_linger_tick(void)
{
	struct rsx_sock *done[64];
	int64_t now = rsx_now_ms();
	struct rsx_linger *l;
	int i, n = 0, more, cut;

	/* the CM thread's every round: no lock while nothing lingers */
	if (!atomic_load_explicit(&rsx_nlingers, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&rsx_linger_lock);
	for (i = 0; i < rsx_nlingers && n < 64; i++) {
		l = &rsx_lingers[i];
		if (rsx_sock_trylock(l->s))
			continue;
		cut = !!l->cut;
		more = rsx_linger_step(l, now);
		rsx_sock_unlock(l->s);
		if (more)
			continue;
		if (!cut)
			done[n++] = l->s;
		*l-- = rsx_lingers[rsx_nlingers - 1];
		atomic_fetch_sub(&rsx_nlingers, 1);
		i--;
	}
	pthread_mutex_unlock(&rsx_linger_lock);
	/* the last reference of a close: the socket, its descriptor and QP */
	for (i = 0; i < n; i++)
		rsx_sock_put(done[i]);
	return !!atomic_load(&rsx_nlingers);
}

/* Process exit: the lingering closes finish by deadline, with the rest. */
void rsx_linger_exit(int64_t deadline)
{
	struct rsx_sock *s;
	int i;

	pthread_mutex_lock(&rsx_linger_lock);
	for (i = 0; i < rsx_nlingers; i++) {
		s = rsx_lingers[i].s;
		if (rsx_lingers[i].cut || rsx_lock_until(s, deadline))
			continue;
		rsx_sock_linger_step(s, deadline);
		rsx_sock_unlock(s);
	}
	pthread_mutex_unlock(&rsx_linger_lock);
}

/*
 * A fork child: the parent's lingering connections (and its servers'
 * waits for a CUTOVER) are the parent's.  The
 * duplicates it inherited would keep their TCP connections open after the
 * parent's close: they go (the sockets stay, unreachable, as the parent's
 * other connections do in a child).
 */
void rsx_linger_fork_child(void)
{
	int i, k;

	pthread_mutex_init(&rsx_linger_lock, NULL);
	for (i = 0; i < rsx_nlingers; i++) {
		if (rsx_lingers[i].cut)
			continue;	/* the parent's wait for a CUTOVER */
		k = rsx_lingers[i].s->orphan_fd;
		if (k >= 0) {
			rsx_fd_take(k);
			rsx_libc.close(k);
		}
	}
	rsx_nlingers = 0;
}
