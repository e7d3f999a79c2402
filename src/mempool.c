// SPDX-License-Identifier: MIT
/* Chunked memory for rings and staging buffers (mempool.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "mempool.h"
#include "stats.h"

/*
 * Memory to be registered, kept out of fork children (MADV_DONTFORK): on
 * kernels that share pinned pages with a child copy-on-write (before
 * 5.13), the parent's next write would move its page away from the one
 * the device uses.  A child never uses its parent's rings (handoff.h).
 */
void *rsx_mempool_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, len, MADV_DONTFORK)) {
		rsx_info("madvise(MADV_DONTFORK): %s", strerror(errno));
		munmap(p, len);
		return NULL;
	}
	return p;
}

static void rsx_mp_unmap(void *addr, size_t len)
{
	munmap(addr, len);
}

static void rsx_mp_discard(void *addr, size_t len)
{
	/* private anonymous memory reads as zeros afterwards */
	if (madvise(addr, len, MADV_DONTNEED))
		memset(addr, 0, len);
}

static const struct rsx_mp_ops rsx_mp_default_ops = {
	.map = rsx_mempool_map,
	.unmap = rsx_mp_unmap,
	.discard = rsx_mp_discard,
};

/*
 * Bytes of chunks, every pool's: the blocks in use are pinned, each by its
 * connection's MR (conn.c).  RSOCKX_PIN_MAX caps them.
 */
static _Atomic uint64_t rsx_mp_pinned;

/*
 * Every pool, for the fork child: it must not hand out the parent's
 * registered memory (the device's pinned pages are the parent's, the
 * child's copies are others), and another parent thread may have held a
 * pool's lock at fork time.  The child forgets the chunks (their address
 * space stays, as the parent's connections do) and starts afresh.
 */
#define RSX_MP_MAXPOOLS 64
static pthread_mutex_t rsx_mp_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_mempool *rsx_mp_pools[RSX_MP_MAXPOOLS];
static pthread_once_t rsx_mp_once = PTHREAD_ONCE_INIT;

static void rsx_mp_fork_child(void)
{
	struct rsx_mempool *mp;
	int i;

	pthread_mutex_init(&rsx_mp_reg_lock, NULL);
	atomic_store(&rsx_mp_pinned, 0);	/* the parent's are not here */
	for (i = 0; i < RSX_MP_MAXPOOLS; i++) {
		mp = rsx_mp_pools[i];
		if (!mp)
			continue;
		pthread_mutex_init(&mp->lock, NULL);
		mp->chunks = NULL;
		mp->nempty = 0;
		mp->bytes = 0;
	}
}

static void rsx_mp_atfork(void)
{
	pthread_atfork(NULL, NULL, rsx_mp_fork_child);
}

void rsx_mempool_init(struct rsx_mempool *mp, const char *name,
		      const struct rsx_mp_ops *ops)
{
	int i;

	memset(mp, 0, sizeof(*mp));
	pthread_mutex_init(&mp->lock, NULL);
	mp->name = name;
	mp->ops = ops ? ops : &rsx_mp_default_ops;
	mp->pagesize = sysconf(_SC_PAGESIZE);
	mp->keep = RSX_MP_KEEP;
	pthread_once(&rsx_mp_once, rsx_mp_atfork);
	pthread_mutex_lock(&rsx_mp_reg_lock);
	for (i = 0; i < RSX_MP_MAXPOOLS; i++) {
		if (!rsx_mp_pools[i]) {
			rsx_mp_pools[i] = mp;
			break;
		}
	}
	pthread_mutex_unlock(&rsx_mp_reg_lock);
}

/*
 * A chunk for blocks of bsize bytes: as large as the pool already is, in
 * whole blocks, at least one block and at most RSX_MP_CHUNK (or one larger
 * block).  The first connection of a process so maps no more than it
 * did with a buffer of its own, and a busy pool soon maps 4 MiB at a time.
 */
static size_t rsx_mp_chunk_len(const struct rsx_mempool *mp, size_t bsize)
{
	size_t len = mp->bytes < RSX_MP_CHUNK ? mp->bytes : RSX_MP_CHUNK;

	len = len / bsize * bsize;
	return len ? len : bsize;
}

static void rsx_mp_carve(struct rsx_mp_chunk *ch, size_t bsize)
{
	uint32_t i;

	ch->bsize = bsize;
	ch->nblocks = ch->len / bsize;
	if (ch->nblocks > RSX_MP_MAXBLOCKS)
		ch->nblocks = RSX_MP_MAXBLOCKS;
	ch->nused = 0;
	memset(ch->used, 0, sizeof(ch->used));
	/* bits past the last block read as used: the search never picks them */
	for (i = ch->nblocks; i < RSX_MP_MAXBLOCKS; i++)
		ch->used[i / 64] |= 1ull << (i % 64);
}

static void rsx_mp_release(struct rsx_mempool *mp, struct rsx_mp_chunk *ch)
{
	mp->ops->unmap(ch->base, ch->len);
	mp->bytes -= ch->len;
	rsx_stat_inc(RSX_STAT_pool_chunks_freed);
	rsx_stat_add(RSX_STAT_pool_bytes, -(uint64_t)ch->len);
	atomic_fetch_sub(&rsx_mp_pinned, ch->len);
	rsx_dbg("%s pool: chunk of %zu bytes released", mp->name, ch->len);
	free(ch);
}

