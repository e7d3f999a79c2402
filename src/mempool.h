/* SPDX-License-Identifier: MIT */
#ifndef RSX_MEMPOOL_H
#define RSX_MEMPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs.h"

/*
 * Memory for rings and staging buffers, carved out of large chunks.
 *
 * Registering memory is the slow part of a connection's setup (a system
 * call that pins every page) and each registration costs the device a
 * table entry.  A pool maps chunks, registers each ONCE when the pool has
 * a protection domain, and hands out page-aligned blocks from them.  A
 * new chunk is as large as the pool already is (one block for the first,
 * then doubling), at most RSX_MP_CHUNK bytes or one larger block: the
 * first connection pays no more than with a buffer of its own, many
 * connections share a few registrations.
 *
 * A chunk serves one block size at a time (a slab): the block size is the
 * request rounded up to whole pages, so a ring and its control area fit in
 * one block without the waste of power-of-two classes.  A bitmap says
 * which blocks are in use.  A chunk that becomes fully free is unmapped
 * (and deregistered) at once, unless the pool keeps empty chunks (keep;
 * RSX_MP_KEEP by default, 0): an idle process then pins nothing, and
 * pinned memory returns exactly to where it was once connections close
 * (tests/rdma/load.sh checks that).  A kept empty chunk would be re-carved
 * for whatever block size is asked next.  Where a whole chunk cannot be
 * registered (a tight RLIMIT_MEMLOCK), a chunk of exactly the block is
 * tried before failing.
 *
 * Allocation happens at connection setup and teardown, never on the data
 * path, so one mutex per pool is enough.
 *
 * Pools with a protection domain (staging buffers) register chunks with
 * LOCAL_WRITE only; their blocks use the chunk's lkey.  Pools without one
 * (receive rings) leave registration to the user, who registers exactly
 * the range a peer may write (see rsx_conn_create()); their freed blocks
 * are given back to the kernel with MADV_DONTNEED, so a block handed out
 * again reads as zeros, and an idle pool costs no resident memory.
 * Registered chunks are never discarded that way: the device keeps the
 * pinned pages, and the process would see others.
 */
#define RSX_MP_CHUNK		(4u << 20)
#define RSX_MP_MAXBLOCKS	1024	/* RSX_MP_CHUNK / smallest page */
#define RSX_MP_KEEP		0	/* empty chunks kept per pool */

/* How a pool gets memory; the unit tests replace it. */
struct rsx_mp_ops {
	void *(*map)(size_t len);
	void (*unmap)(void *addr, size_t len);
	void (*discard)(void *addr, size_t len);
	struct ibv_mr *(*reg)(struct ibv_pd *pd, void *addr, size_t len,
			      int access);
	int (*dereg)(struct ibv_mr *mr);
};

struct rsx_mp_chunk {
	struct rsx_mp_chunk *next;
	uint8_t *base;
	size_t len;
	size_t bsize;		/* block size; 0 while empty and uncarved */
	struct ibv_mr *mr;	/* NULL in a pool without a domain */
	uint32_t nblocks;
	uint32_t nused;
	uint64_t used[RSX_MP_MAXBLOCKS / 64];
};

struct rsx_mempool {
	pthread_mutex_t lock;
	struct ibv_pd *pd;	/* NULL: chunks are not registered */
	const struct rsx_mp_ops *ops;
	const char *name;	/* for the log */
	struct rsx_mp_chunk *chunks;
	uint32_t nempty;	/* chunks with no block in use */
	uint32_t keep;		/* ... kept rather than released */
	size_t bytes;		/* in all chunks */
	size_t pagesize;
};

/* One block: its memory, and the chunk's MR for its lkey (or NULL). */
struct rsx_mp_block {
	uint8_t *addr;
	size_t len;
	struct ibv_mr *mr;
	struct rsx_mp_chunk *chunk;
};

void *rsx_mempool_map(size_t len);
void rsx_mempool_init(struct rsx_mempool *mp, struct ibv_pd *pd,
		      const char *name, const struct rsx_mp_ops *ops);
int rsx_mempool_alloc(struct rsx_mempool *mp, size_t len,
		      struct rsx_mp_block *b);
void rsx_mempool_free(struct rsx_mempool *mp, struct rsx_mp_block *b);
void rsx_mempool_destroy(struct rsx_mempool *mp);

#endif
