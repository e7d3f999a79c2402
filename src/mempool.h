/* SPDX-License-Identifier: MIT */
#ifndef RSX_MEMPOOL_H
#define RSX_MEMPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>


/*
 * Memory for rings and staging buffers, carved out of large chunks.
 *
 * A pool maps chunks and hands out page-aligned blocks from them; it
 * registers nothing.  Each connection registers its own blocks in its own
 * protection domain (rsx_rdma_create(), rsx_conn_connect()): an rkey or
 * lkey then reaches that connection's memory through that connection's
 * QP and nothing else.  A new chunk is as large as the pool already is
 * (one block for the first, then doubling), at most RSX_MP_CHUNK bytes or
 * one larger block: few mappings for many connections, and the first
 * connection maps no more than a buffer of its own.
 *
 * A chunk serves one block size at a time (a slab): the block size is the
 * request rounded up to whole pages, so a ring and its control area fit in
 * one block without the waste of power-of-two classes.  A bitmap says
 * which blocks are in use.  A chunk that becomes fully free is unmapped
 * at once, unless the pool keeps empty chunks (keep; RSX_MP_KEEP by
 * default, 0): an idle process then holds nothing, and pinned memory
 * returns exactly to where it was once connections close
 * (tests/rdma/load.sh checks that).  A kept empty chunk would be re-carved
 * for whatever block size is asked next.
 *
 * Allocation happens at connection setup and teardown, never on the data
 * path, so one mutex per pool is enough.
 *
 * A freed block is given back to the kernel with MADV_DONTNEED (its MR is
 * gone by then), so a block handed out again reads as zeros (no old
 * peer's counters in a control area), and an idle pool costs no resident
 * memory.
 */
#define RSX_MP_CHUNK		(4u << 20)
#define RSX_MP_MAXBLOCKS	1024	/* RSX_MP_CHUNK / smallest page */
#define RSX_MP_KEEP		0	/* empty chunks kept per pool */

/* How a pool gets memory; the unit tests replace it. */
struct rsx_mp_ops {
	void *(*map)(size_t len);
	void (*unmap)(void *addr, size_t len);
	void (*discard)(void *addr, size_t len);
};

struct rsx_mp_chunk {
	struct rsx_mp_chunk *next;
	uint8_t *base;
	size_t len;
	size_t bsize;		/* block size; 0 while empty and uncarved */
	uint32_t nblocks;
	uint32_t nused;
	uint64_t used[RSX_MP_MAXBLOCKS / 64];
};

struct rsx_mempool {
	pthread_mutex_t lock;
	const struct rsx_mp_ops *ops;
	const char *name;	/* for the log */
	struct rsx_mp_chunk *chunks;
	uint32_t nempty;	/* chunks with no block in use */
	uint32_t keep;		/* ... kept rather than released */
	size_t bytes;		/* in all chunks */
	size_t pagesize;
};

/* One block: its memory, and the chunk it came from. */
struct rsx_mp_block {
	uint8_t *addr;
	size_t len;
	struct rsx_mp_chunk *chunk;
};

void *rsx_mempool_map(size_t len);
void rsx_mempool_init(struct rsx_mempool *mp, const char *name,
		      const struct rsx_mp_ops *ops);
int rsx_mempool_alloc(struct rsx_mempool *mp, size_t len,
		      struct rsx_mp_block *b);
void rsx_mempool_free(struct rsx_mempool *mp, struct rsx_mp_block *b);
void rsx_mempool_destroy(struct rsx_mempool *mp);

#endif
