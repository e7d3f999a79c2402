/* SPDX-License-Identifier: MIT */
#ifndef RSX_BOARD_H
#define RSX_BOARD_H

#include <stdint.h>

#include "oob.h"

/*
 * The family's board: out-of-band requests for connections that another
 * process of the family accepted.
 *
 * A process that answers probes for a port (probe.h) is the one that
 * called listen(); in a pre-forked server (nginx, apache) its workers
 * accept the connections.  The request for a connection comes to the
 * listener's CM thread, which posts it here, in shared memory that the
 * listener mapped before it forked (so only its descendants see it); the
 * process that holds the socket takes it, at accept() or at its next call
 * on the socket, upgrades, and leaves its answer here, ringing the
 * listener's bell (an eventfd the family inherited); the listener's CM
 * thread sends it.
 *
 * A slot's word is (seq << 8 | state), changed by compare-and-swap only:
 *   FREE -> POSTED (poster) -> TAKEN (taker) -> ANSWERED (taker) -> FREE
 *   POSTED -> FREE (poster: nobody took it in time, NAK)
 *   TAKEN -> FREE (poster: the taker died or hung; a late answer finds
 *   the sequence number moved on and is dropped)
 */
#define RSX_BOARD_SLOTS 64

/* A worker asleep on a socket that may move looks at the board this often. */
#define RSX_BOARD_LOOK_MS 20

int rsx_board_create(int bell);
void rsx_board_drop(void);
int rsx_board_have(void);
int rsx_board_post(struct rsx_oob_pend *p);
int rsx_board_collect(struct rsx_oob_pend *p, int64_t now);
int rsx_board_unpost(struct rsx_oob_pend *p);
struct rsx_oob_pend *rsx_board_take(const struct rsx_sock *s);
int rsx_board_news(uint32_t *seen);
void rsx_board_answer(struct rsx_oob_pend *p);

#endif