static struct rsx_mp_chunk *rsx_mp_new_chunk(struct rsx_mempool *mp,
					     size_t len, int *err)
{
	uint64_t pin_max = rsx_pin_max();
	struct rsx_mp_chunk *ch;

	if (pin_max && atomic_load(&rsx_mp_pinned) + len > pin_max) {
		rsx_info("%s pool: %zu bytes more would pass RSOCKX_PIN_MAX "
			 "(%llu)", mp->name, len, (unsigned long long)pin_max);
		*err = -ENOSR;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		*err = -ENOMEM;
		return NULL;
	}
	ch->len = len;
	ch->base = mp->ops->map(len);
	if (!ch->base) {
		*err = -ENOMEM;
		goto err_free;
	}
	atomic_fetch_add(&rsx_mp_pinned, len);
	mp->bytes += len;
	rsx_stat_inc(RSX_STAT_pool_chunks);
	rsx_stat_add(RSX_STAT_pool_bytes, len);
	rsx_dbg("%s pool: new chunk of %zu bytes", mp->name, len);
	return ch;

err_free:
	free(ch);
	return NULL;
}

/*
 * A chunk to take a block of bsize from: one carved for that size with a
 * free block; else a kept empty one that holds a block, re-carved; else a
 * new one.
 */
static struct rsx_mp_chunk *rsx_mp_find(struct rsx_mempool *mp, size_t bsize,
					int *err)
{
	struct rsx_mp_chunk *ch, *empty = NULL;
	size_t want;

	for (ch = mp->chunks; ch; ch = ch->next) {
		if (ch->bsize == bsize && ch->nused && ch->nused < ch->nblocks)
			return ch;
		if (!ch->nused && ch->len >= bsize &&
		    (!empty || ch->len > empty->len))
			empty = ch;
	}
	if (empty) {
		mp->nempty--;
		rsx_mp_carve(empty, bsize);
		return empty;
	}
	want = rsx_mp_chunk_len(mp, bsize);
	ch = rsx_mp_new_chunk(mp, want, err);
	/*
	 * Close to RSOCKX_PIN_MAX a whole chunk may not fit where one block
	 * still does: a chunk of exactly one block then, rather than a
	 * connection left on TCP.
	 */
	if (!ch && want > bsize)
		ch = rsx_mp_new_chunk(mp, bsize, err);
	if (!ch)
		return NULL;
	rsx_mp_carve(ch, bsize);
	ch->next = mp->chunks;
	mp->chunks = ch;
	return ch;
}

/* A block of at least len bytes, page-aligned, in whole pages. */
int rsx_mempool_alloc(struct rsx_mempool *mp, size_t len,
		      struct rsx_mp_block *b)
{
	size_t bsize = (len + mp->pagesize - 1) & ~(mp->pagesize - 1);
	struct rsx_mp_chunk *ch;
	uint32_t i, w;
	int err = -ENOMEM;

	if (!len || bsize < len)
		return -EINVAL;
	pthread_mutex_lock(&mp->lock);
	ch = rsx_mp_find(mp, bsize, &err);
	if (!ch) {
		pthread_mutex_unlock(&mp->lock);
		return err;
	}
	for (w = 0; ~ch->used[w] == 0; w++)
		;	/* the chunk has a free block: the loop ends */
	i = w * 64 + __builtin_ctzll(~ch->used[w]);
	ch->used[w] |= 1ull << (i % 64);
	ch->nused++;
	pthread_mutex_unlock(&mp->lock);
	b->addr = ch->base + (size_t)i * bsize;
	b->len = bsize;
	b->chunk = ch;
	rsx_stat_inc(RSX_STAT_pool_blocks);
	return 0;
}

void rsx_mempool_free(struct rsx_mempool *mp, struct rsx_mp_block *b)
{
	struct rsx_mp_chunk *ch = b->chunk, **pp;
	uint32_t i;

	if (!ch)
		return;
	i = (b->addr - ch->base) / ch->bsize;
	/*
	 * Zeros for the next user (no old peer's counters in a control area),
	 * no resident pages while unused.  Its connection's MR is gone.
	 */
	mp->ops->discard(b->addr, b->len);
	pthread_mutex_lock(&mp->lock);
	ch->used[i / 64] &= ~(1ull << (i % 64));
	if (!--ch->nused) {
		if (mp->nempty < mp->keep) {
			mp->nempty++;
		} else {
			for (pp = &mp->chunks; *pp != ch; pp = &(*pp)->next)
				;
			*pp = ch->next;
			rsx_mp_release(mp, ch);
		}
	}
	pthread_mutex_unlock(&mp->lock);
	memset(b, 0, sizeof(*b));
}

/* Every block must have been freed; for tests and teardown. */
void rsx_mempool_destroy(struct rsx_mempool *mp)
{
	struct rsx_mp_chunk *ch;
	int i;

	pthread_mutex_lock(&mp->lock);
	while ((ch = mp->chunks)) {
		mp->chunks = ch->next;
		rsx_mp_release(mp, ch);
	}
	mp->nempty = 0;
	mp->bytes = 0;
	pthread_mutex_unlock(&mp->lock);
	pthread_mutex_lock(&rsx_mp_reg_lock);
	for (i = 0; i < RSX_MP_MAXPOOLS; i++)
		if (rsx_mp_pools[i] == mp)
			rsx_mp_pools[i] = NULL;
	pthread_mutex_unlock(&rsx_mp_reg_lock);
	pthread_mutex_destroy(&mp->lock);
}
