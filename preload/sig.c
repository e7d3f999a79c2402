// SPDX-License-Identifier: MIT
/*
 * Signal actions: sigaction and the older calls that set a handler.  glibc
 * sets actions past the PLT inside these (signal() does not call our
 * sigaction()), so each is wrapped.  Not even a thread inside rsockx
 * passes straight through: a handler that runs there and sets an action
 * must still go behind the trampoline.  A vfork() child must leave
 * the table of handlers, which it shares with its parent, alone.
 */
#include "shim.h"
#include "sig.h"

static int rsx_sigaction(const char *name, int sig,
			 const struct sigaction *act, struct sigaction *old)
{
	rsx_trace_call_early(name, -1);
	if (rsx_guard_vfork_child())
		return RSX_REAL(sigaction)(sig, act, old);
	return rsx_sig_action(sig, act, old);
}

RSX_EXPORT int sigaction(int sig, const struct sigaction *act,
			 struct sigaction *old)
{
	return rsx_sigaction("sigaction", sig, act, old);
}

RSX_EXPORT int __sigaction(int sig, const struct sigaction *act,
			   struct sigaction *old);
RSX_EXPORT int __sigaction(int sig, const struct sigaction *act,
			   struct sigaction *old)
{
	return rsx_sigaction("__sigaction", sig, act, old);
}

#define RSX_LEGACY(name, real)						\
	RSX_EXPORT rsx_sighandler name(int sig, rsx_sighandler h);	\
	RSX_EXPORT rsx_sighandler name(int sig, rsx_sighandler h)	\
	{								\
		rsx_trace_call_early(#name, -1);			\
		if (rsx_guard_vfork_child())				\
			return RSX_REAL(real)(sig, h);			\
		return rsx_sig_legacy(sig, h, RSX_REAL(real));		\
	}

/* bsd_signal and ssignal are signal; __sysv_signal is sysv_signal. */
RSX_LEGACY(signal, signal)
RSX_LEGACY(bsd_signal, signal)
RSX_LEGACY(ssignal, signal)
RSX_LEGACY(sysv_signal, sysv_signal)
RSX_LEGACY(__sysv_signal, sysv_signal)
RSX_LEGACY(sigset, sigset)

RSX_EXPORT int siginterrupt(int sig, int flag)
{
	rsx_trace_call_early("siginterrupt", -1);
	if (rsx_guard_vfork_child())
		return RSX_REAL(siginterrupt)(sig, flag);
	return rsx_sig_interrupt(sig, flag, RSX_REAL(siginterrupt));
}
