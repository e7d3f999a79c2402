/* SPDX-License-Identifier: MIT */
#ifndef RSX_READY_H
#define RSX_READY_H

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "sock.h"

/*
 * Readiness of upgraded sockets for poll, select and epoll.
 *
 * Bytes that arrive in a ring do not make the kernel socket readable, and a
 * full ring does not make it unwritable.  So an upgraded socket that the
 * program waits on gets a stand-in: a private AF_UNIX datagram socket pair
 * (x, y) whose end x the kernel reports exactly as the connection stands:
 *
 *   readable   a one-byte datagram from y waits in x (taken back when the
 *              connection has nothing more to read)
 *   writable   x's send buffer (shrunk to the minimum) is not full: one
 *              1 KiB datagram from x to y, waiting unread in y, makes x
 *              unwritable until y takes it back
 *   RDHUP      shutdown(x, SHUT_RD): EOF, for good
 *   HUP        shutdown(x, SHUT_RDWR): the connection broke
 *
 * poll and select wait on x in place of the socket; epoll sets get x
 * registered with the program's own events and data in place of the socket
 * (so edge-triggered, one-shot, exclusive and nested epoll keep the
 * kernel's semantics).  A client waiting for the answer to its HELLO gets
 * x as soon as it sent it: the answer itself must not wake the program,
 * which would find nothing to read (some, like wrk, take that as an
 * error).  One thread per process (the watcher) sleeps on the completion
 * channels (one per RDMA device) and TCP ends of these connections and
 * brings x up to date when something arrives; every call that changes a
 * connection does the same on its way out.
 *
 * On shared memory, x is not of a socket pair but bound to an abstract
 * address (rsx_shm_wake_addr: x for x, y for y, with a random xtok), y
 * connected to it, so that the peer's process can send to x as well: a
 * program that waits in epoll for input alone, on a non-blocking socket,
 * is woken by the writer itself (rsx_ready_direct, shm.h), one thread
 * wakeup where the watcher makes two.  Such a byte is not counted in
 * "in"; the connection's woken count tells that it came (r->unsure: what
 * x shows is not known, so it is made so), and a read that finds nothing
 * takes back whatever another process may have sent.
 */
struct rsx_ready {
	int x;			/* what the program's waits see */
	int y;			/* our end */
	int tcp;		/* private dup of the TCP socket, for the watcher */
	uint32_t slot;		/* in the watcher's table */
	uint8_t in;		/* x shows readable */
	uint8_t blocked;	/* x shows unwritable */
	uint8_t rdhup;
	uint8_t hup;
	uint8_t swapped;	/* the program's epoll registrations are on x */
	uint8_t watch_out;	/* the watcher hears of room in TCP, too */
	uint8_t told;		/* readable, told to an epoll wait, not on x */
	uint8_t unsure;		/* x may hold bytes not of ours: show anew */
	uint8_t polled;		/* a poll or select waited on x: no direct */
	uint32_t seen;		/* backstop round a program thread looked in */
	uint32_t woken;		/* the connection's count of direct wakes seen */
	uint64_t xtok;		/* x's address, which the peer may wake; 0 none */
};

/* What a connection looks like to a waiter (upgrade.c computes it). */
struct rsx_ready_state {
	uint8_t in, out, rdhup, hup;
};

int rsx_ready_on(struct rsx_sock *s, int fd);
void rsx_ready_off(struct rsx_sock *s, int restore);
void rsx_ready_quiesce(struct rsx_sock *s);
void rsx_ready_show(struct rsx_sock *s, const struct rsx_ready_state *st);
uint64_t rsx_ready_direct(const struct rsx_sock *s);
void rsx_ready_woken(struct rsx_sock *s);
void rsx_ready_recheck(struct rsx_sock *s);
void rsx_ready_watch_out(struct rsx_sock *s);
struct rsx_dev;
int rsx_ready_chan_watch(struct rsx_dev *dev);
int rsx_ready_swap(struct rsx_sock *s);
void rsx_ready_forget_fd(struct rsx_sock *s, int fd);
void rsx_ready_fork_child(void);

