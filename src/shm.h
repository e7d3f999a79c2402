/* SPDX-License-Identifier: MIT */
#ifndef RSX_SHM_H
#define RSX_SHM_H

#include <stdint.h>

#include "wire.h"

struct rsx_conn;

/*
 * The shared-memory transport (transport.h): the ring protocol of conn.h
 * between two processes of one host, with stores where RDMA has writes.
 *
 * The server makes one memfd per connection, sealed against shrinking
 * and growing, and maps it; the client maps it once the server has shown
 * that it holds the other end of the TCP connection (local.h).  Two areas,
 * each page-aligned, each one direction's receive side:
 *
 *   area 0 (the server's): ring[server ring_size], struct rsx_ctrl,
 *                          struct rsx_shm_q
 *   area 1 (the client's): ring[client ring_size], struct rsx_ctrl,
 *                          struct rsx_shm_q
 *
 * A message is what an RDMA WRITE WITH IMMEDIATE is on a queue pair: the
 * writer stores its bytes into the reader's ring (or control area), then
 * the immediate into the reader's queue at its own count of messages
 * modulo RSX_SHM_DEPTH, then that count + 1 into prod (release).  The
 * message credits of conn.h keep the writer within RSX_SHM_DEPTH of the
 * reader, so a queue entry is never overwritten before it is read.  The
 * reader trusts nothing of it: prod more than RSX_SHM_DEPTH ahead breaks
 * the connection, every immediate is checked as one from a queue pair.
 *
 * Waking: a reader about to sleep stores armed = 1, then looks at prod
 * once more; a writer, after prod, takes armed back to 0 and, if it was
 * 1, adds 1 to the reader's eventfd (its "completion channel"), which
 * poll(), epoll and the readiness stand-ins watch as they watch a CQ's.
 *
 * here is 1 from when a side maps the memory until it lets go of it: the
 * ping of conn.h (a peer whose TCP end closed before its cut-over; a
 * client that never cut over) asks whether it is 1 and the peer's process
 * alive, where RDMA asks the peer's queue pair.
 */
#define RSX_SHM_DEPTH	128

struct rsx_shm_q {
	uint32_t prod;		/* messages the writer has put in */
	uint32_t armed;		/* the reader sleeps on its eventfd */
	uint32_t here;		/* the reader has the memory mapped */
	uint32_t pad[13];
	uint32_t imm[RSX_SHM_DEPTH];
};

/* A connection on the shared-memory transport (transport.h), no memory yet. */
int rsx_shm_create(uint32_t ring_size, struct rsx_conn **out);

#endif
