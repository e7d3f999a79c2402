// SPDX-License-Identifier: MIT
/*
 * The pass-through guard's slow path: the thread is inside rsockx, or it is
 * (or was) the parent or the child of a vfork().  And signals held back
 * while rsockx busy-polls on the program's behalf.
 */
#include <errno.h>
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

/*
 * Busy polling with signals held back (the spins of upgrade.c and
 * ready.c).  A signal whose handler runs during a spin would leave the
 * program asleep in the wait after it, where the kernel would have ended
 * the program's own call with EINTR: a handler that only sets a flag for
 * the program to see after the call (nginx, redis, Python) would go
 * unseen.  Held back, the signal ends the spin (rsx_guard_signalled), and
 * the wait after it takes the program's mask atomically (ppoll,
 * epoll_pwait) and ends with EINTR at once.
 */
void rsx_guard_signals(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
}

void rsx_guard_signals_end(const sigset_t *old)
{
	int err = errno;

	pthread_sigmask(SIG_SETMASK, old, NULL);
	errno = err;
}

/* A signal that mask lets through is pending. */
int rsx_guard_signalled(const sigset_t *mask)
{
	sigset_t p;
	int sig;

	if (sigpending(&p))
		return 0;
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&p, sig) == 1 && sigismember(mask, sig) == 0)
			return 1;
	return 0;
}
