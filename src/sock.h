/* SPDX-License-Identifier: MIT */
#ifndef RSX_SOCK_H
#define RSX_SOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "sig.h"

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
	/*
	 * Out of band (oob.h): TCP, every byte counted, every call
	 * non-blocking under the lock, so that the connection can move to a
	 * QP at any moment, byte-exact.
	 */
	RSX_ST_CLIENT_WAIT,	/* the probe is out: rsockx at the server? */
	RSX_ST_CLIENT_OOB,	/* our request is out (s->conn made) */
	RSX_ST_SERVER_WAIT,	/* accepted: a request may come (oob_until) */
};

/* The sums' start (crc.h): of counted bytes, for the proof (conn.h). */
#define RSX_SUM_INIT 0xffffffffull

/* The states in which bytes are counted for an out-of-band upgrade. */
static inline int rsx_state_counted(int state)
{
	return state >= RSX_ST_CLIENT_WAIT;
}

struct rsx_conn;
struct rsx_ready;
struct rsx_oob_pend;

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
	/*
	 * Listener: the process whose responder (and same-host rendezvous)
	 * answers for it, and its session; probe_heir: that was an ancestor,
	 * across fork(), which this process takes over from once it is gone
	 * (rsx_probe_adopt()).
	 */
	pid_t probe_pid;
	pid_t probe_sid;
	uint8_t probe_heir;
	int64_t probe_adopt_at;	/* ms: the next look at probe_pid */
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
	uint8_t lingered;	/* closed, its end left to the background */
	uint8_t cut_watched;	/* a server's wait for CUTOVER (linger.h) */

	/* out of band (oob.h), under lock unless said */
	uint8_t oob_ok;		/* a request for it may come (server) */
	uint8_t shared;		/* forked: another process has it too */
	int16_t share_slot;	/* ... and how many still do (share.h) */
	uint32_t share_seq;
	uint8_t probed;		/* listener: the family answers its probes */
	uint8_t local;		/* client: the server is on this host (local.h) */
	uint8_t local_listen;	/* listener: asked on its Unix socket too */
	uint8_t inband_try;	/* rules say rdma: the first send may HELLO;
				   2 while it waits for the probe */
	uint16_t peer_port;	/* network order */
	uint16_t local_port;	/* network order */
	uint8_t peer_addr[16];	/* IPv4 as ::ffff:a.b.c.d */
	int64_t oob_until;	/* ms: SERVER_WAIT ends (TCP for good) */
	uint64_t tcp_tx;	/* application bytes sent on TCP so far */
	uint64_t tcp_rx;	/* ... received */
	uint64_t tx_sum;	/* CRC-32C of tcp_tx's bytes (crc.h) */
	uint64_t rx_sum;	/* ... of tcp_rx's */
	_Atomic uint32_t pollers; /* threads in poll/select on the TCP fd */
	_Atomic uint8_t cm_knock; /* the CM thread waits for the lock */
	_Atomic uint8_t vfork_exec; /* a vfork child passes it on (forkexec.c) */
	uint32_t gen;		/* tells this socket from a later one */
	uint32_t board_seen;	/* the board's news seen (board.h) */
	struct rsx_oob_pend *oob; /* an answer the program's thread applies */
	int wake_fd;		/* eventfd: wakes sleepers without a conn */
	uint16_t wake_users;	/* ... that sleep on it now */
	/* fork: its slot on the page of the process with the QP (handoff.h) */
	int16_t ho_slot;
	uint32_t ho_seq;
	void *ho_page;
};

void rsx_sock_set_state(struct rsx_sock *s, int state);

/* Sockets in the engine's hands (mode 1): while there are none, the
 * readiness wrappers need not look at their descriptors at all. */
extern _Atomic int rsx_engine_socks;
/* Sockets in CLIENT_WAIT: while there are none, the CM thread need not
 * look for them. */
extern _Atomic int rsx_client_waits;

int rsx_sock_pool_init(uint32_t max);
struct rsx_sock *rsx_sock_new(int kind, int family, int role);
void rsx_sock_put(struct rsx_sock *s);
int rsx_sock_tryget(struct rsx_sock *s);
uint32_t rsx_sock_inuse(void);

/*
 * s->lock, for a thread that a signal handler of the program may interrupt
 * (every s->lock of the data path takes these): while it holds one, the
 * program's handlers wait (sig.h), as a handler that called into s would
 * take the lock again.  Counted before the lock is taken, so that no
 * signal finds it taken and uncounted.
 */
static inline void rsx_sock_lock(struct rsx_sock *s)
{
	rsx_sig_hold_enter();
	pthread_mutex_lock(&s->lock);
}

/*
 * The CM thread's turn: a program thread that sends or reads counted TCP
 * bytes in a tight loop releases the lock only for an instant between its
 * calls and, on two cores, takes it again before a waiter is scheduled;
 * an answer that made the socket wait for that took up to a second (a
 * gigabyte of a loopback stream).  So the CM thread knocks, and the
 * program thread steps aside (rsx_counted_io).
 */
static inline void rsx_sock_lock_cm(struct rsx_sock *s)
{
	atomic_store(&s->cm_knock, 1);
	rsx_sock_lock(s);
	atomic_store(&s->cm_knock, 0);
}

/* 0 when taken, like pthread_mutex_trylock(). */
static inline int rsx_sock_trylock(struct rsx_sock *s)
{
	int ret;

	rsx_sig_hold_enter();
	ret = pthread_mutex_trylock(&s->lock);
	if (ret)
		rsx_sig_hold_leave(0);
	return ret;
}

static inline void rsx_sock_unlock(struct rsx_sock *s)
{
	pthread_mutex_unlock(&s->lock);
	rsx_sig_hold_leave(0);
}

/* For a sleep that takes the program's mask atomically (ppoll), right
 * after: signals held back stay so until it does. */
static inline void rsx_sock_unlock_masked(struct rsx_sock *s)
{
	pthread_mutex_unlock(&s->lock);
	rsx_sig_hold_leave(1);
}

static inline void rsx_sock_hold(struct rsx_sock *s)
{
	atomic_fetch_add_explicit(&s->ref, 1, memory_order_relaxed);
}

#endif
