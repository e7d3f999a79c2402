// SPDX-License-Identifier: MIT
/* Closes that go on in the background (linger.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "clock.h"
#include "fdtab.h"
#include "libc.h"
#include "linger.h"
#include "probe.h"
#include "upgrade.h"

#define RSX_LINGERS 256

static pthread_mutex_t rsx_linger_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_linger {
	struct rsx_sock *s;	/* holds a reference */
	int64_t until;		/* ms: given up then */
} rsx_lingers[RSX_LINGERS];
static _Atomic int rsx_nlingers;	/* written under the lock */

/* s (under its lock, its reference taken by the caller) lingers. */
int rsx_linger_add(struct rsx_sock *s, int64_t until)
{
	int ret = -ENOSPC;

	/* the CM thread does the rest: none, no background */
	if (rsx_cm_bell_fd() < 0)
		return -ENODEV;
	pthread_mutex_lock(&rsx_linger_lock);
	if (rsx_nlingers < RSX_LINGERS) {
		rsx_lingers[rsx_nlingers++] = (struct rsx_linger){ s, until };
		ret = 0;
	}
	pthread_mutex_unlock(&rsx_linger_lock);
	return ret;
}

/*
 * The CM thread, about every 100 ms: a step of each lingering close that
 * no other thread is in; those done, or past their time, go.
 */
void rsx_linger_tick(void)
{
	struct rsx_sock *done[RSX_LINGERS];
	int64_t now = rsx_now_ms();
	struct rsx_linger *l;
	int i, n = 0, more;

	/* the CM thread's every round: no lock while nothing lingers */
	if (!atomic_load_explicit(&rsx_nlingers, memory_order_relaxed))
		return;
	pthread_mutex_lock(&rsx_linger_lock);
	for (i = 0; i < rsx_nlingers; i++) {
		l = &rsx_lingers[i];
		if (pthread_mutex_trylock(&l->s->lock))
			continue;
		more = rsx_sock_linger_step(l->s, 0) && now < l->until;
		pthread_mutex_unlock(&l->s->lock);
		if (more)
			continue;
		done[n++] = l->s;
		*l-- = rsx_lingers[--rsx_nlingers];
		i--;
	}
	pthread_mutex_unlock(&rsx_linger_lock);
	/* the last reference: the socket, its descriptor and QP go */
	for (i = 0; i < n; i++)
		rsx_sock_put(done[i]);
}

/* Process exit: the lingering closes finish by deadline, with the rest. */
void rsx_linger_exit(int64_t deadline)
{
	struct rsx_sock *s;
	int i;

	pthread_mutex_lock(&rsx_linger_lock);
	for (i = 0; i < rsx_nlingers; i++) {
		s = rsx_lingers[i].s;
		if (rsx_lock_until(s, deadline))
			continue;
		rsx_sock_linger_step(s, deadline);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&rsx_linger_lock);
}

/*
 * A fork child: the parent's lingering connections are the parent's.  The
 * duplicates it inherited would keep their TCP connections open after the
 * parent's close: they go (the sockets stay, unreachable, as the parent's
 * other connections do in a child).
 */
void rsx_linger_fork_child(void)
{
	int i, k;

	pthread_mutex_init(&rsx_linger_lock, NULL);
	for (i = 0; i < rsx_nlingers; i++) {
		k = rsx_lingers[i].s->orphan_fd;
		if (k >= 0) {
			rsx_fd_take(k);
			rsx_libc.close(k);
		}
	}
	rsx_nlingers = 0;
}
