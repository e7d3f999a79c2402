/* SPDX-License-Identifier: MIT */
#ifndef RSX_SIG_H
#define RSX_SIG_H

#include <signal.h>

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
 */
struct rsx_sig_seen {
	unsigned int runs;	/* program handlers run on this thread */
	unsigned int intr;	/* of those, the ones without SA_RESTART */
};

extern RSX_TLS struct rsx_sig_seen rsx_sig_thread;
extern int rsx_sig_wrapping;

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
