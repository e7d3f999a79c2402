/* SPDX-License-Identifier: MIT */
#ifndef RSX_HANDOFF_H
#define RSX_HANDOFF_H

#include <stdint.h>

#include "sock.h"

/*
 * Upgraded connections that fork() shared (handoff.c).
 *
 * A fork child inherits the descriptor of an upgraded connection, not its
 * queue pair, which only the parent can use.  Most children never touch
 * such a socket (a save child of redis, a worker serving other clients),
 * so the parent keeps it on RDMA.  The first time a child does use it, it
 * asks the parent, which takes the connection back to TCP with the same
 * DOWNGRADE an exec uses (conn.h): from there on parent and child share a
 * plain TCP stream, byte-exact, as they would without rsockx.  A parent
 * that closes such a socket, or exits, downgrades it instead of ending the
 * stream on the QP, so that a child outliving it (daemon()) finds TCP.
 *
 * The asks go through a page that the parent mapped shared before the
 * fork (so only its descendants see it), one slot per shared connection,
 * and ring the parent's CM bell; the parent's CM thread answers.  A slot's
 * word is (seq << 8 | state), changed by compare-and-swap only:
 *   FREE -> SHARED (parent, at fork) -> ASKED (a child) -> TCP or LOST
 *   (parent: downgraded, or shut down) -> FREE (parent, at close)
 * A child that finds the sequence number moved on knows that the parent
 * is done with the socket and left it on TCP (or shut it down, which TCP
 * then shows).
 *
 * After an out-of-band upgrade (oob.h) the parent's downgrade also leaves
 * on the slot where the stream stands on TCP (struct rsx_ho_counts), under
 * its own sequence word (cseq, the slot's seq once they are there; 0 while
 * the slot is taken again): the child counts on from there, and once it
 * alone holds the socket (share.h) a new out-of-band request of the
 * client's moves it back onto a queue pair.
 */
#define RSX_HANDOFF_SLOTS 256

/* Bytes each way on TCP since the socket began, and their sums (oob.h). */
struct rsx_ho_counts {
	uint64_t tx;
	uint64_t rx;
	uint64_t tx_sum;
	uint64_t rx_sum;
};

/* The parent. */
int rsx_handoff_share(struct rsx_sock *s, int fd, int bell);
int rsx_handoff_live(const struct rsx_sock *s);
void rsx_handoff_counts(struct rsx_sock *s, const struct rsx_ho_counts *n);
void rsx_handoff_done(struct rsx_sock *s, int ok);
void rsx_handoff_release(struct rsx_sock *s);
int rsx_handoff_have(void);
struct rsx_sock *rsx_handoff_next(int *slot, int *fd);

/* A child. */
int rsx_handoff_ask(struct rsx_sock *s, int wait_ms);
int rsx_handoff_recount(const struct rsx_sock *s, struct rsx_ho_counts *n);
void rsx_handoff_fork_child(void);

#endif
