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
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "libc.h"
#include "sig.h"
#include "stats.h"

RSX_TLS struct rsx_sig_seen rsx_sig_thread;
RSX_TLS struct rsx_sig_hold rsx_sig_hold;
int rsx_sig_wrapping;
int rsx_sig_masks;

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

/* Linux has 64 signals; one past them (MIPS) is never held back. */
static uint64_t rsx_sig_bit(int sig)
{
	return sig <= 64 ? 1ull << (sig - 1) : 0;
}

/* The signals of bits (rsx_sig_bit) added to mask, or taken out of it. */
static void rsx_sig_mask_bits(sigset_t *mask, uint64_t bits, int add)
{
	int sig;

	for (sig = 1; bits && sig <= 64 && sig < NSIG; sig++)
		if (bits & rsx_sig_bit(sig)) {
			if (add)
				sigaddset(mask, sig);
			else
				sigdelset(mask, sig);
		}
}

/*
 * SA_RESETHAND: the kernel went back to SIG_DFL as it delivered sig, but
 * the program's handler has not run yet.  The trampoline again, so that
 * the copy queued for later finds it.
 */
static void rsx_sig_rearm(int sig)
{
	struct sigaction cur;
	sigset_t old;

	rsx_sig_lock(&old);
	if (!rsx_real_sigaction(sig, NULL, &cur) &&
	    cur.sa_handler == SIG_DFL) {
		cur.sa_sigaction = rsx_sig_tramp;
		cur.sa_flags |= SA_SIGINFO;
		rsx_real_sigaction(sig, &cur, NULL);
	}
	rsx_sig_unlock(&old);
}

/*
 * The thread holds a socket lock (sig.h): sig waits, pending again on
 * this very thread with the siginfo it came with (rt_tgsigqueueinfo to
 * oneself may carry any si_code), and blocked in the context the
 * trampoline returns to.  One the kernel will not queue again
 * (RLIMIT_SIGPENDING) is raised at release instead, without its siginfo.
 */
static void rsx_sig_defer(int sig, siginfo_t *si, ucontext_t *uc, int flags)
{
	uint64_t bit = rsx_sig_bit(sig);
	int err = errno;
	sigset_t one;

	sigemptyset(&one);
	sigaddset(&one, sig);
	/* under SA_NODEFER the copy would come straight back in */
	pthread_sigmask(SIG_BLOCK, &one, NULL);
	if (flags & SA_RESETHAND)
		rsx_sig_rearm(sig);
	/*
	 * The copy came straight back: the context's mask did not hold it
	 * (valgrind restores a mask of its own).  Raised at release: once.
	 */
	if (__atomic_load_n(&rsx_sig_hold.requeued, __ATOMIC_RELAXED) & bit) {
		__atomic_fetch_or(&rsx_sig_hold.lost, bit, __ATOMIC_RELAXED);
	} else if (!syscall(SYS_rt_tgsigqueueinfo, getpid(),
			    (pid_t)syscall(SYS_gettid), sig, si)) {
		sigaddset(&uc->uc_sigmask, sig);
		__atomic_fetch_or(&rsx_sig_hold.requeued, bit,
				  __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_or(&rsx_sig_hold.lost, bit, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&rsx_sig_hold.deferred, 1, __ATOMIC_RELAXED);
	rsx_stat_inc(RSX_STAT_signals_deferred);
	errno = err;
}

/*
 * The last socket lock is gone: the signals held back come in now, right
 * here (the kernel delivers a pending signal as the mask lets it in).  Only
 * those are unblocked: the rest of the mask is the program's.
 *
 * keep: a sleep that takes the program's mask itself (ppoll) follows, with
 * all signals blocked (rsx_guard_signals): it lets them in, atomically.
 * The signals held back stay marked until a later release (unblocking
 * them again is harmless); the mask of RSOCKX_WRAP_HANDLERS=0 is no
 * longer the lock's: a handler that runs in that sleep and takes a lock
 * saves its own, and after the sleep rsx_guard_signals_end() puts the
 * program's back.
 */
void rsx_sig_release(int keep)
{
	uint64_t requeued, lost;
	sigset_t set;
	int err = errno, sig;

	if (keep) {
		rsx_sig_hold.masked = 0;
		if (!rsx_sig_waiting())
			__atomic_store_n(&rsx_sig_hold.deferred, 0,
					 __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&rsx_sig_hold.deferred, 0, __ATOMIC_RELAXED);
	if (rsx_sig_hold.masked) {
		rsx_sig_hold.masked = 0;
		pthread_sigmask(SIG_SETMASK, &rsx_sig_hold.mask, NULL);
	}
	requeued = __atomic_exchange_n(&rsx_sig_hold.requeued, 0,
				       __ATOMIC_RELAXED);
	lost = __atomic_exchange_n(&rsx_sig_hold.lost, 0, __ATOMIC_RELAXED);
	if (requeued) {
		sigemptyset(&set);
		rsx_sig_mask_bits(&set, requeued, 1);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	}
	for (sig = 1; lost && sig <= 64 && sig < NSIG; sig++)
		if (lost & rsx_sig_bit(sig))
			syscall(SYS_tgkill, getpid(),
				(pid_t)syscall(SYS_gettid), sig);
	errno = err;
}

/* RSOCKX_WRAP_HANDLERS=0, the first socket lock: all signals wait. */
void rsx_sig_mask_hold(void)
{
	int err = errno;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &rsx_sig_hold.mask);
	rsx_sig_hold.masked = 1;
	rsx_sig_hold.deferred = 1;
	errno = err;
}

/*
 * About to drop the last socket lock for a sleep: 1 when a signal held back
 * under it will have its handler run as it drops (RSOCKX_WRAP_HANDLERS=0:
 * rsockx does not see it run), so the sleep must not begin.
 */
int rsx_sig_held_pending(void)
{
	sigset_t p;
	int sig;

	if (!rsx_sig_hold.masked || rsx_sig_hold.depth != 1 || sigpending(&p))
		return 0;
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&p, sig) == 1 &&
		    sigismember(&rsx_sig_hold.mask, sig) == 0)
			return 1;
	return 0;
}

