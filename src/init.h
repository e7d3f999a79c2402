/* SPDX-License-Identifier: MIT */
#ifndef RSX_INIT_H
#define RSX_INIT_H

#include <stdatomic.h>

#include "compiler.h"

/*
 * Process start and end.  rsx_init_once() reads the environment and the
 * rules file; it runs from the shim's constructor, or earlier from the first
 * socket event if another library's constructor gets there first.
 */
int rsx_init_slow(void);
void rsx_fini(void);
void rsx_exec_stats(void);

extern _Atomic int rsx_init_state;

/* 0 when initialised; non-zero while another caller is still at it. */
static inline int rsx_init_once(void)
{
	if (likely(atomic_load_explicit(&rsx_init_state,
					memory_order_acquire) == 2))
		return 0;
	return rsx_init_slow();
}

#endif