/* epoll_ctl on a socket we track; 1: not ours, make the real call. */
int rsx_ready_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

/*
 * poll: rsx_poll_enter puts the stand-ins in place of upgraded sockets
 * (returns how many, or -errno), the shim makes the real call, and
 * rsx_poll_leave puts the program's descriptors back.
 */
#define RSX_POLL_SAVE 64
struct rsx_poll_ent {
	unsigned int idx;
	int fd;
	uint32_t gen;	/* counted as a poller of fd's socket (oob.h) */
	uint8_t counted;
};
struct rsx_poll_save {
	unsigned int n;
	unsigned int cap;
	struct rsx_poll_ent *ent;	/* local, or malloc()ed when many */
	struct rsx_poll_ent local[RSX_POLL_SAVE];
};
int rsx_poll_enter(struct pollfd *fds, nfds_t nfds, struct rsx_poll_save *sv);
void rsx_poll_leave(struct pollfd *fds, struct rsx_poll_save *sv);

/* select and pselect with an upgraded socket among the sets: done as ppoll.
 * Returns 1 when no set holds one (make the real call). */
int rsx_select_needs(int nfds, const fd_set *r, const fd_set *w,
		     const fd_set *e);
int rsx_select_poll(int nfds, fd_set *r, fd_set *w, fd_set *e,
		    struct timespec *ts, const sigset_t *ss);

/* Does s wait for an answer or run on a QP (upgrade.c)?  Then x stands in. */
int rsx_sock_ready_wanted(const struct rsx_sock *s);
/* A watcher event for s (upgrade.c): chan and tcp say which fired. */
void rsx_sock_ready_event(struct rsx_sock *s, int chan, uint32_t tcp_ev);
/* Recomputes what x shows (under s->lock). */
void rsx_sock_ready_sync(struct rsx_sock *s);
int rsx_sock_ready_spin(struct rsx_sock *s);
int rsx_sock_ready_arm(struct rsx_sock *s, int recent);
int rsx_ready_arm_now(void);
/* The watcher's backstop runs (rsx_sock_ready_arm) within its period. */
void rsx_ready_backstop_soon(void);
/* A program thread looks at s (under s->lock): the backstop can wait. */
void rsx_ready_seen(struct rsx_sock *s);

/*
 * The program's wait, for rsx_ready_spin(): with wait 0 it must not sleep
 * (and keeps the thread's signal mask), with wait 1 it is the program's
 * own call, under mask when mask is not NULL.  Returns what that returns,
 * with errno.
 */
typedef int rsx_ready_call(void *arg, int wait, const sigset_t *mask);

/*
 * An epoll wait's own buffer.  The spin may put events of upgraded
 * sockets in its first n entries itself (rsx_ready_show_sync); the call
 * then asks the kernel without waiting for the rest, into ev + n.
 */
struct rsx_epoll_out {
	int epfd;
	struct epoll_event *ev;
	int max;
	int n;
};

/* out: an epoll wait's (NULL for poll and select). */
int rsx_ready_spin(rsx_ready_call *call, void *arg,
		   struct rsx_epoll_out *out, int64_t timeout_us,
		   const sigset_t *ss);
/* Under s->lock, from a sync: x shows st, or this thread's epoll wait. */
void rsx_ready_show_sync(struct rsx_sock *s, const struct rsx_ready_state *st);
/* fork(): from now on x shows everything (rsx_ready_show_sync). */
void rsx_ready_forked(void);

/* A wait's timeout in us for rsx_ready_spin(): -1 none, 0 no wait. */
static inline int64_t rsx_ready_ts_us(const struct timespec *ts)
{
	if (!ts)
		return -1;
	return (int64_t)ts->tv_sec * 1000000 + ts->tv_nsec / 1000;
}

#endif
