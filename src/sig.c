// SPDX-License-Identifier: MIT
/*
 * The program's signal handlers behind a trampoline that counts them (see
 * sig.h for why).
 *
 * Every entry point may run in a signal handler (sigaction() is
 * async-signal-safe): no locks that a handler could find taken on its own
 * thread, no allocation.  Changes hold all signals back on the changing
 * thread and take a spin lock against other threads; each signal's entry
 * is read under a sequence count, as the trampoline may run on any thread
 * while another one changes it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "libc.h"
#include "sig.h"

RSX_TLS struct rsx_sig_seen rsx_sig_thread;
int rsx_sig_wrapping;

/* What the program asked for, while the kernel holds the trampoline. */
struct rsx_sig_ent {
	unsigned int seq;	/* odd while it changes */
	int flags;		/* the program's sa_flags */
	void *handler;		/* its sa_handler or sa_sigaction */
};

static struct rsx_sig_ent rsx_sig_tab[NSIG];
static int rsx_sig_lock_word;

static void rsx_sig_tramp(int sig, siginfo_t *si, void *uc);

/* The signals of faults come from the faulting code itself, never into a
 * spin; their handlers (crash reporters, the sanitizers') are left alone. */
static int rsx_sig_wrappable(int sig)
{
	return sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP &&
	       sig != SIGSEGV && sig != SIGBUS && sig != SIGFPE &&
	       sig != SIGILL && sig != SIGTRAP && sig != SIGSYS;
}

static int rsx_sig_is_fn(void *h)
{
	return h != (void *)SIG_DFL && h != (void *)SIG_IGN &&
	       h != (void *)SIG_ERR && h != (void *)rsx_sig_tramp;
}

static int rsx_real_sigaction(int sig, const struct sigaction *act,
			      struct sigaction *old)
{
	if (!rsx_libc.sigaction)
		rsx_libc_resolve();	/* before any constructor ran */
	return rsx_libc.sigaction(sig, act, old);
}

static void rsx_sig_lock(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	while (__atomic_exchange_n(&rsx_sig_lock_word, 1, __ATOMIC_ACQUIRE))
		;
}

static void rsx_sig_unlock(const sigset_t *old)
{
	int err = errno;

	__atomic_store_n(&rsx_sig_lock_word, 0, __ATOMIC_RELEASE);
	pthread_sigmask(SIG_SETMASK, old, NULL);
	errno = err;
}

/*
 * Across fork(): a change under way in another thread would leave the
 * child a lock nobody releases, or an entry half written.  The mask saved
 * is the forking thread's own, which the child's one thread inherits.
 */
static RSX_TLS sigset_t rsx_sig_fork_mask;

void rsx_sig_fork_prepare(void)
{
	rsx_sig_lock(&rsx_sig_fork_mask);
}

void rsx_sig_fork_done(void)
{
	rsx_sig_unlock(&rsx_sig_fork_mask);
}

/* Lock held. */
static void rsx_sig_set(int sig, void *handler, int flags)
{
	struct rsx_sig_ent *e = &rsx_sig_tab[sig];

	__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->handler, handler, __ATOMIC_RELAXED);
	__atomic_store_n(&e->flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE);
}

static void rsx_sig_get(int sig, void **handler, int *flags)
{
	struct rsx_sig_ent *e = &rsx_sig_tab[sig];
	unsigned int seq;

	do {
		seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		*handler = __atomic_load_n(&e->handler, __ATOMIC_RELAXED);
		*flags = __atomic_load_n(&e->flags, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) || seq != __atomic_load_n(&e->seq,
						      __ATOMIC_RELAXED));
}

static void rsx_sig_tramp(int sig, siginfo_t *si, void *uc)
{
	sigset_t old;
	void *h;
	int flags;

	rsx_sig_get(sig, &h, &flags);
	/* counted first: the handler may longjmp out */
	rsx_sig_thread.runs++;
	if (!(flags & SA_RESTART))
		rsx_sig_thread.intr++;
	if (flags & SA_RESETHAND) {
		/* the kernel has gone back to SIG_DFL already */
		rsx_sig_lock(&old);
		rsx_sig_set(sig, (void *)SIG_DFL, 0);
		rsx_sig_unlock(&old);
	}
	if (!rsx_sig_is_fn(h))
		return;		/* changed under way: the kernel has it now */
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, si, uc);
	else
		((void (*)(int))h)(sig);
}

/*
 * The kernel's action for sig, taken over: a handler of the program goes
 * behind the trampoline, with its mask and flags.  Lock held.
 */
static void rsx_sig_adopt(int sig)
{
	struct sigaction cur;
	void *h;
	int flags;

	if (rsx_real_sigaction(sig, NULL, &cur))
		return;
	h = (void *)cur.sa_handler;
	if (h == (void *)rsx_sig_tramp) {
		/* siginterrupt() changed the flags behind the trampoline */
		rsx_sig_get(sig, &h, &flags);
		rsx_sig_set(sig, h, (cur.sa_flags & ~SA_SIGINFO) |
				    (flags & SA_SIGINFO));
		return;
	}
	rsx_sig_set(sig, h, cur.sa_flags);
	if (!rsx_sig_is_fn(h))
		return;
	cur.sa_sigaction = rsx_sig_tramp;
	cur.sa_flags |= SA_SIGINFO;
	rsx_real_sigaction(sig, &cur, NULL);	/* cannot fail: it was read */
}

