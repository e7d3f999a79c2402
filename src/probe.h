/* SPDX-License-Identifier: MIT */
#ifndef RSX_PROBE_H
#define RSX_PROBE_H

#include <sys/socket.h>

struct rdma_event_channel;

#include "compiler.h"
#include "sock.h"

/*
 * Finding out, without root and without putting a byte into any TCP stream,
 * whether the process behind a TCP port runs rsockx (DESIGN.md 2.1).
 *
 * Responder: every process that listens on TCP port P also listens on RDMA
 * CM port P (port space TCP) and rejects each connection request with
 * private data "rsockx" + version.  Prober: a client sends an RDMA CM
 * connection request to the destination of its TCP connection, in parallel
 * with it; a reject with that private data means "rsockx here", a reject
 * with status 8 (invalid service ID: nothing listens) or any failure means
 * no.  Answers are cached per destination, positive and negative, with a
 * time to live.  One background thread per process serves the CM events of
 * both, only once an RDMA CM device exists, and those of the out-of-band
 * upgrade (oob.h), whose requests come to the same responder.
 */
enum rsx_probe_answer {
	RSX_PROBE_UNKNOWN = 0,	/* asked, no answer yet (or not askable) */
	RSX_PROBE_YES,
	RSX_PROBE_NO,
};

int rsx_probe_lookup(const struct sockaddr *sa, socklen_t len);
int rsx_probe_wait(const struct sockaddr *sa, socklen_t len);
void rsx_probe_learn(const struct sockaddr *sa, socklen_t len);
/* The CM thread, for oob.c: started (0) or -ENODEV, its channel, its bell. */
int rsx_cm_start(void);
struct rdma_event_channel *rsx_cm_channel(void);
void rsx_cm_ring(void);
/* Work with a deadline was made: wakes the CM thread if it sleeps for good. */
void rsx_cm_nudge(void);
/* The CM thread's next wake-up: the sooner of a and b ms (-1: none). */
int rsx_cm_sooner(int a, int64_t b);
#define RSX_CM_ROUND_MS	100	/* its rounds while some deadline waits */
#define RSX_CM_SLOW_MS	1000	/* its looks at a closed listener's port */
int rsx_cm_bell_fd(void);
int rsx_cm_running(void);
void rsx_probe_listen(struct rsx_sock *s, int fd);
void rsx_probe_unlisten(struct rsx_sock *s);
void rsx_probe_fork_prepare(void);
void rsx_probe_fork_parent(void);
void rsx_probe_fork_child(void);
void rsx_probe_fork_sock(struct rsx_sock *s);
/* An heir's look at the process that answered for its listener. */
#define RSX_ADOPT_WATCH	1	/* where the program waits for connections */
#define RSX_ADOPT_FORK	2	/* before fork() */
#define RSX_ADOPT_NOW	4	/* that process just exited */
void rsx_probe_adopt(struct rsx_sock *s, int fd, int how);
void rsx_probe_adopt_all(int how);
int rsx_probe_heirs_open(void);
void rsx_probe_inherit(struct rsx_sock *s);

/* Where a server waits on listener fd: an heir's look (probe.c). */
static inline void rsx_probe_heir_look(struct rsx_sock *s, int fd)
{
	if (unlikely(s->probe_heir) && s->kind == RSX_SOCK_TCP)
		rsx_probe_adopt(s, fd, RSX_ADOPT_WATCH);
}

#endif
