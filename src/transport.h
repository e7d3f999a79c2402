/* SPDX-License-Identifier: MIT */
#ifndef RSX_TRANSPORT_H
#define RSX_TRANSPORT_H

#include <stdint.h>

#include "wire.h"

struct rsx_conn;

/*
 * A transport moves the ring protocol (conn.h, conn.c) between the two
 * ends of one connection: RDMA writes on a queue pair (rdma.c), or
 * stores into memory that both processes map (shm.c).  conn.c speaks
 * the protocol once, over either; each connection has its transport
 * from its making (rsx_rdma_create, rsx_shm_create) to its end.
 *
 * A message is bytes already in the peer's ring or control area as far
 * as the sender is concerned (the staging mirror on RDMA, the peer's own
 * ring in shared memory), plus its 32-bit immediate.  A transport:
 *
 *   hello      fills in the fields of a HELLO/ACK that are its own
 *   connect    joins the peer's half, from its HELLO/ACK
 *   post       sends one message: len bytes at src (in the stage) to
 *              offset roff of the peer's ring, and imm; signal asks for
 *              a completion of this one (sq_posted, sq_done count them)
 *   posted     after a batch of posts (shared memory: is anyone there?;
 *              NULL: nothing to do)
 *   poll       takes in what came, rsx_conn_recv() for each message,
 *              and the completions of our posts; returns how many
 *   repost     gives n more receives back to the peer's window (NULL:
 *              a queue entry is free again once it is read)
 *   ping       asks whether the peer is still there (a failure breaks
 *              the connection, later or at once)
 *   ping_now   ping answers at once, and nothing fails by itself later
 *              (shared memory): a sleeper that waits on its verdict asks
 *              again (rsx_conn_gone_look)
 *   arm        asks for a wake-up on the channel; 0: none can be missed.
 *              xtok non-zero: on the readiness stand-in of that name
 *              instead, where the transport can (shared memory, shm.h)
 *   disarm     takes back an arm on the stand-in (NULL: never any)
 *   woken      wake-ups sent to the stand-in so far, once those of the
 *              arms that writers took have landed (NULL: never any)
 *   event      consumes a wake-up of the channel
 *   channel    the descriptor that poll() and epoll watch
 *   destroy    frees it all, the rsx_conn too
 *   test_break RSOCKX_TEST_QP_ERR_AFTER: break the transport now (NULL:
 *              not for this one)
 */
struct rsx_transport {
	const char *name;
	void (*hello)(const struct rsx_conn *c, struct rsx_hello *h);
	int (*connect)(struct rsx_conn *c, const struct rsx_hello *peer);
	int (*post)(struct rsx_conn *c, uint64_t roff, const void *src,
		    uint32_t len, uint32_t imm, int signal);
	void (*posted)(struct rsx_conn *c);
	int (*poll)(struct rsx_conn *c);
	int (*repost)(struct rsx_conn *c, uint32_t n);
	int (*ping)(struct rsx_conn *c);
	uint8_t ping_now;
	int (*arm)(struct rsx_conn *c, uint64_t xtok);
	void (*disarm)(struct rsx_conn *c);
	uint32_t (*woken)(struct rsx_conn *c);
	void (*event)(struct rsx_conn *c);
	int (*channel)(const struct rsx_conn *c);
	void (*destroy)(struct rsx_conn *c);
	void (*test_break)(struct rsx_conn *c);
};

extern const struct rsx_transport rsx_rdma_transport;
extern const struct rsx_transport rsx_shm_transport;

/*
 * Requests a sender may have in flight (the RDMA send queue's depth; a
 * shared-memory message completes as it is posted).
 */
#define RSX_SQ_DEPTH		64

/* For the transports: the protocol's side of a message that came. */
void rsx_conn_recv(struct rsx_conn *c, uint32_t imm);

#endif
