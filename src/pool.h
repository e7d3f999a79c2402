/* SPDX-License-Identifier: MIT */
#ifndef RSX_POOL_H
#define RSX_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A type-stable object pool, usable from signal handlers.
 *
 * socket() and accept() are async-signal-safe, so the objects they create
 * cannot come from malloc().  The pool reserves address space for every
 * object it may ever hold (one per possible fd) with MAP_NORESERVE, hands out
 * slots with a bump index, and recycles freed ones through a lock-free stack.
 * Freed memory is never unmapped and always holds an object of the same type,
 * so a thread that loaded a pointer just before another thread freed it still
 * reads a well-formed object (and then notices that it lost the race).
 *
 * The stack head packs a generation count with the slot index so that a
 * compare-and-swap cannot succeed on a head that was popped and pushed back
 * in between (ABA).
 */
struct rsx_pool {
	char *base;
	size_t objsize;
	uint32_t max;
	_Atomic uint32_t bump;		/* slots ever handed out */
	_Atomic uint64_t head;		/* generation << 32 | (index + 1) */
	_Atomic uint32_t *next;		/* free-stack links, one per slot */
	_Atomic uint32_t inuse;
};

int rsx_pool_init(struct rsx_pool *p, size_t objsize, uint32_t max);
void rsx_pool_destroy(struct rsx_pool *p);
void *rsx_pool_get(struct rsx_pool *p);
void rsx_pool_put(struct rsx_pool *p, void *obj);

#endif
