/* SPDX-License-Identifier: MIT */
#ifndef RSX_SOCK_H
#define RSX_SOCK_H

#include <pthread.h>
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

/*
 * What the data path does with a socket.  RSX_ST_TCP is the only state in
 * which the shim passes calls straight to libc (mode == 0, one load and one
 * test per call); every other state needs the engine (mode == 1).
 */
enum rsx_state {
	RSX_ST_TCP = 0,		/* plain kernel TCP, for good */
	RSX_ST_CLIENT_NEW,	/* will send HELLO before the first byte */
	RSX_ST_CLIENT_HELLO,	/* HELLO sent, ACK/NAK not seen yet */
	RSX_ST_SERVER_NEW,	/* accepted: a HELLO may be the first bytes */
	RSX_ST_SERVER_STRIP,	/* application spoke first: drop a HELLO */
	RSX_ST_UPGRADED,	/* conn exists (TCP until the cut-over) */
	RSX_ST_FORKED,		/* upgraded in the parent of this fork child */
};

struct rsx_conn;
struct rsx_ready;

/*
 * A registration of the socket in one of the program's epoll sets, as the
 * program made it: when the socket is upgraded, it moves to the socket's
 * readiness stand-in (ready.h) with the same events and data.
 */
#define RSX_EPREGS 4
struct rsx_epreg {
	int epfd;
	int fd;
	uint32_t events;
	uint64_t data;
};

struct rsx_sock {
	_Atomic int ref;
	uint8_t kind;
	uint8_t family;		/* AF_INET or AF_INET6 */
	_Atomic uint8_t role;
	_Atomic uint8_t mode;	/* 0: pass through, 1: engine */
	uint8_t state;		/* enum rsx_state, under lock */
	_Atomic uint8_t nonblock; /* O_NONBLOCK of the open file description */
	uint8_t action;		/* enum rsx_action for connect() */
	_Atomic uint8_t evented; /* in more epoll sets than epreg holds */
	uint8_t rd_shut;
	uint8_t wr_shut;
	int rcvlowat;		/* SO_RCVLOWAT as the program set it (0: 1) */
	int64_t partial_since;	/* ms: a HELLO prefix seen, rest not yet */
	pthread_mutex_t lock;
	struct rsx_conn *conn;
	void *probe_id;		/* listener: its probe responder's CM id */
	struct rsx_ready *rdy;	/* readiness stand-in, once waited on */
	/* threads polling it from a wait (ready.c): freed once none is */
	_Atomic uint32_t spinners;
	struct rsx_ready *rdy_retired;	/* one a poll() may still sleep on */
	uint8_t nepreg;
	struct rsx_epreg epreg[RSX_EPREGS];
	/*
	 * The program closed the socket's last descriptor while a call of
	 * another thread was in it: a private duplicate that the call goes
	 * on with (rsx_sock_orphan()), under lock; -1: none.
	 */
	int orphan_fd;
};

void rsx_sock_set_state(struct rsx_sock *s, int state);

/* Sockets in the engine's hands (mode 1): while there are none, the
 * readiness wrappers need not look at their descriptors at all. */
extern _Atomic int rsx_engine_socks;

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