/*
 * At the first upgrade: from now on the spins count handlers instead of
 * holding signals back.  A process that never upgrades keeps its handlers
 * untouched (the library may be preloaded into every program), and its
 * sigaction() takes no lock: one that another thread makes at this very
 * moment, past the test of rsx_sig_wrapping, may stay unwrapped.
 */
void rsx_sig_wrap_all(void)
{
	sigset_t old;
	int sig;

	if (rsx_sig_wrapped())
		return;
	rsx_sig_lock(&old);
	if (!rsx_sig_wrapping) {
		for (sig = 1; sig < NSIG; sig++)
			if (rsx_sig_wrappable(sig))
				rsx_sig_adopt(sig);
		__atomic_store_n(&rsx_sig_wrapping, 1, __ATOMIC_RELEASE);
	}
	rsx_sig_unlock(&old);
}

/* The program's view of an action the kernel holds. Lock held. */
static void rsx_sig_report(int sig, struct sigaction *sa)
{
	void *h;
	int flags;

	if (sa->sa_sigaction != rsx_sig_tramp)
		return;
	rsx_sig_get(sig, &h, &flags);
	sa->sa_sigaction = (void (*)(int, siginfo_t *, void *))h;
	sa->sa_flags = (sa->sa_flags & ~SA_SIGINFO) | (flags & SA_SIGINFO);
}

/* sigaction() of the program; -1 and errno like libc's. */
int rsx_sig_action(int sig, const struct sigaction *act,
		   struct sigaction *old)
{
	struct sigaction k, prev;
	sigset_t mask;
	void *h = act ? (void *)act->sa_handler : NULL;
	void *was;
	int ret, was_flags;

	if (!rsx_sig_wrappable(sig) || !rsx_sig_wrapped())
		return rsx_real_sigaction(sig, act, old);
	rsx_sig_lock(&mask);
	if (!act || h == (void *)rsx_sig_tramp) {
		/* a query, or an action read past us (raw) put back */
		ret = rsx_real_sigaction(sig, act, old);
		if (!ret && old)
			rsx_sig_report(sig, old);
		goto out;
	}
	ret = rsx_real_sigaction(sig, NULL, &prev);
	if (ret)
		goto out;
	rsx_sig_report(sig, &prev);	/* before the entry changes */
	rsx_sig_get(sig, &was, &was_flags);
	if (rsx_sig_is_fn(h)) {
		/* the entry first: the trampoline runs once the kernel has it */
		rsx_sig_set(sig, h, act->sa_flags);
		k = *act;
		k.sa_sigaction = rsx_sig_tramp;
		k.sa_flags |= SA_SIGINFO;
		ret = rsx_real_sigaction(sig, &k, NULL);
	} else {
		/* SIG_DFL, SIG_IGN: the kernel first, then the entry */
		ret = rsx_real_sigaction(sig, act, NULL);
		if (!ret)
			rsx_sig_set(sig, h, act->sa_flags);
	}
	if (ret)
		rsx_sig_set(sig, was, was_flags);
	else if (old)
		*old = prev;
out:
	rsx_sig_unlock(&mask);
	return ret;
}

/* The action libc's own call set for sig, taken over under the lock. */
static void rsx_sig_readopt(int sig)
{
	sigset_t mask;

	rsx_sig_lock(&mask);
	rsx_sig_adopt(sig);
	rsx_sig_unlock(&mask);
}

/*
 * signal(), sigset() and the like: libc's own semantics (sigset() changes
 * the thread's mask too), so libc's call runs without our lock, and the
 * action it set is adopted after.  A signal in between runs the program's
 * handler uncounted, as one set by a raw system call would.
 */
rsx_sighandler rsx_sig_legacy(int sig, rsx_sighandler h,
			      rsx_sighandler (*real)(int, rsx_sighandler))
{
	rsx_sighandler ret;
	void *prev;
	int flags;

	if (!rsx_sig_wrappable(sig) || !rsx_sig_wrapped())
		return real(sig, h);
	rsx_sig_get(sig, &prev, &flags);
	ret = real(sig, h);
	if ((void *)ret == (void *)rsx_sig_tramp)
		ret = (rsx_sighandler)prev;
	if (ret != SIG_ERR)
		rsx_sig_readopt(sig);
	return ret;
}

int rsx_sig_interrupt(int sig, int flag, int (*real)(int, int))
{
	int ret = real(sig, flag);

	if (!ret && rsx_sig_wrappable(sig) && rsx_sig_wrapped())
		rsx_sig_readopt(sig);
	return ret;
}
