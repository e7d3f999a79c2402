/* SPDX-License-Identifier: MIT */
#ifndef RSX_FDTAB_H
#define RSX_FDTAB_H

#include <stdatomic.h>
#include <stddef.h>

#include "compiler.h"
#include "sock.h"

/*
 * fd -> rsx_sock map, one slot per possible descriptor.
 *
 * Sized from RLIMIT_NOFILE's hard limit (bounded by fs.nr_open), so every fd
 * a process can have fits, 65535 and above included.  The slots are reserved
 * with MAP_NORESERVE and created only when the first TCP socket is tracked: a
 * process that never opens one pays for nothing.
 *
 * Writers swap slots atomically; a descriptor's slot is cleared before the
 * real close() so that a number reused by the kernel never inherits our state.
 */
struct rsx_fdtab {
	_Atomic(struct rsx_sock *) *slot;
	_Atomic unsigned int size;	/* 0 until the table exists */
	_Atomic unsigned int hiwater;	/* 1 + highest fd ever installed */
};

extern struct rsx_fdtab rsx_fdtab;

/* The object behind fd, without a reference (see sock.h); NULL if none. */
static inline struct rsx_sock *rsx_fd_peek(int fd)
{
	unsigned int size = atomic_load_explicit(&rsx_fdtab.size,
						 memory_order_acquire);

	if ((unsigned int)fd >= size)
		return NULL;
	return atomic_load_explicit(&rsx_fdtab.slot[fd], memory_order_acquire);
}

int rsx_fdtab_init(void);
int rsx_fdtab_ready(void);
unsigned int rsx_fdtab_hiwater(void);
int rsx_fd_install(int fd, struct rsx_sock *s);
struct rsx_sock *rsx_fd_take(int fd);
int rsx_fd_restore(int fd, struct rsx_sock *s);
void rsx_fd_clear(int fd);
struct rsx_sock *rsx_fd_get(int fd);

/*
 * rsockx's own descriptors live at or above rsx_fd_private_base(), are
 * marked in the table, and are protected against programs that close or
 * dup2() over every descriptor they did not open.
 */
int rsx_fd_private_base(void);
void rsx_fd_set_private(int fd, int *owner);
int rsx_fd_is_private(int fd);
int rsx_fd_private_relocate(int fd);
void rsx_fd_private_drop(int fd);
void rsx_fd_private_close(int fd);
int rsx_fd_private_next(int from);
int rsx_fd_move_high(int fd);
int rsx_fd_hide(int fd);

#endif
