// SPDX-License-Identifier: MIT
/*
 * The pass-through guard's slow path: the thread is inside rsockx, or it is
 * (or was) the parent or the child of a vfork().
 */
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "guard.h"

RSX_TLS unsigned int rsx_guard;

/* getpid() of the thread that called vfork(); a child sees another pid. */
static RSX_TLS pid_t rsx_vfork_parent;

void rsx_guard_vfork_begin(void)
{
	rsx_vfork_parent = getpid();
	rsx_guard |= RSX_GUARD_VFORK;
}

int rsx_guard_slow(void)
{
	if (rsx_guard & RSX_GUARD_VFORK) {
		/* getpid() is a plain syscall since glibc 2.25 (no cache). */
		if (getpid() != rsx_vfork_parent)
			return 1;	/* vfork child: hands off our state */
		rsx_guard &= ~RSX_GUARD_VFORK;
	}
	return rsx_guard != 0;
}

/*
 * A thread of rsockx's own (the probe responder, the readiness watcher):
 * detached, small, and deaf to the program's signals, which must go to
 * the program's threads.  fn holds the guard for good.  Returns -errno.
 */
int rsx_guard_thread(void *(*fn)(void *))
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	ret = pthread_create(&t, &attr, fn, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -ret;
}
