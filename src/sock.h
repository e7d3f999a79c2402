/* SPDX-License-Identifier: MIT */
#ifndef RSX_SOCK_H
#define RSX_SOCK_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * One rsx_sock per open TCP socket description that rsockx tracks.  Every fd
 * that refers to it (dup, dup2, fcntl F_DUPFD, inheritance through fork) holds
 * a reference, like the kernel's struct file.
 *
 * Objects live in a type-stable pool (pool.h): a reader that loaded a pointer
 * from the fd table without a reference may look at an object that was freed
 * and reused meanwhile, but never at unmapped or foreign memory.
 */
enum rsx_sock_kind {
	RSX_SOCK_TCP = 1,
	RSX_SOCK_PRIVATE,	/* an fd of rsockx's own (log file, ...) */
};

enum rsx_sock_role {
	RSX_ROLE_NONE = 0,	/* created, neither listening nor connected */
	RSX_ROLE_LISTENER,
	RSX_ROLE_CONNECTOR,	/* connect() called */
	RSX_ROLE_ACCEPTED,
};

struct rsx_sock {
	_Atomic int ref;
	uint8_t kind;
	uint8_t family;		/* AF_INET or AF_INET6 */
	_Atomic uint8_t role;
};

int rsx_sock_pool_init(uint32_t max);
struct rsx_sock *rsx_sock_new(int kind, int family, int role);
void rsx_sock_put(struct rsx_sock *s);
int rsx_sock_tryget(struct rsx_sock *s);
uint32_t rsx_sock_inuse(void);

static inline void rsx_sock_hold(struct rsx_sock *s)
{
	atomic_fetch_add_explicit(&s->ref, 1, memory_order_relaxed);
}

#endif
