/* SPDX-License-Identifier: MIT */
#ifndef RSX_GUARD_H
#define RSX_GUARD_H

#include <signal.h>

#include "compiler.h"

/*
 * Per-thread pass-through guard.
 *
 * While the low bits are non-zero the thread is inside rsockx itself (or in
 * libibverbs/librdmacm called from rsockx): every intercepted call goes
 * straight to libc, so our dependencies' own socket(), read(), ioctl() and
 * poll() calls never re-enter the engine.
 *
 * RSX_GUARD_VFORK is set just before the real vfork().  The child of vfork()
 * runs on the parent's memory, this very variable included, until it execs or
 * exits: every wrapper it calls must leave our state alone.  The parent comes
 * back with the bit still set; the first wrapper it calls sees that getpid()
 * is the one saved before vfork() and clears the bit (rsx_guard_slow()).
 *
 * One word, so the fast path of every wrapper tests both at once.
 */
#define RSX_GUARD_VFORK 0x80000000u

extern RSX_TLS unsigned int rsx_guard;

int rsx_guard_slow(void);
int rsx_guard_vfork_child(void);
int rsx_guard_thread(void *(*fn)(void *), const char *name);
void rsx_guard_vfork_begin(void);
void rsx_guard_signals(sigset_t *old);
void rsx_guard_signals_end(const sigset_t *old);
int rsx_guard_signalled(const sigset_t *mask);
int rsx_guard_restartable(const sigset_t *mask);

/* Non-zero when the calling thread must pass straight through to libc. */
static inline int rsx_guarded(void)
{
	if (likely(rsx_guard == 0))
		return 0;
	return rsx_guard_slow();
}

static inline void rsx_guard_enter(void)
{
	rsx_guard++;
}

static inline void rsx_guard_leave(void)
{
	rsx_guard--;
}

#endif
