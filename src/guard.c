// SPDX-License-Identifier: MIT
/*
 * The pass-through guard's slow path: the thread is inside rsockx, or it is
 * (or was) the parent or the child of a vfork().
 */
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
