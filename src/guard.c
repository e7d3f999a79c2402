// SPDX-License-Identifier: MIT
/*
 * The pass-through guard's slow path: the thread is inside rsockx, or it is
 * (or was) the parent or the child of a vfork().  And signals held back
 * while rsockx busy-polls on the program's behalf.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include "guard.h"
#include "sig.h"

RSX_TLS unsigned int rsx_guard;

/* getpid() of the thread that called vfork(); a child sees another pid. */
static RSX_TLS pid_t rsx_vfork_parent;

void rsx_guard_vfork_begin(void)
{
	rsx_vfork_parent = getpid();
	rsx_guard |= RSX_GUARD_VFORK;
}

/* 1 in the child of a vfork(), which must hand off our state. */
int rsx_guard_vfork_child(void)
{
	if (likely(!(rsx_guard & RSX_GUARD_VFORK)))
		return 0;
	/* getpid() is a plain syscall since glibc 2.25 (no cache). */
	if (getpid() != rsx_vfork_parent)
		return 1;
	rsx_guard &= ~RSX_GUARD_VFORK;
	return 0;
}

int rsx_guard_slow(void)
{
	return rsx_guard_vfork_child() || rsx_guard != 0;
}

struct rsx_thread_start {
	void *(*fn)(void *);
	const char *name;
	sem_t running;
};

static void *rsx_thread_main(void *arg)
{
	struct rsx_thread_start *ts = arg;
	void *(*fn)(void *) = ts->fn;

	/* top -H, ps -L and /proc tell our threads from the program's */
	prctl(PR_SET_NAME, ts->name, 0, 0, 0);
	sem_post(&ts->running);	/* ts is gone after this */
	return fn(NULL);
}

/*
 * A thread of rsockx's own (the probe responder, the readiness watcher):
 * detached, small, and deaf to the program's signals, which must go to
 * the program's threads, and named (at most 15 characters, "rsockx-...").
 * fn holds the guard for good.  Returns -errno.
 *
 * Returns only once the thread runs fn: until then it may hold locks of a
 * runtime that starts threads (ASan registers each new thread under a
 * lock), and a fork() of the program right after, such as a pre-forking
 * server's right after listen(), would leave the child a lock nobody will
 * release.
 */
int rsx_guard_thread(void *(*fn)(void *), const char *name)
{
	struct rsx_thread_start ts = { .fn = fn, .name = name };
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int ret;

	if (sem_init(&ts.running, 0, 0))
		return -errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	ret = pthread_create(&t, &attr, rsx_thread_main, &ts);
	pthread_attr_destroy(&attr);
	while (!ret && sem_wait(&ts.running) && errno == EINTR)
		;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	sem_destroy(&ts.running);
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

	/* held back by a socket lock already: the program's mask is kept */
	if (rsx_sig_hold.masked) {
		*old = rsx_sig_hold.mask;
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	/* the program's mask, not one with signals held back under a lock */
	if (unlikely(rsx_sig_hold.requeued))
		rsx_sig_mask_program(old);
}

void rsx_guard_signals_end(const sigset_t *old)
{
	int err = errno;

	/*
	 * Under a socket lock that holds them back: its last unlock.  Also
	 * after a sleep of rsx_sleep(), whose lock, taken again with all
	 * signals blocked, kept that for the program's mask.
	 */
	if (rsx_sig_hold.masked) {
		rsx_sig_hold.mask = *old;
		return;
	}
	if (unlikely(rsx_sig_waiting())) {
		/* those still wait for the last unlock (rsx_sig_release) */
		sigset_t m = *old;

		rsx_sig_mask_held(&m);
		pthread_sigmask(SIG_SETMASK, &m, NULL);
	} else {
		pthread_sigmask(SIG_SETMASK, old, NULL);
	}
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

/*
 * A sleep that stands for a blocking recv/send/accept of the program ended
 * with EINTR: some handler ran.  The kernel restarts such a call after a
 * handler with SA_RESTART (signal(7)), unless the socket has a timeout.
 * Which signal it was is not known here, so the call is restarted only
 * when every signal that mask (the program's; NULL: the thread's) lets
 * through is caught by an SA_RESTART handler, ignored, or left at its
 * default: then no handler could have asked for EINTR.  glibc's internal
 * signals are refused by sigaction() and not looked at, nor are the
 * signals of faults, which come from the faulting thread's own code, never
 * into a sleep: their handlers (crash reporters, the sanitizers') seldom
 * have SA_RESTART.  Only after an EINTR: up to 64 system calls.
 */
static int rsx_fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
	       sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

int rsx_guard_restartable(const sigset_t *mask)
{
	struct sigaction sa;
	sigset_t cur;
	int sig;

	if (!mask) {
		if (pthread_sigmask(SIG_BLOCK, NULL, &cur))
			return 0;
		mask = &cur;
	}
	for (sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || rsx_fault_signal(sig) ||
		    sigismember(mask, sig) == 1 || sigaction(sig, NULL, &sa))
			continue;
		/* one union: SIG_DFL and SIG_IGN whatever SA_SIGINFO says */
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return 0;
	}
	return 1;
}
