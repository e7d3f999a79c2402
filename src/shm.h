/* SPDX-License-Identifier: MIT */
#ifndef RSX_SHM_H
#define RSX_SHM_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

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
 * A reader whose program waits in epoll for input alone stores xtok and
 * armed = RSX_SHM_ARM_X | the count of messages it has taken in (31
 * bits) instead: the writer then sends one byte to the reader's stand-in
 * itself (the abstract Unix address rsx_shm_wake_addr(xtok)), and counts
 * it in woken once it is there, so that the program's epoll wakes without
 * a hop through the reader's watcher thread (ready.h).  A send that fails
 * adds to the eventfd instead, and is counted all the same.
 *
 * Such a byte must never land in the stand-in after the program read the
 * bytes it was for: x would show readable with nothing to read, which
 * some programs take for an error (wrk: a read() of -1 after epoll said
 * readable, and it reconnects).  So the reader takes its arm back (an
 * exchange) at every sync and arms anew, waits until woken has caught up
 * with the arms it saw taken before it makes x show what is left, and a
 * writer takes an arm (compare and exchange) only for a message newer
 * than the count in it: one whose writer was still between its prod and
 * its look at armed when the reader took it in and armed again wakes
 * nobody.  A writer that stopped between its take and its count
 * (preempted) is waited for 50 us; then the reader adds 1 to lost, and a
 * writer that finds lost moved since before its take sends nothing.  One
 * that had looked already says so in sending (stored before its look, as
 * lost is before the reader's look at sending), and is waited for until
 * it has counted its byte (10 ms at most: a peer that never counts).  (armed = 2, a stand-in arm without a count,
 * is a reader's of before 2026-12-07.)
 *
 * here is 1 from when a side maps the memory until it lets go of it: the
 * ping of conn.h (a peer whose TCP end closed before its cut-over; a
 * client that never cut over) asks whether it is 1 and the peer's process
 * alive, where RDMA asks the peer's queue pair.
 */
#define RSX_SHM_DEPTH	128
#define RSX_SHM_ARM_X	0x80000000u

struct rsx_shm_q {
	uint32_t prod;		/* messages the writer has put in */
	uint32_t armed;		/* 1: the eventfd; RSX_SHM_ARM_X: the stand-in */
	uint32_t here;		/* the reader has the memory mapped */
	uint32_t woken;		/* bytes sent to the stand-in, after each */
	uint64_t xtok;		/* the reader's stand-in's name (armed 2) */
	uint32_t lost;		/* taken arms the reader stopped waiting for */
	uint32_t sending;	/* the writer is past its look at lost */
	uint32_t pad[8];
	uint32_t imm[RSX_SHM_DEPTH];
};

_Static_assert(sizeof(struct rsx_shm_q) == 64 + 4 * RSX_SHM_DEPTH,
	       "the queue's header is one cache line");

/* A connection on the shared-memory transport (transport.h), no memory yet. */
int rsx_shm_create(uint32_t ring_size, struct rsx_conn **out);

/*
 * The abstract Unix address of a stand-in that the writers of its
 * connection wake directly ("\0rsockx-x:" and xtok in hex), and of its
 * other end (y).  Returns the address's length.
 */
socklen_t rsx_shm_wake_addr(uint64_t xtok, char end, struct sockaddr_un *a);

#endif
