/* SPDX-License-Identifier: MIT */
#ifndef RSX_SIG_H
#define RSX_SIG_H

#include <signal.h>
#include <stdint.h>

#include "compiler.h"

/*
 * The program's signal handlers, run through a trampoline of ours once the
 * process has an upgraded connection (rsx_sig_wrap_all()).
 *
 * A blocking call on an upgraded socket busy-polls before it sleeps, and
 * must end with EINTR where the kernel's call would have: when a handler
 * without SA_RESTART runs meanwhile.  A handler that runs during a spin
 * leaves no trace in the kernel, so without the trampoline the spin has to
 * hold all signals back (two sigprocmask calls per wait).  With it, the
 * spin watches two per-thread counters instead, and after an EINTR the
 * handler's own SA_RESTART decides, not a guess from all of them.
 *
 * The kernel holds the program's mask and flags with our trampoline (plus
 * SA_SIGINFO); sigaction() and friends report the program's own handler.
 * Only handlers installed through libc are seen: one installed with a raw
 * rt_sigaction system call is not (RSOCKX_WRAP_HANDLERS=0 goes back to
 * holding signals back).  The signals of faults are never wrapped.
 *
 * Wrapping starts with the first socket in the engine's hands (mode 1),
 * the first that a call of the program can find locked: a handler that
 * calls into the socket whose lock its thread holds would take the lock
 * again (a deadlock), or, inside a guard, pass to the kernel's TCP under
 * an upgraded stream.  So while the thread holds a socket lock
 * (rsx_sig_hold, counted by rsx_sock_lock), the trampoline does not run
 * the handler: it sends the signal again to its own thread, siginfo and
 * all, and blocks it in the context it returns to.  The last unlock
 * unblocks exactly those (rsx_sig_release), and the kernel delivers them
 * there, with a real context, outside every lock.  A sleep that drops
 * the lock is such a last unlock: the handler runs as it drops, and the
 * sleep ends as if it had interrupted it (rsx_sig_ran).
 */
struct rsx_sig_seen {
	unsigned int runs;	/* program handlers run on this thread */
	unsigned int intr;	/* of those, the ones without SA_RESTART */
};

extern RSX_TLS struct rsx_sig_seen rsx_sig_thread;
extern int rsx_sig_wrapping;

/*
 * depth: socket locks the thread holds, only ever changed by the thread
 * itself outside handlers (a handler that runs leaves it as it found it).
 * The sets of signals held back are written by the trampoline, with an
 * atomic or (a second signal may come in the middle of the first's), and
 * taken once depth is back at 0, when no trampoline writes them.
 *
 * RSOCKX_WRAP_HANDLERS=0 (rsx_sig_masks): no trampoline to hold a handler
 * back, so the first lock blocks all signals instead (masked, the
 * program's mask kept in mask), two more system calls per locked call,
 * and the last unlock lets them in.
 */
struct rsx_sig_hold {
	unsigned int depth;
	int deferred;		/* something waits for depth 0 */
	int masked;		/* all signals blocked; the program's: mask */
	uint64_t requeued;	/* bit sig-1: pending again, blocked */
	uint64_t lost;		/* could not be queued again: raised later */
	sigset_t mask;
};

extern RSX_TLS struct rsx_sig_hold rsx_sig_hold;
extern int rsx_sig_masks;

void rsx_sig_release(int keep);
void rsx_sig_mask_hold(void);
void rsx_sig_mask_program(sigset_t *mask);
void rsx_sig_mask_held(sigset_t *mask);
int rsx_sig_held_pending(void);

/* Before a socket lock is taken: a signal from now on waits. */
static inline void rsx_sig_hold_enter(void)
{
	if (unlikely(rsx_sig_masks) && !rsx_sig_hold.masked)
		rsx_sig_mask_hold();
	(*(volatile unsigned int *)&rsx_sig_hold.depth)++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/*
 * After a socket lock is dropped: at depth 0, what waited runs now, unless
 * keep: then a sleep right after takes the program's mask itself (ppoll),
 * and the next lock and unlock let the rest in.
 */
static inline void rsx_sig_hold_leave(int keep)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!--(*(volatile unsigned int *)&rsx_sig_hold.depth) &&
	    unlikely(*(volatile int *)&rsx_sig_hold.deferred))
		rsx_sig_release(keep);
}

/*
 * A handler waits for this thread's socket locks: a spin ends for it as
 * for one that ran, and the sleep after it lets it in.
 */
static inline int rsx_sig_waiting(void)
{
	return unlikely(__atomic_load_n(&rsx_sig_hold.requeued,
					__ATOMIC_RELAXED) |
			__atomic_load_n(&rsx_sig_hold.lost, __ATOMIC_RELAXED));
}

/* 1 when every handler the program has runs through the trampoline. */
static inline int rsx_sig_wrapped(void)
{
	return __atomic_load_n(&rsx_sig_wrapping, __ATOMIC_ACQUIRE);
}

/* Handlers run on this very thread: volatile, the loop must re-read. */
static inline void rsx_sig_snap(struct rsx_sig_seen *s)
{
	s->runs = *(volatile unsigned int *)&rsx_sig_thread.runs;
	s->intr = *(volatile unsigned int *)&rsx_sig_thread.intr;
}

static inline int rsx_sig_ran(const struct rsx_sig_seen *s)
{
	return *(volatile unsigned int *)&rsx_sig_thread.runs != s->runs;
}

/* After rsx_sig_ran(): every handler since s had SA_RESTART. */
static inline int rsx_sig_restart(const struct rsx_sig_seen *s)
{
	return *(volatile unsigned int *)&rsx_sig_thread.intr == s->intr;
}

typedef void (*rsx_sighandler)(int);

void rsx_sig_wrap_all(void);
void rsx_sig_fork_prepare(void);
void rsx_sig_fork_done(void);	/* in the parent and in the child */
int rsx_sig_action(int sig, const struct sigaction *act,
		   struct sigaction *old);
rsx_sighandler rsx_sig_legacy(int sig, rsx_sighandler h,
			      rsx_sighandler (*real)(int, rsx_sighandler));
int rsx_sig_interrupt(int sig, int flag, int (*real)(int, int));

#endif