/* A mask to restore while signals wait: with them, until the release. */
void rsx_sig_mask_held(sigset_t *mask)
{
	rsx_sig_mask_bits(mask, __atomic_load_n(&rsx_sig_hold.requeued,
						__ATOMIC_RELAXED), 1);
}

/*
 * A mask saved while signals wait (rsx_guard_signals) without them: put
 * back before they are let in, it would block them for good.
 */
void rsx_sig_mask_program(sigset_t *mask)
{
	rsx_sig_mask_bits(mask, __atomic_load_n(&rsx_sig_hold.requeued,
						__ATOMIC_RELAXED), 0);
}

/*
 * A handler is about to run while signals held back by this thread are
 * still marked: its last unlock is under way (rsx_sig_release), or a sleep
 * lets them in (ppoll).  Unblocked inside the handler they would break its
 * mask (sa_mask, the signal itself): they are taken off the mask the
 * interrupted code goes on with instead, and come in as it does.
 */
static void rsx_sig_hand_over(ucontext_t *uc)
{
	uint64_t requeued, lost;
	int sig;

	requeued = __atomic_exchange_n(&rsx_sig_hold.requeued, 0,
				       __ATOMIC_RELAXED);
	lost = __atomic_exchange_n(&rsx_sig_hold.lost, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&rsx_sig_hold.deferred, 0, __ATOMIC_RELAXED);
	for (sig = 1; sig <= 64 && sig < NSIG; sig++) {
		if (requeued & rsx_sig_bit(sig))
			sigdelset(&uc->uc_sigmask, sig);
		if (lost & rsx_sig_bit(sig))
			syscall(SYS_tgkill, getpid(),
				(pid_t)syscall(SYS_gettid), sig);
	}
}

static void rsx_sig_tramp(int sig, siginfo_t *si, void *uc)
{
	sigset_t old;
	void *h;
	int flags, err;

	rsx_sig_get(sig, &h, &flags);
	if (unlikely(*(volatile unsigned int *)&rsx_sig_hold.depth) &&
	    rsx_sig_is_fn(h) && rsx_sig_bit(sig)) {
		rsx_sig_defer(sig, si, uc, flags);
		return;
	}
	if (unlikely(rsx_sig_waiting())) {
		err = errno;
		rsx_sig_hand_over(uc);
		errno = err;
	}
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
 * At the first socket in the engine's hands (rsx_sock_set_state): from now
 * on the spins count handlers instead of holding signals back, and a
 * handler waits for the socket locks its thread holds.  A process none of
 * whose connections the engine takes (plain TCP for good) keeps its
 * handlers untouched (the library may be preloaded into every program),
 * and its sigaction() takes no lock: one that another thread makes at
 * this very moment, past the test of rsx_sig_wrapping, may stay unwrapped.
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
